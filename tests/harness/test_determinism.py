"""Determinism: two runs of the same config (fresh drafters, fresh results files) give identical
tokens, τ, forward calls and per-step acceptance, on a tiny random model and on the real SmolLM2.

Whole runs are compared (several prompts through `run_cell`), since Token Recycling's table
persists across the prompts of a run: the second prompt's drafts depend on the first's.
"""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from goose.harness.runner import Cell, run_cell
from goose.records.results import read_rows
from tests.conftest import ROOT, bench_prompts
from tests.toy_harness import ToyTokenizer, one_thread, tiny_engine, toy_prompts  # noqa: F401

COMPARED = (
    "output_ids",
    "generated_tokens",
    "forward_calls",
    "tau",
    "step_accepted",
    "step_tree_size",
    "offered",
    "accepted",
    "routes",
)


def make(method: str):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=[f"method={method}"])
    return lambda: instantiate(cfg.method.drafter, _convert_="all")


def two_runs(engine, tokenizer, prompts, method: str, max_new: int, tmp_path) -> list[list[dict]]:
    """The method's rows of two runs; the second run reuses the first's AR rows (AR is not the
    subject here, and it is the slow half on a real model)."""
    factory = make(method)
    cell = Cell("m", "b", method, factory().config(), max_new, "float32")
    runs = []
    for i in range(2):
        out = tmp_path / f"run{i}.jsonl"
        if i:
            ar_rows = [r for r in read_rows(tmp_path / "run0.jsonl") if r["method"] == "ar"]
            out.write_text("".join(json.dumps(r) + "\n" for r in ar_rows))
        rows = run_cell(engine, tokenizer, prompts, cell, factory, out, log=lambda s: None)
        runs.append([r for r in rows if r["method"] == method])
    return runs


def assert_identical(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) > 0
    for ra, rb in zip(a, b, strict=True):
        assert ra["status"] == rb["status"] == "ok"
        for field in COMPARED:
            assert ra[field] == rb[field], (ra["prompt_id"], field)
    tau = [
        sum(r["generated_tokens"] for r in rows) / sum(r["forward_calls"] for r in rows) for rows in (a, b)
    ]
    assert tau[0] == tau[1]


@pytest.mark.parametrize("method", ["goose", "tr"])
def test_tiny_model_runs_are_identical(tmp_path, method):
    a, b = two_runs(
        tiny_engine(seed=5), ToyTokenizer(), toy_prompts(3, length=16, seed=5), method, 32, tmp_path
    )
    assert_identical(a, b)
    assert any(r["tau"] > 1.0 for r in a)  # drafts were accepted: the comparison covers the trees


@pytest.mark.parametrize("method, prompts", [("goose", 1), ("tr", 2)])  # TR: its table carries over
def test_smollm2_runs_are_identical(smollm2, tmp_path, method, prompts):
    loaded, engine = smollm2
    a, b = two_runs(engine, loaded.tokenizer, bench_prompts("humaneval", prompts), method, 32, tmp_path)
    assert_identical(a, b)
