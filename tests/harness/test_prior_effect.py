"""experiments.prior_effect without a model: each arm starts the estimates it names from the prior it names
(budget=auto's size rule and, for OPT-Tree and hw_tree, their own estimator), and the per-benchmark summary
on hand-built records with exact values."""

from __future__ import annotations

import pytest

from experiments import prior_effect
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.acceptance_prior import HAND
from goose.engine.core.decode import Generation

LATENCY = LatencyTable(sizes=[1, 8, 64], seconds=[0.02, 0.025, 0.06])


@pytest.fixture
def arms(monkeypatch):
    monkeypatch.setattr(prior_effect, "engine_latency", lambda engine: LATENCY)
    return prior_effect.arms("smollm2-135m", object(), ["suffix", "opt_tree", "hw_tree"])


def test_arms_and_the_priors_they_start_from(arms):
    assert list(arms) == [
        "ar",
        "suffix:hand",
        "suffix:auto",
        "opt_tree:hand",
        "opt_tree:auto",
        "opt_tree:prior",
        "hw_tree:hand",
        "hw_tree:prior",
    ]
    sizer_prior = {n: make().sizer.acceptance.prior_name for n, make in arms.items() if n != "ar"}
    assert sizer_prior == {
        "suffix:hand": HAND,
        "suffix:auto": "smollm2-135m-bfloat16",
        "opt_tree:hand": HAND,
        "opt_tree:auto": "smollm2-135m-bfloat16",
        "opt_tree:prior": "smollm2-135m-bfloat16",
        "hw_tree:hand": HAND,
        "hw_tree:prior": "smollm2-135m-bfloat16",
    }
    assert arms["opt_tree:auto"]().drafter.acceptance.prior_name == HAND
    assert arms["opt_tree:prior"]().drafter.acceptance.prior_name == "smollm2-135m-bfloat16"
    assert arms["hw_tree:hand"]().drafter.estimator.prior_name == HAND
    assert arms["hw_tree:prior"]().drafter.estimator.prior_name == "smollm2-135m-bfloat16"


def gen(tokens: int, seconds: float, forwards: int) -> Generation:
    return Generation(output_ids=[0] * tokens, forward_calls=forwards, wall_time_s=seconds, prefill_s=0.0)


def test_summary_per_benchmark():
    # two benchmarks of two prompts, two rounds; AR: 10 tokens in 1 s per prompt
    ar = [[gen(10, 1.0, 10)] * 4] * 2
    m = [[gen(10, 0.5, 5), gen(10, 0.5, 5), gen(10, 1.0, 8), gen(10, 2.0, 8)]] * 2
    s = prior_effect.summarize({"ar": ar, "m": m}, ["a", "b"])["m"]
    assert s["per_bench"]["a"] == {"median": 2.0, "min": 2.0, "max": 2.0}
    assert s["per_bench"]["b"]["median"] == pytest.approx(20 / 3.0 / 10, abs=1e-12)
    assert s["speedup"]["median"] == pytest.approx(40 / 4.0 / 10, abs=1e-12)
    assert s["tau"] == pytest.approx(80 / 52, abs=1e-12)
    assert "| m | 1.54 |" in prior_effect.table({"m": s}, ["a", "b"])


def test_the_record_carries_every_argument_and_the_code_state(tmp_path):
    import argparse
    import json

    from experiments.interleaved import add_common_args, write_record
    from goose.records.code_state import code_state

    ap = argparse.ArgumentParser()
    add_common_args(ap, ["goose", "hw_tree"], "out")
    args = ap.parse_args(["--repeats", "5"])
    write_record({"arms": {}}, args, ["HumanEval/0"], "cpu", tmp_path / "r" / "x.json")
    setup = json.loads((tmp_path / "r" / "x.json").read_text())["setup"]
    assert (
        setup["repeats"] == 5 and setup["methods"] == "goose,hw_tree" and setup["prompts"] == ["HumanEval/0"]
    )
    assert setup["code"] == code_state() and setup["cpu"] == "cpu"
