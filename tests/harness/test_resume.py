"""Resume (goose.harness.runner.run_cell, issue 30 item 6). Over several methods in one results file: AR,
PLD and Goose share one file, a run is cut short after some rows, and the resumed run must end with the
rows of an uninterrupted one; a prompt is done for a method only when *that method's* row for it exists
(PLD's or AR's row must not stand in for Goose's). And a cell differing from another in one key field only
is a cell of its own: it runs, it is not resumed from the other's rows.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hydra.utils import instantiate

from baselines.pld import PromptLookupDrafter
from goose.harness.compose import compose_config
from goose.harness.runner import Cell, run_cell
from goose.records.results import CELL_FIELDS, read_rows
from tests.conftest import bench_prompts
from tests.toy_harness import ToyTokenizer, cell_of, one_thread, tiny_engine, toy_prompts  # noqa: F401

METHODS = ("ar", "pld", "goose")
MAX_NEW = 8
COMPARED = ("output_ids", "forward_calls")


def factory(method: str):
    cfg = compose_config([f"method={method}"])  # the run's schema registered, as run.py composes it
    return lambda: instantiate(cfg.method.drafter, _convert_="all")


def run_methods(engine, tokenizer, prompts, out, methods=METHODS, count=None) -> None:
    """run_cell for each method in turn on one results file; count: prompts per method (None: all)."""
    for method in methods:
        make = factory(method)
        cell = Cell("smollm2-135m", "humaneval", method, make().config(), MAX_NEW, "float32")
        some = prompts if count is None else prompts[: count[method]]
        run_cell(engine, tokenizer, some, cell, make, out, log=lambda line: None, progress=False)


def by_cell(path) -> dict[tuple[str, str], dict]:
    """(method, prompt id) -> the row; fails on a second row of one cell."""
    rows = {}
    for row in read_rows(path):
        key = (row["method"], row["prompt_id"])
        assert key not in rows, f"two rows for {key}"
        rows[key] = row
    return rows


@pytest.fixture(scope="module")
def uninterrupted(smollm2, tmp_path_factory):
    """(prompts, rows by cell) of an uninterrupted run of AR, PLD and Goose on two prompts."""
    loaded, engine = smollm2
    prompts = bench_prompts("humaneval", 2)
    whole = tmp_path_factory.mktemp("whole") / "whole.jsonl"
    run_methods(engine, loaded.tokenizer, prompts, whole)
    reference = by_cell(whole)
    assert set(reference) == {(m, p.prompt_id) for m in METHODS for p in prompts}
    assert all(r["status"] == "ok" for r in reference.values())
    return prompts, reference


@pytest.mark.parametrize("cut", ["after_runs", "dropped_rows"])
def test_resume_over_several_methods_in_one_file_equals_an_uninterrupted_run(
    smollm2, uninterrupted, tmp_path, cut
):
    loaded, engine = smollm2
    prompts, reference = uninterrupted

    resumed = tmp_path / "resumed.jsonl"
    if cut == "after_runs":  # a sweep stopped part-way: PLD (and so AR) has every prompt, Goose one
        run_methods(engine, loaded.tokenizer, prompts, resumed, ("pld", "goose"), {"pld": 2, "goose": 1})
    else:  # a file holding only some rows: Goose's second prompt lost, PLD's and AR's first
        lost = {("goose", prompts[1].prompt_id), ("pld", prompts[0].prompt_id), ("ar", prompts[0].prompt_id)}
        kept = [r for key, r in reference.items() if key not in lost]
        resumed.write_text("".join(json.dumps(r) + "\n" for r in kept))
    partial = by_cell(resumed)
    assert ("pld", prompts[1].prompt_id) in partial and ("goose", prompts[1].prompt_id) not in partial

    run_methods(engine, loaded.tokenizer, prompts, resumed)
    final = by_cell(resumed)
    assert set(final) == set(reference)  # every cell once: the resumed run wrote exactly the missing rows
    for key, row in final.items():
        assert row["method"] == key[0] and row["status"] == "ok"
        for field in COMPARED:
            assert row[field] == reference[key][field], (key, field)
    assert [final[k] for k in partial] == [partial[k] for k in partial]  # rows on disk were not rewritten


def test_a_cells_key_fields_are_the_runners_cell_fields():
    """The key holds what a `Cell` writes into a row (its method config as `config_hash`), plus the
    prompt and the sample seed."""
    cell = Cell("m", "b", "pld", {"a": 1}, 8, "float32")
    assert set(cell.row_base()) - {"method_config"} | {"prompt_id", "sample_seed"} == set(CELL_FIELDS)


@pytest.mark.parametrize(
    "field, value", [("model", "tiny2"), ("bench", "toy2"), ("max_new_tokens", 20), ("dtype", "bfloat16")]
)
def test_a_cell_differing_in_one_key_field_is_run_not_resumed(tmp_path, field, value):
    """Two cells on one file that differ only in `field`: the second runs every prompt afresh."""
    engine, prompts, out = tiny_engine(seed=3), toy_prompts(2, seed=3), tmp_path / "toy.jsonl"
    first = cell_of("pld", PromptLookupDrafter(), max_new=12)
    second = dataclasses.replace(first, **{field: value})
    for cell in (first, second):
        run_cell(engine, ToyTokenizer(), prompts, cell, PromptLookupDrafter, out, log=lambda line: None)
    pld = [r for r in read_rows(out) if r["method"] == "pld"]
    assert [r[field] for r in pld] == [getattr(first, field)] * 2 + [value] * 2


def test_a_results_file_of_other_code_refuses_a_resume_unless_the_mix_is_allowed(tmp_path):
    """A row another code state wrote: run_cell refuses to add rows to its file (MixedCodeError, before any
    generation); allowed on purpose, it runs and every row it writes says so."""
    from goose.records.code_state import MixedCodeError, code_state
    from goose.records.results import append_row

    engine, prompts, out = tiny_engine(seed=3), toy_prompts(2, seed=3), tmp_path / "toy.jsonl"
    cell = cell_of("pld", PromptLookupDrafter(), max_new=6)
    foreign = {**cell.row_base(), "prompt_id": "elsewhere", "status": "ok", "code_state": "0123456789ab"}
    append_row(out, foreign)
    with pytest.raises(MixedCodeError, match="0123456789ab \\(1 rows\\); this code is " + code_state()):
        run_cell(engine, ToyTokenizer(), prompts, cell, PromptLookupDrafter, out, log=lambda line: None)
    assert len(read_rows(out)) == 1  # nothing ran
    run_cell(
        engine,
        ToyTokenizer(),
        prompts,
        cell,
        PromptLookupDrafter,
        out,
        log=lambda line: None,
        allow_mixed_code=True,
    )
    written = read_rows(out)[1:]
    assert len(written) == 4 and all(
        r["allow_mixed_code"] and r["code_state"] == code_state() for r in written
    )
