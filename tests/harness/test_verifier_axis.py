"""sampling.verifier: refused before the model loads where it does not apply (naming what it needs),
accepted where it does, recorded in every row and part of the cell key."""

from __future__ import annotations

import pytest

from goose.engine.core.sampling import SamplingParams
from goose.harness.cells import Cell
from goose.harness.compose import UserError, build_drafter, compose_config
from goose.records.results import cell_key


def _build(*overrides: str):
    return build_drafter(compose_config(["model=smollm2-135m", *overrides]))


@pytest.mark.parametrize(
    ("overrides", "needs"),
    [
        (["method=pld", "sampling.temperature=1.0", "sampling.verifier=traversal"], "samples its drafts"),
        (["method=stand", "sampling.verifier=traversal"], "temperature > 0"),
        (["method=stand", "sampling.temperature=1.0", "sampling.verifier=block"], "a chain"),
        (["method=stand", "sampling.temperature=1.0", "sampling.verifier=gbv"], "i.i.d. paths"),
        (["method=stand_chain", "sampling.temperature=1.0", "sampling.verifier=gbv"], "i.i.d. paths"),
        (["method=stand", "sampling.temperature=1.0", "sampling.verifier=rrs_iid"], "i.i.d."),
    ],
)
def test_a_verifier_that_does_not_apply_is_refused_naming_what_it_needs(overrides, needs):
    with pytest.raises(UserError, match="sampling.verifier") as info:
        _build(*overrides)
    assert needs in str(info.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["method=pld", "sampling.temperature=1.0"],
        ["method=stand", "sampling.temperature=1.0", "sampling.verifier=traversal"],
        ["method=stand", "sampling.temperature=1.0", "sampling.verifier=rrs"],
        ["method=stand_chain", "sampling.temperature=1.0", "sampling.verifier=block"],
        ["method=stand_iid", "sampling.temperature=0.6", "sampling.verifier=gbv"],
        ["method=stand_delayed", "sampling.temperature=0.6", "sampling.verifier=rrs_iid"],
    ],
)
def test_a_verifier_that_applies_is_accepted(overrides):
    _build(*overrides)


def test_an_unknown_verifier_is_refused_at_composition():
    with pytest.raises(UserError, match="sampling.verifier"):
        _build("method=stand", "sampling.temperature=1.0", "sampling.verifier=specinfer")


def test_the_verifier_is_recorded_and_keys_the_cell():
    def key(verifier: str) -> tuple:
        cell = Cell("m", "b", "stand", {}, 8, "float32", sampling=SamplingParams(1.0, verifier=verifier))
        base = cell.row_base()
        assert base["verifier"] == verifier
        return cell_key({**base, "prompt_id": "p", "sample_seed": 1})

    assert key("auto") != key("traversal")
