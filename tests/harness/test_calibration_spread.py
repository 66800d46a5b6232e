"""experiments/calibration_spread.py without its subprocesses: the spread and b* arithmetic on hand-made
curves, the record and the summary it prints."""

from __future__ import annotations

import json

import pytest

from experiments import calibration_spread as spread_script
from goose.engine.budget.cost_model import LatencyTable


def test_spread_is_max_over_min_per_size():
    out = spread_script.spread([[1.0, 2.0, 4.0], [1.1, 2.0, 5.0], [1.05, 2.2, 4.5]], [1, 2, 4])
    assert out["per_size"] == pytest.approx({"1": 0.1, "2": 0.1, "4": 0.25})
    assert out["median"] == pytest.approx(0.1) and out["worst"] == pytest.approx(0.25)
    assert out["worst_size"] == 4
    scaled = [[1.0, 2.0, 4.0], [1.1, 2.2, 4.4]]  # one curve 10% above the other: the shape is the same
    assert spread_script.spread([spread_script.shape(c) for c in scaled], [1, 2, 4])[
        "worst"
    ] == pytest.approx(0)


def test_b_star_follows_the_curve():
    flat = LatencyTable(sizes=[1, 64], seconds=[1.0, 1.0]).to_dict()  # free nodes: the largest tree
    steep = LatencyTable(sizes=[1, 2, 64], seconds=[1.0, 2.0, 64.0]).to_dict()  # t ∝ n: the anchor alone
    assert spread_script.b_star(flat)["chain_a0.9"] == 64
    assert spread_script.b_star(steep)["chain_a0.9"] == 1 and spread_script.b_star(steep)["auto_prior"] == 1
    assert set(spread_script.b_star(flat)) == {
        "auto_prior",
        "chain_a0.5",
        "chain_a0.7",
        "chain_a0.8",
        "chain_a0.9",
    }


def _run(rule: str, process: int, scale: float) -> dict:
    table = LatencyTable(
        sizes=[1, 2, 4],
        seconds=[scale * s for s in (0.02, 0.021, 0.03)],
        meta={
            "repeats": 5,
            "measurement": {"256": {"rounds": {"1": 5, "2": 6, "4": 5}, "outliers": {"2": 1}}},
        },
    )
    return {
        "rule": rule,
        "process": process,
        "calibrate_s": 9.0,
        "cache_hit_s": 0.02,
        "load_average": [0.1, 0.2],
        "table": table.to_dict(),
    }


def test_main_writes_the_record_and_prints_the_summary(tmp_path, monkeypatch, capsys):
    runs = [_run(rule, i, 1 + 0.01 * i) for i in range(2) for rule in ("plain", "robust")]
    monkeypatch.setattr(spread_script, "run_children", lambda args: runs)
    out = tmp_path / "spread.json"
    record = spread_script.main(["--processes", "2", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["summary"] == record["summary"]
    robust = saved["summary"]["robust"]
    assert robust["spread"]["median"] == pytest.approx(0.01) and robust["extra_rounds"] == [1, 1]
    assert robust["outliers"] == [1, 1]
    printed = capsys.readouterr().out
    assert "plain   (2 processes): t(n) spread median 1.0%, worst 1.0%" in printed
    assert "shape spread median 0.0%" in printed and f"-> {out}" in printed
    with pytest.raises(SystemExit):
        spread_script.main(["--processes", "1"])
