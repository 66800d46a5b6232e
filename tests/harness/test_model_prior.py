"""hw_tree's and OPT-Tree's `acceptance_prior=auto` (OPT-Tree's default): composed with a configured model, the
drafter's estimator starts from the prior calibrated on that model (goose/data/priors/), which changes its
acceptance estimates; `hand`, a method without the field and a transformers model keep the hand prior."""

from __future__ import annotations

import numpy as np
import pytest

from goose.api import method_config
from goose.harness.compose import RunSettings, build_drafter, compose_config, drafter_spec


def drafter(*overrides: str):
    return build_drafter(compose_config(list(overrides)))


def estimates(d) -> np.ndarray:
    """The drafter's prior acceptance estimates, whichever estimator it has."""
    if hasattr(d, "estimator"):  # hw_tree
        return np.asarray(d.estimator.table(), dtype=float)
    return np.asarray(d.acceptance.rate_table(), dtype=float)  # OPT-Tree


@pytest.mark.parametrize("method", ["hw_tree", "opt_tree"])
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_auto_starts_from_the_models_calibrated_prior(method, model):
    auto = drafter(f"model={model}", f"method={method}", "method.drafter.acceptance_prior=auto")
    hand = drafter(f"model={model}", f"method={method}", "method.drafter.acceptance_prior=hand")
    assert auto.config()["acceptance_prior"] == f"{model}-bfloat16"  # the shipped prior's name
    assert "acceptance_prior" not in hand.config()
    assert not np.allclose(estimates(auto), estimates(hand))  # the prior changes the estimates


def test_the_defaults_opt_tree_from_the_models_prior_hw_tree_from_the_hand_prior():
    assert (
        drafter("model=gemma3-270m", "method=opt_tree").config()["acceptance_prior"] == "gemma3-270m-bfloat16"
    )
    assert "acceptance_prior" not in drafter("model=gemma3-270m", "method=hw_tree").config()


def test_a_job_instantiates_the_resolved_spec():
    cfg = compose_config(["model=gemma3-270m", "method=opt_tree"])
    assert RunSettings.from_config(cfg).drafter["acceptance_prior"] == "gemma3-270m"
    goose = compose_config(["model=gemma3-270m", "method=goose"])
    assert drafter_spec(goose) is goose.method.drafter  # no such field: the node as composed


def test_an_explicit_prior_is_kept():
    d = drafter("model=gemma3-270m", "method=hw_tree", "method.drafter.acceptance_prior=smollm2-135m")
    assert d.config()["acceptance_prior"] == "smollm2-135m-bfloat16"


def test_a_transformers_model_keeps_the_hand_prior():
    # no conf/model: the default model's prior would be another model's
    assert "acceptance_prior" not in build_drafter(method_config("opt_tree")).config()
    chosen = build_drafter(method_config("opt_tree", {"acceptance_prior": "gemma3-270m"}))
    assert chosen.config()["acceptance_prior"] == "gemma3-270m-bfloat16"
