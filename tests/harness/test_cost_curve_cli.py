"""experiments.cost_curve: `--temperature` > 0 has the calibration verify sampled at that temperature (the
curve a sampled run's budget=auto uses); without it the steps are greedy."""

from __future__ import annotations

from types import SimpleNamespace

import experiments.cost_curve as cost_curve
from goose.engine.budget.cost_model import LatencyTable


def _run(tmp_path, monkeypatch, *argv: str):
    seen = []

    def calibrate(engine, **settings):
        seen.append(settings.get("sampling"))
        return LatencyTable(sizes=[1, 2], seconds=[0.01, 0.012], samples=[[0.01], [0.012]])

    floor = SimpleNamespace(
        seconds=lambda n, kv: 0.005, as_dict=lambda: {}, bandwidth=1e9, matmul_flops=1e9, weight_bytes=1e6
    )
    monkeypatch.setattr(
        cost_curve, "model_and_engine", lambda m, d: (None, SimpleNamespace(device="cpu", model=None))
    )
    monkeypatch.setattr(cost_curve, "calibrate", calibrate)
    monkeypatch.setattr(cost_curve, "measure_floor", lambda model: floor)
    monkeypatch.setattr(cost_curve, "environment", lambda: {})
    cost_curve.main(["--dtypes", "float32", "--out-dir", str(tmp_path), *argv])
    return seen


def test_temperature_makes_the_calibration_sampled(tmp_path, monkeypatch):
    assert _run(tmp_path, monkeypatch) == [None]
    (sampled,) = _run(tmp_path, monkeypatch, "--temperature", "1.0")
    assert sampled.temperature == 1.0 and not sampled.greedy
