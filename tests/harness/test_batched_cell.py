"""`run.py ... concurrency=N` through the runner (goose.harness.batched): one row per request under
<out_dir>/concurrency<N>/, AR at the same concurrency the reference, every row lossless and carrying the
batch's throughput; a finished cell is read back, not re-served."""

from __future__ import annotations

from dataclasses import replace

from goose.engine.core.sampling import SamplingParams
from goose.engine.core.sizing import Speculator
from goose.harness.batched import batched_results_path, run_batched_cell
from goose.records.results import read_rows
from tests.toy_harness import ToyTokenizer, cell_of, drafter_of, one_thread, tiny_engine, toy_prompts  # noqa: F401


def test_a_batched_cell_writes_one_lossless_row_per_request_and_resumes(tmp_path):
    engine, prompts = tiny_engine(seed=2), toy_prompts(5)
    cell = cell_of("pld", drafter_of("pld"))
    make = lambda: Speculator.of(drafter_of("pld"))  # noqa: E731
    rows, path = run_batched_cell(engine, ToyTokenizer(), prompts, cell, make, tmp_path, 3)
    assert (
        path
        == batched_results_path(tmp_path, 3, "tiny", "toy")
        == tmp_path / "concurrency3" / "tiny" / "toy.jsonl"
    )
    assert [r["method"] for r in rows] == ["ar"] * 5 + ["pld"] * 5
    assert all(r["lossless"] is True for r in rows)
    ar, pld = rows[:5], rows[5:]
    assert [r["output_ids"] for r in pld] == [r["output_ids"] for r in ar]
    for r in rows:
        extra = r  # extra fields are written at the top level of a row
        assert (
            extra["concurrency"] == 3 and extra["batch_state"] == "isolated" and extra["batch_requests"] == 5
        )
        assert extra["batch_tokens_per_s"] > 0 and extra["request_tpot_s"] > 0
        assert extra["batch_resumed"] is False
    assert len({r["batch_tokens_per_s"] for r in pld}) == 1  # one serve: one throughput
    again, _ = run_batched_cell(engine, ToyTokenizer(), prompts, cell, make, tmp_path, 3)
    assert again == rows and len(read_rows(path)) == 10  # read back, nothing served twice


def test_a_drafter_that_samples_its_drafts_is_judged_in_distribution(tmp_path):
    """STAND at T = 1 matches AR's sample in distribution only: its rows say so (lossless None,
    lossless_check "distribution"), as the batch-1 runner's do; PLD's are compared token for token."""
    engine, prompts = tiny_engine(seed=2), toy_prompts(3)
    for method, lossless in (("stand", None), ("pld", True)):
        cell = replace(cell_of(method, drafter_of(method)), sampling=SamplingParams(1.0))
        rows, _ = run_batched_cell(
            engine, ToyTokenizer(), prompts, cell, lambda m=method: Speculator.of(drafter_of(m)), tmp_path, 2
        )
        mine = [r for r in rows if r["method"] == method]
        assert [r["lossless"] for r in mine] == [lossless] * 3, method
        assert all((r.get("lossless_check") == "distribution") == (lossless is None) for r in mine)


def test_a_shared_state_cell_has_rows_of_its_own_and_drafts_otherwise(tmp_path):
    """batch_state "shared": rows under concurrency<N>-shared/ recording it, lossless, and Token Recycling's trees
    differ from the isolated cell's (the table every request writes reaches the others); AR is the same."""
    engine, prompts = tiny_engine(seed=2), toy_prompts(5)
    cell = cell_of("tr", drafter_of("tr"))
    make = lambda: Speculator.of(drafter_of("tr"))  # noqa: E731
    isolated, _ = run_batched_cell(engine, ToyTokenizer(), prompts, cell, make, tmp_path, 2)
    shared, path = run_batched_cell(
        engine, ToyTokenizer(), prompts, cell, make, tmp_path, 2, batch_state="shared"
    )
    assert path == tmp_path / "concurrency2-shared" / "tiny" / "toy.jsonl"
    assert [r["batch_state"] for r in shared] == ["isolated"] * 5 + ["shared"] * 5  # AR drafts nothing
    assert all(r["lossless"] is True for r in shared)
    assert [r["output_ids"] for r in shared] == [r["output_ids"] for r in isolated]
    assert [r["step_tree_size"] for r in shared[5:]] != [r["step_tree_size"] for r in isolated[5:]]
