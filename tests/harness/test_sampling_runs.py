"""Sampling through the runner: rows carry the settings and seeds, num_samples runs each prompt
N times with derived seeds, the same seed reproduces a cell, another seed changes it, a resumed
cell redoes nothing, deterministic drafters match AR sampling token for token and STAND is marked
as exact in distribution only."""

from __future__ import annotations

from pathlib import Path

import pytest

from baselines.pld import PromptLookupDrafter
from baselines.stand import StandDrafter
from goose.engine.core.sampling import SamplingParams
from goose.harness.runner import Cell, SamplingPlan, run_cell
from goose.records.metrics import cell_summary
from goose.records.results import read_rows
from tests.toy_harness import ToyTokenizer, one_thread, tiny_engine, toy_prompts  # noqa: F401

PROMPTS = toy_prompts(3, length=16, seed=5)
PARAMS = SamplingParams(temperature=0.8, top_p=0.95)


def _run(engine, make, out: Path, plan: SamplingPlan, params: SamplingParams = PARAMS) -> list[dict]:
    drafter = make()
    cell = Cell("tiny", "toy", drafter.name, drafter.config(), 24, "float32", sampling=params)
    run_cell(engine, ToyTokenizer(), PROMPTS, cell, make, out, log=lambda line: None, plan=plan)
    return read_rows(out)


def test_rows_carry_settings_and_one_row_per_sample(tmp_path):
    engine = tiny_engine(seed=4)
    rows = _run(engine, PromptLookupDrafter, tmp_path / "a.jsonl", SamplingPlan(seed=11, num_samples=2))
    pld = [r for r in rows if r["method"] == "pld"]
    ar = [r for r in rows if r["method"] == "ar"]
    assert len(pld) == len(ar) == 2 * len(PROMPTS)
    for r in rows:
        assert (r["temperature"], r["top_p"], r["top_k"]) == (0.8, 0.95, 0)
    assert sorted({r["sample_idx"] for r in pld}) == [0, 1]
    assert len({r["sample_seed"] for r in pld}) == 2  # seeds derived from (seed, sample index)
    # deterministic drafts verified by sample-and-match: AR's sample, token for token
    assert all(r["lossless"] is True for r in pld)
    summary = cell_summary(pld, ar)
    assert summary["prompts"] == 6 and summary["lossless_share"] == 1.0


def test_same_seed_reproduces_and_another_seed_changes_the_outputs(tmp_path):
    engine = tiny_engine(seed=4)

    def outputs(name: str, seed: int) -> list:
        rows = _run(engine, PromptLookupDrafter, tmp_path / f"{name}.jsonl", SamplingPlan(seed=seed))
        return [(r["prompt_id"], r["output_ids"]) for r in rows if r["method"] == "pld"]

    first, again, other = outputs("a", 1), outputs("b", 1), outputs("c", 2)
    assert first == again
    assert first != other


def test_a_resumed_sampling_cell_redoes_nothing(tmp_path):
    engine = tiny_engine(seed=4)
    out = tmp_path / "r.jsonl"
    plan = SamplingPlan(seed=3, num_samples=2)
    first = _run(engine, PromptLookupDrafter, out, plan)
    again = _run(engine, PromptLookupDrafter, out, plan)
    assert len(again) == len(first)  # nothing appended
    more = _run(engine, PromptLookupDrafter, out, SamplingPlan(seed=3, num_samples=3))
    assert len(more) == len(first) + 2 * len(PROMPTS)  # only sample 2 of each prompt (AR + PLD) is new


def test_greedy_rows_have_no_seed_and_sampled_rows_do_not_mix_with_them(tmp_path):
    engine = tiny_engine(seed=4)
    out = tmp_path / "g.jsonl"
    _run(engine, PromptLookupDrafter, out, SamplingPlan(seed=3, num_samples=2), params=SamplingParams())
    greedy = read_rows(out)
    assert len(greedy) == 2 * len(PROMPTS)  # num_samples is ignored at temperature 0
    assert all(r["sample_seed"] is None and r["temperature"] == 0.0 for r in greedy)
    rows = _run(engine, PromptLookupDrafter, out, SamplingPlan(seed=3))
    assert len(rows) == 4 * len(PROMPTS)  # the sampled cell got its own AR reference


def test_stand_rows_are_exact_in_distribution_only(tmp_path):
    engine = tiny_engine(seed=4)
    rows = _run(engine, lambda: StandDrafter(budget=12), tmp_path / "s.jsonl", SamplingPlan(seed=5))
    stand = [r for r in rows if r["method"] == "stand"]
    assert stand and all(r["lossless"] is None and r["lossless_check"] == "distribution" for r in stand)


def test_sampled_draft_rows_carry_every_applicable_verifiers_exact_expectation(tmp_path):
    """A STAND row (best-first trees: siblings drawn without replacement) records, per step whose draft
    carried q, the exact E[accepted] of recursive rejection sampling and of Traversal on that very tree;
    the verifier that ran (rrs) accepted about what its exact expectation says (within 4 standard
    deviations, Var ≤ Σ E[X²] ≤ depth · Σ E[X]: a coarse check on a few dozen steps; the law itself is
    proven to 1e-12 in tests/engine/test_verify_expected.py); deterministic drafts (PLD) have none."""
    engine = tiny_engine(seed=4)
    rows = _run(engine, lambda: StandDrafter(budget=12), tmp_path / "s.jsonl", SamplingPlan(seed=5))
    stand = [r for r in rows if r["method"] == "stand"]
    assert all(r["exact_steps"] > 0 for r in stand)
    assert all(
        {"rrs", "traversal"} <= set(r["exact_accepted"]) and "block" not in r["exact_accepted"] for r in stand
    )
    for r in stand:
        for verifier, total in r["exact_accepted"].items():
            assert sum(r["exact_reach"][verifier]) == pytest.approx(total, abs=1e-6)
    steps = sum(r["exact_steps"] for r in stand)
    expected = sum(r["exact_accepted"]["rrs"] for r in stand)
    realised = sum(sum(r["step_accepted"]) for r in stand)
    depth = max(len(r["exact_reach"]["rrs"]) for r in stand)
    assert steps > 20 and expected > 1.0
    assert abs(realised - expected) < 4 * (depth * expected) ** 0.5
    pld = _run(engine, PromptLookupDrafter, tmp_path / "p.jsonl", SamplingPlan(seed=5))
    assert all("exact_accepted" not in r for r in pld)
