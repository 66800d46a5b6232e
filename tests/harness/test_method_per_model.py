"""A method's config may interpolate the model's (conf/method/rest.yaml: `datastore: mbpp_nontest.${model.name}`),
so every driver that composes one must compose it with the model it runs: composed without, it silently takes
the default model's values (REST on Gemma-3 searched SmolLM2's token ids and drafted nothing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from omegaconf import OmegaConf

from experiments.bench import contenders, load
from experiments.lossless_stress import compose_job
from goose import api
from goose.engine.core.sampling import SamplingParams
from goose.sources.suffix_array import find_datastore
from tests.conftest import ROOT

MODELS = ("smollm2-135m", "gemma3-270m")  # the offline models, each with its shipped REST datastore
METHODS = sorted(p.stem for p in (ROOT / "conf" / "method").glob("*.yaml"))


def resolved(cfg: Any) -> dict[str, Any]:
    return OmegaConf.to_container(cfg.method, resolve=True)


# Each driver's way from (method, model) to what it runs: the drafter's config or the resolved method config.
DRIVERS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "experiments.bench": lambda method, model: load.method_factory(method, model=model)().config(),
    "experiments.lossless_stress": lambda method, model: resolved(
        compose_job(model, "humaneval", method, [])
    ),
    "goose.api": lambda method, model: resolved(api.method_config(method, model=model)),
}


@pytest.mark.parametrize("model", MODELS)
def test_rest_reads_the_datastore_of_the_benchmarked_model(model):
    drafter = load.method_factory("rest", model=model)()
    assert drafter.config()["datastore"] == f"mbpp_nontest.{model}"
    assert find_datastore(f"mbpp_nontest.{model}") is not None  # shipped for both offline models


@pytest.mark.parametrize("driver", sorted(DRIVERS))
@pytest.mark.parametrize("model", MODELS)
def test_no_method_composed_for_a_model_mentions_another_model(driver, model):
    """Every conf/method/*.yaml composed for `model` by `driver`: no value names the other model."""
    others = [m for m in MODELS if m != model]
    for method in METHODS:
        text = json.dumps(DRIVERS[driver](method, model), default=str)
        assert not [m for m in others if m in text], f"{driver}: method={method} for {model}: {text}"


def test_bench_checks_contenders_with_the_benchmarked_model(monkeypatch):
    """--method-overrides are composed before the model loads, with the benchmarked model's values."""
    made: list[dict[str, Any]] = []
    real = contenders.method_factory

    def spy(name, overrides=(), *, model):
        make = real(name, overrides, model=model)
        made.append(make().config())
        return make

    monkeypatch.setattr(contenders, "method_factory", spy)
    overrides = {"rest": ["method.drafter.num_draft=8"]}
    contenders.check_contenders(["engine:rest"], SamplingParams(0.0), overrides, model="gemma3-270m")
    assert [(c["datastore"], c["num_draft"]) for c in made] == [("mbpp_nontest.gemma3-270m", 8)]
