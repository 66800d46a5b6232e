"""hw_tree on the real SmolLM2-135M (fp32): token-identical to AR on HumanEval, GSM8K and MT-Bench, at its
fixed budget and sized by a latency curve as budget=auto hands it over (a hand-set CPU-like curve, so the
trees do not depend on this machine's load)."""

from __future__ import annotations

import pytest

from baselines.hw_tree import HwTreeDrafter
from goose.engine.budget.auto_budget import AutoBudget
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from tests.conftest import bench_prompts

CPU_LIKE = LatencyTable(sizes=[1, 8, 16, 32, 64], seconds=[1.0, 1.15, 1.35, 1.8, 2.9])


def assert_identical(smollm2, bench: str, limit: int, max_new: int, auto: bool) -> list[float]:
    loaded, engine = smollm2
    drafter = HwTreeDrafter()
    sizer = AutoBudget(CPU_LIKE) if auto else None  # one drafter and one sizer across prompts, as in a run
    taus = []
    for p in bench_prompts(bench, limit):
        ids = loaded.tokenizer(p.text).input_ids
        ref = generate(engine, ARDrafter(), ids, max_new)
        got = generate(engine, drafter, ids, max_new, sizer=sizer)
        assert got.output_ids == ref.output_ids, f"hw_tree differs from AR on {bench} {p.prompt_id}"
        assert got.forward_calls <= ref.forward_calls
        taus.append(got.tau)
    return taus


@pytest.mark.parametrize("auto", [False, True])
def test_hw_tree_identical_to_ar_smoke(smollm2, auto):
    taus = assert_identical(smollm2, "humaneval", limit=1, max_new=32, auto=auto)
    assert max(taus) > 1.0


@pytest.mark.slow
@pytest.mark.parametrize("auto", [False, True])
@pytest.mark.parametrize("bench", ["humaneval", "gsm8k", "mtbench"])
def test_hw_tree_identical_to_ar(smollm2, bench, auto):
    assert_identical(smollm2, bench, limit=3, max_new=64, auto=auto)
