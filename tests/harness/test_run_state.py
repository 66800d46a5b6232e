"""A cell whose drafter carries state across prompts (TR's run-long table, Goose with a persistent
table, budget=auto's learnt acceptance rates) gives the same rows when interrupted and resumed as
when run in one go: the runner checkpoints the state beside the rows (goose.harness.run_state).
Without the checkpoint the resumed rows differ, which shows the comparison can fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from baselines.token_recycling import TokenRecyclingDrafter
from goose.engine.budget.auto_budget import AutoBudget, AutoBudgetSettings
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.sizing import Speculator
from goose.harness.run_state import RunStateStore
from goose.harness.runner import run_cell
from goose.method.drafter import GooseDrafter
from goose.records.results import read_rows
from tests.toy_harness import ToyTokenizer, cell_of, one_thread, tiny_engine, toy_prompts  # noqa: F401

# Prompts that share their token pool, so that a table learnt on one prompt drafts for the next.
PROMPTS = toy_prompts(6, length=16, seed=3)
MAX_NEW = 40
LATENCY = LatencyTable(sizes=[1, 8, 64], seconds=[1.0, 1.1, 2.0])

MAKERS = {
    "tr": lambda: TokenRecyclingDrafter(),
    "goose_persistent": lambda: GooseDrafter(name="goose_persistent", persistent_table=True),
    # the size rule alone: the gate and the bookkeeping price act on measured seconds, which no two runs share
    "tr_auto": lambda: Speculator(
        TokenRecyclingDrafter(name="tr_auto"),
        AutoBudget(LATENCY, settings=AutoBudgetSettings(gate=None, price_bookkeeping=False)),
    ),
}


def _run(engine, make, out: Path, prompts) -> list[dict]:
    made = make()  # a drafter, or a drafter and its sizer
    cell = cell_of(Speculator.of(made).drafter.name, made, MAX_NEW)
    run_cell(engine, ToyTokenizer(), prompts, cell, make, out / "toy.jsonl", log=lambda line: None)
    rows = [r for r in read_rows(out / "toy.jsonl") if r["method"] == cell.method]
    return sorted(rows, key=lambda r: int(r["prompt_id"][1:]))


def _fingerprint(rows: list[dict]) -> list[tuple]:
    return [(r["prompt_id"], r["output_ids"], r["forward_calls"], r["step_tree_size"]) for r in rows]


@pytest.mark.parametrize("method", sorted(MAKERS))
def test_interrupted_and_resumed_cell_equals_an_uninterrupted_one(tmp_path, method):
    engine = tiny_engine(seed=2)
    make = MAKERS[method]
    whole = _run(engine, make, tmp_path / "whole", PROMPTS)

    # "Interrupted" after 3 prompts (a process that ran only those), then resumed by a new one.
    resumed_dir = tmp_path / "resumed"
    _run(engine, make, resumed_dir, PROMPTS[:3])
    resumed = _run(engine, make, resumed_dir, PROMPTS)
    assert _fingerprint(resumed) == _fingerprint(whole)
    assert [r["run_state_prompts"] for r in resumed] == list(range(6))
    assert [r["run_state_restored"] for r in resumed] == [False] * 3 + [True] * 3
    assert len(list((resumed_dir / "toy.state").glob("*.pkl"))) == 1  # older checkpoints pruned

    # The control: the same resume without the checkpoint starts the table afresh and differs.
    control_dir = tmp_path / "control"
    _run(engine, make, control_dir, PROMPTS[:3])
    shutil.rmtree(control_dir / "toy.state")
    control = _run(engine, make, control_dir, PROMPTS)
    assert _fingerprint(control) != _fingerprint(whole)
    assert [r["run_state_prompts"] for r in control[3:]] == [0, 1, 2]


def test_a_kill_between_checkpoint_and_row_leaves_the_checkpoint_the_resume_needs(tmp_path):
    """The checkpoint after prompt j is written before prompt j's row; the one before prompt j is
    deleted only after the row. A kill in between: the row is missing, both checkpoints exist, and
    the resume picks the one that has seen exactly the prompts whose rows are on disk."""
    engine = tiny_engine(seed=2)
    make = MAKERS["tr"]
    whole = _run(engine, make, tmp_path / "whole", PROMPTS)

    out = tmp_path / "killed"
    _run(engine, make, out, PROMPTS[:3])
    state_dir = out / "toy.state"
    (kept,) = state_dir.glob("*.pkl")  # the state after prompts 0..2
    # Simulate the kill: run prompt 3 into a scratch file, keep only its checkpoint (after 0..3).
    scratch = tmp_path / "scratch"
    shutil.copytree(out, scratch)
    _run(engine, make, scratch, PROMPTS[:4])
    after4 = next(p for p in (scratch / "toy.state").glob("*.pkl") if p.name != kept.name)
    shutil.copy(after4, state_dir / after4.name)
    assert len(list(state_dir.glob("*.pkl"))) == 2
    resumed = _run(engine, make, out, PROMPTS)
    assert _fingerprint(resumed) == _fingerprint(whole)


def test_drafters_without_cross_prompt_state_write_no_checkpoint(tmp_path):
    engine = tiny_engine(seed=2)
    rows = _run(engine, lambda: GooseDrafter(), tmp_path, PROMPTS[:2])
    assert not (tmp_path / "toy.state").exists()
    assert all("run_state_prompts" not in r for r in rows)
    assert RunStateStore(tmp_path / "toy.jsonl", {"method": "goose"}).checkpoints() == []


def test_a_built_drafter_runs_and_resumes_like_a_factory(tmp_path):
    """run.py's job builds the drafter once and passes the instance to run_cell: its state flows from
    prompt to prompt, and a resumed cell restores it, as with a factory."""
    engine = tiny_engine(seed=2)
    make = MAKERS["tr"]
    whole = _run(engine, make, tmp_path / "whole", PROMPTS)

    def run_built(out: Path, prompts) -> list[dict]:
        drafter = make()
        cell = cell_of(drafter.name, drafter, MAX_NEW)
        run_cell(engine, ToyTokenizer(), prompts, cell, drafter, out / "toy.jsonl", log=lambda line: None)
        rows = [r for r in read_rows(out / "toy.jsonl") if r["method"] == cell.method]
        return sorted(rows, key=lambda r: int(r["prompt_id"][1:]))

    assert _fingerprint(run_built(tmp_path / "built", PROMPTS)) == _fingerprint(whole)
    run_built(tmp_path / "resumed", PROMPTS[:3])
    resumed = run_built(tmp_path / "resumed", PROMPTS)
    assert _fingerprint(resumed) == _fingerprint(whole)
    assert [r["run_state_restored"] for r in resumed] == [False] * 3 + [True] * 3
