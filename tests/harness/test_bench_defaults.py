"""experiments.bench sets budget=auto up as run.py does: with no switch given, its `AutoBudgetSettings` are
the run config's defaults (conf/config.yaml's budget_* keys), and each switch changes the one setting it
names."""

from __future__ import annotations

import dataclasses

from experiments.bench import cli as bench_cli
from experiments.bench.driver import auto_settings
from goose.engine.budget.draft_gate import DraftGateConfig
from goose.harness.compose import RunSettings, compose_config


def _bench_settings(*argv: str):
    return auto_settings(bench_cli.parse_args(["--data-dir", ".", *argv]))


def test_the_bench_defaults_are_run_py_defaults():
    run_defaults = RunSettings.from_config(compose_config([])).auto_budget
    assert _bench_settings() == run_defaults
    assert run_defaults.gate is None and run_defaults.price_bookkeeping


def test_each_bench_switch_changes_its_setting_only():
    base = _bench_settings()
    assert _bench_settings("--gate") == dataclasses.replace(base, gate=DraftGateConfig())
    assert _bench_settings("--in-run-cost") == dataclasses.replace(base, in_run_cost=True)
    assert _bench_settings("--no-price-bookkeeping") == dataclasses.replace(base, price_bookkeeping=False)


def test_the_device_and_graphs_switches_reach_the_composed_run(monkeypatch):
    from experiments.bench import load

    args = bench_cli.parse_args(["--data-dir", "."])
    assert args.device is None and args.cuda_graphs is False
    args = bench_cli.parse_args(["--data-dir", ".", "--device", "cuda:1", "--cuda-graphs"])
    assert args.device == "cuda:1" and args.cuda_graphs is True
    monkeypatch.setattr(load, "release_engines", lambda: None)
    monkeypatch.setattr(load, "load_engine", lambda cfg: cfg)  # the composed config, not a model
    default = load.model_and_engine("smollm2-135m")
    assert default.model.device == "cpu" and default.cuda_graphs is False
    on_gpu = load.model_and_engine("smollm2-135m", "bfloat16", device="cuda", cuda_graphs=True)
    assert on_gpu.model.device == "cuda" and on_gpu.cuda_graphs is True and on_gpu.model.dtype == "bfloat16"
