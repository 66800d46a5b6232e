"""experiments/gpu/projection.py: a hand-computed projection, and the replay of the shipped SmolLM2 rows
against a flat cost curve (which must reduce to the ratio of τ)."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.gpu.projection import markdown, project, prompt_seconds, read_rows, select_rows
from goose.records.cost_curve import CostCurve, PrefillCurve

ROOT = Path(__file__).resolve().parents[2]


def row(method: str, trees: list[int], accepted: list[int], draft_s: float = 0.0, prompt: str = "p0") -> dict:
    return {
        "method": method,
        "bench": "toy",
        "prompt_id": prompt,
        "prompt_tokens": 100,
        "step_tree_size": trees,
        "step_accepted": accepted,
        "generated_tokens": 1 + sum(a + 1 for a in accepted),
        "draft_s": draft_s,
        "update_s": draft_s,
        "status": "ok",
        "experiment": "cpu_main",
    }


CURVE = CostCurve(sizes=[1, 4], seconds={100: [1.0, 2.0], 300: [2.0, 4.0]})
PREFILL = PrefillCurve(lengths=[100], seconds=[0.5])


def test_a_hand_computed_projection():
    ar = row("ar", [1, 1, 1], [0, 0, 0])
    tree = row("goose", [4], [2], draft_s=0.1)
    # AR: prefill 0.5 + t(1, 100) + t(1, 101) + t(1, 102) = 0.5 + 1 + 1.005 + 1.01
    assert prompt_seconds(ar, CURVE, PREFILL, 0.0) == pytest.approx(3.515)
    # Goose: prefill 0.5 + t(4, 100) + (draft 0.1 + update 0.1)
    assert prompt_seconds(tree, CURVE, PREFILL, 0.2) == pytest.approx(2.7)
    table = {r["method"]: r for r in project([ar, tree], CURVE, PREFILL)}
    assert table["goose"]["host_ms_per_step"] == pytest.approx(200.0)
    assert table["goose"]["projected_speedup"] == pytest.approx(3.515 / 2.7)
    assert table["goose"]["tau"] == 2.0 and table["goose"]["mean_tree"] == 4.0  # 4 tokens, 2 calls
    assert table["ar"]["projected_speedup"] == pytest.approx(1.0)
    # a slower drafter projects a smaller speed-up
    slow = {r["method"]: r for r in project([ar, tree], CURVE, PREFILL, overhead_s={"goose": 1.0})}
    assert slow["goose"]["projected_speedup"] == pytest.approx(3.515 / 3.5)
    assert "| goose |" in markdown(list(table.values()), "caption")


def test_only_prompts_that_both_completed_are_compared():
    rows = [
        row("ar", [1], [0], prompt="a"),
        row("goose", [4], [2], prompt="a"),
        row("goose", [4], [0], prompt="b"),
    ]
    (goose,) = [r for r in project(rows, CURVE, PREFILL) if r["method"] == "goose"]
    assert goose["prompts"] == 1


def test_on_the_shipped_rows_a_flat_curve_projects_the_ratio_of_tau():
    rows = select_rows(read_rows(ROOT / "results" / "reference"))
    if not rows:
        pytest.skip("no shipped SmolLM2 rows")
    flat = CostCurve(sizes=[1, 256], seconds={128: [1.0, 1.0]})
    one = PrefillCurve(lengths=[1], seconds=[1.0])  # a prefill costs one step: T = forward calls
    methods = {r["method"] for r in rows}
    table = project(rows, flat, one, overhead_s=dict.fromkeys(methods, 0.0))
    assert {r["method"] for r in table} >= {"ar", "pld", "tr", "goose", "opt_tree", "suffix", "sam"}
    by_cell = {(r["method"], r["bench"]): r for r in table}
    for (method, bench), r in by_cell.items():
        ar = by_cell[("ar", bench)]
        # with every forward call costing the same, the speed-up is τ_m / τ_AR (the paper's τ)
        assert r["projected_speedup"] == pytest.approx(r["tau"] / ar["tau"], rel=1e-9), (method, bench)
    assert by_cell[("goose", "humaneval")]["projected_speedup"] > 2.0
