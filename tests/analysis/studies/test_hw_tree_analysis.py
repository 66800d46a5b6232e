"""analysis/studies/hw_tree/hw_tree_gap.py and hw_tree_calibration.py on hand-built rows: the pooled τ,
tree size, time split and cut; the calibration curve and its error; both scripts' files through
make_figures' `build` on a results directory, and their skip without hw_tree rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.load import load
from analysis.report import Skip
from analysis.studies.hw_tree import hw_tree_calibration, hw_tree_gap, hw_tree_sizing


def row(method: str, bench: str = "humaneval", prompt: str = "0", **extra) -> dict:
    base = {
        "schema_version": 1,
        "model": "smollm2-135m",
        "bench": bench,
        "method": method,
        "config_hash": "x",
        "prompt_id": prompt,
        "max_new_tokens": 64,
        "dtype": "float32",
        "chat_template": False,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "sample_seed": None,
        "status": "ok",
        "generated_tokens": 30,
        "forward_calls": 11,  # 10 steps
        "offered": {"spine": 40, "branch": 10},  # 5 drafted nodes a step: tree 6
        "draft_s": 0.01,
        "forward_s": 0.08,
        "walk_s": 0.005,
        "update_s": 0.005,
        "verify_s": 0.085,
        "drafter_stats": {},
    }
    return {**base, **extra}


AUTO_STATS = {"auto_trees": 8, "auto_nodes_proposed": 80, "auto_nodes_verified": 48, "auto_cut_to_ar": 2}
HW_STATS = {
    "hw_steps": 10,
    "hw_pool_nodes": 300,
    "hw_verified_nodes": 60,
    "route_ar": 1,
    "hw_calib_nodes": [4, 0, 0, 0, 0, 0, 0, 0, 0, 6],
    "hw_calib_accepted": [1, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    "hw_calib_predicted": [0.2, 0, 0, 0, 0, 0, 0, 0, 0, 5.7],
}


def test_summary_pools_tau_tree_split_and_cut():
    s = hw_tree_gap.summarise([row("goose_auto", drafter_stats=AUTO_STATS)] * 2)
    assert s["tau"] == pytest.approx(60 / 22) and s["tree"] == pytest.approx(6.0)
    assert s["draft_ms"] == pytest.approx(1.0) and s["forward_ms"] == pytest.approx(8.0)
    assert s["off_forward"] == pytest.approx(0.02 / 0.1)
    # per step: 160 proposed nodes over 16 trees + 4 anchor-only steps of 20: 1 + 8 - 0.8 = 8.2
    assert s["proposed"] == pytest.approx(8.2) and s["cut"] == pytest.approx(64 / 20)
    assert s["cut_to_ar"] == pytest.approx(0.2)
    hw = hw_tree_gap.summarise([row("hw_tree_auto", drafter_stats=HW_STATS)])
    assert (hw["proposed"], hw["cut"], hw["cut_to_ar"]) == (30, 24, 0.1)
    pld = hw_tree_gap.summarise([row("pld")])
    assert pld["proposed"] != pld["proposed"]  # NaN: no size rule


def test_forward_against_the_runs_latency_curve():
    curve = {"sizes": [1, 2, 4], "seconds": [0.010, 0.012, 0.020]}
    # sizes 1, 3 and 6 on the curve: 10 + 16 + 28 (the last segment extended) = 54 ms; 70 ms measured
    r = row(
        "hw_tree_auto", budget_latency=curve, step_tree_size=[1, 3, 6], forward_s=0.070, prompt_tokens=500
    )
    assert hw_tree_gap.curve_seconds(r) == pytest.approx(0.054)
    s = hw_tree_gap.summarise([r, row("hw_tree_auto", prompt_tokens=100)])  # the second has no curve
    assert s["forward_vs_curve"] == pytest.approx(0.070 / 0.054)
    assert s["prompt_tokens"] == pytest.approx(300)
    assert (
        hw_tree_gap.summarise([row("pld")])["forward_vs_curve"]
        != hw_tree_gap.summarise([row("pld")])["forward_vs_curve"]
    )  # NaN: no curve recorded


def test_prefill_and_setup_per_prompt():
    # 2 prompts: prefill 40 and 60 ms; wall 200 ms each, of which 100 ms of steps (draft + verify + update)
    rows = [
        row("goose_auto", prefill_s=0.04, wall_time_s=0.2),
        row("goose_auto", prefill_s=0.06, wall_time_s=0.2),
    ]
    s = hw_tree_gap.summarise(rows)
    assert s["prefill_ms"] == pytest.approx(50.0)
    assert s["setup_ms"] == pytest.approx((0.4 - 0.1 - 0.2) / 2 * 1e3)


def test_gap_table_keeps_the_methods_of_the_question():
    rows = [row("goose_auto"), row("pld"), row("hw_tree_auto"), row("eagle2"), row("pld", temperature=0.7)]
    table = hw_tree_gap.gap_table([("run", rows)])
    assert [t["method"] for t in table] == ["goose_auto", "pld", "hw_tree_auto"]
    assert hw_tree_gap.gap_method_name("suffix_auto") == "SuffixDecoding auto"


def test_calibration_curve_and_error():
    bins = hw_tree_calibration.pooled_bins([row("hw_tree", drafter_stats=HW_STATS)] * 2)
    points = hw_tree_calibration.curve(bins)
    assert [p["nodes"] for p in points] == [8, 12]
    assert points[0]["predicted"] == pytest.approx(0.05) and points[0]["observed"] == pytest.approx(0.25)
    assert points[1]["predicted"] == pytest.approx(0.95) and points[1]["observed"] == pytest.approx(0.5)
    ece = hw_tree_calibration.expected_calibration_error(points)
    assert ece == pytest.approx((8 * 0.2 + 12 * 0.45) / 20)
    assert hw_tree_calibration.pooled_bins([row("pld")]) is None


def test_calibration_per_benchmark_sums_predicted_against_accepted():
    rows = [row("hw_tree", bench="humaneval", drafter_stats=HW_STATS), row("hw_tree", bench="gsm8k")]
    found = hw_tree_calibration.bench_totals([("runs", rows)])
    assert [(b, [p["nodes"] for p in pts]) for _, _, _, b, pts in found] == [("humaneval", [4, 6])]
    note = hw_tree_calibration.bench_note(*found[0])
    # HW_STATS: 10 verified nodes, predictions summing to 0.2 + 5.7, 1 + 3 accepted
    assert note == (
        "runs smollm2-135m hw_tree humaneval: 10 verified nodes, Σ predicted 6 against 4 accepted (1.48×), "
        "ECE 0.350"
    )


def test_row_value_notes_sum_rows_and_credit_per_benchmark():
    stats = {"hw_rows_explored": 40, "hw_rows_credit": 3}
    rows = [
        row("hw_tree", drafter_stats=stats),
        row("hw_tree", prompt="1", drafter_stats={"hw_rows_explored": 10, "hw_rows_credit": 2}),
        row("hw_tree", bench="gsm8k", drafter_stats=HW_STATS),  # written before row_value: no note
    ]
    assert hw_tree_calibration.row_value_notes([("runs", rows)]) == [
        "runs smollm2-135m hw_tree humaneval: 50 rows written only by rejected nodes, 5 nodes accepted "
        "from them (g = 0.100 a row)"
    ]


def write_rows(folder: Path, rows: list[dict]) -> None:
    path = folder / "smollm2-135m" / "humaneval.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_scripts_write_their_files_and_skip_without_rows(tmp_path):
    results = tmp_path / "results" / "runs"
    write_rows(results, [row("ar", method_config={}), row("hw_tree_auto", drafter_stats=HW_STATS)])
    bench_run = tmp_path / "results" / "bench" / "b1" / "repeat0"
    write_rows(bench_run, [row("goose_auto", drafter_stats=AUTO_STATS), row("pld")])
    res = load(results, tmp_path / "results")
    out = tmp_path / "figures"
    gap = hw_tree_gap.build(res, out)
    assert {p.name for p in gap.files} == {"hw_tree_gap.md", "hw_tree_gap.tex"}
    text = (out / "hw_tree_gap.md").read_text()
    assert "bench/b1" in text and "Goose auto" in text and "hw_tree auto" in text
    cal = hw_tree_calibration.build(res, out)
    assert {p.name for p in cal.files} >= {"hw_tree_calibration.md", "hw_tree_calibration.png"}
    empty = tmp_path / "empty"
    write_rows(empty, [row("ar")])
    with pytest.raises(Skip):
        hw_tree_calibration.build(load(empty, tmp_path / "nothing"), out)
    with pytest.raises(Skip):
        hw_tree_gap.build(load(empty, tmp_path / "nothing"), out)


def test_registered_in_make_figures():
    from analysis import make_figures

    assert hw_tree_gap in make_figures.SCRIPTS and hw_tree_calibration in make_figures.SCRIPTS


# ---------------------------------------------------------- analysis/studies/hw_tree/hw_tree_sizing.py
SIZE_STATS = {
    "hw_size_buckets": [1, 8, 16],
    "hw_size_steps": [2, 0, 4],
    "hw_size_nodes": [2, 0, 64],
    "hw_size_predicted": [0.0, 0.0, 8.0],
    "hw_size_gains": [0.0, 0.0, 0.4],
    "hw_size_accepted": [0, 0, 6],
    "hw_size_half_nodes": [2, 0, 32],
    "hw_size_half_predicted": [0.0, 0.0, 5.0],
    "hw_size_half_accepted": [0, 0, 5],
    "hw_size_cost": [0.02, 0.0, 0.08],
    "hw_size_half_cost": [0.02, 0.0, 0.048],
}


def test_sizing_pools_buckets_and_prices_both_halves():
    rows = [row("hw_tree_auto", drafter_stats=SIZE_STATS)] * 2
    rows.append(row("hw_tree_auto", drafter_stats=SIZE_STATS, temperature=0.7))  # sampled: not pooled
    ((key, buckets),) = hw_tree_sizing.sizing_sets([("bench/x", rows)])
    assert key == ("bench/x", "smollm2-135m", "hw_tree_auto", "humaneval")
    assert [b["bucket"] for b in buckets] == ["1", "9+"]  # the empty 2–8 bucket is left out
    ar, big = buckets
    assert ar["steps"] == 4 and ar["per_ms"] == pytest.approx(4 / 40)  # 1 token a 10 ms step
    assert big["steps"] == 8 and big["size"] == pytest.approx(16)
    assert big["predicted"] == pytest.approx(2.0) and big["accepted"] == pytest.approx(1.5)
    assert big["half_predicted"] == pytest.approx(1.25) and big["half_accepted"] == pytest.approx(1.25)
    # whole: (8 + 12) tokens / 160 ms; first half: (8 + 10) / 96 ms, more per ms: the second half did not pay
    assert big["per_ms"] == pytest.approx(20 / 160) and big["half_per_ms"] == pytest.approx(18 / 96)


def test_sizing_refuses_rows_with_other_buckets_and_skips_without_stats(tmp_path):
    other = {**SIZE_STATS, "hw_size_buckets": [1, 4, 16]}
    with pytest.raises(ValueError, match="different size buckets"):
        hw_tree_sizing.pooled([row("hw_tree", drafter_stats=SIZE_STATS), row("hw_tree", drafter_stats=other)])
    assert hw_tree_sizing.pooled([row("pld")]) is None
    d = tmp_path / "res"
    d.mkdir()
    (d / "rows.jsonl").write_text(json.dumps(row("pld")) + "\n")
    with pytest.raises(Skip, match="size outcomes"):
        hw_tree_sizing.build(load(d), tmp_path / "fig")
