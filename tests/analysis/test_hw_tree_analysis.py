"""analysis/hw_tree_gap.py and analysis/hw_tree_calibration.py on hand-built rows: the pooled τ, tree
size, time split and cut; the calibration curve and its error; both scripts' files through make_figures'
`build` on a results directory, and their skip without hw_tree rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import hw_tree_calibration, hw_tree_gap
from analysis.load import load
from analysis.report import Skip


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
