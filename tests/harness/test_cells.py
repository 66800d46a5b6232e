"""A cell owns its rows' key (goose.harness.cells.Cell.key): for greedy, sampled and base-format cells and
their AR references, the key a cell gives a prompt and sample is `cell_key` of the row the runner wrote,
in memory and as read back from disk."""

from __future__ import annotations

from dataclasses import replace

import pytest

from baselines.pld import PromptLookupDrafter
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams
from goose.harness.cells import Cell, SamplingPlan
from goose.harness.chat import BaseFormat
from goose.harness.runner import run_cell
from goose.records.results import cell_key, read_rows
from goose.records.row import ResultRow
from tests.toy_harness import ToyTokenizer, one_thread, tiny_engine, toy_prompts  # noqa: F401

SAMPLED = SamplingParams(temperature=0.8, top_p=0.95)
TOY_FORMAT = BaseFormat("toy", "1 2 {prompt} 4")  # a base model's instruction format, in toy token ids


def ar_cell_of(cell: Cell) -> Cell:
    """The AR reference cell the runner pairs with `cell`."""
    return replace(
        cell,
        method="ar",
        method_config=ARDrafter().config(),
        sampling=replace(cell.sampling, verifier="auto"),
    )


@pytest.mark.parametrize(
    "chat, sampling, plan",
    [
        (False, SamplingParams(), SamplingPlan()),
        (False, SAMPLED, SamplingPlan(seed=7, num_samples=2)),
        (TOY_FORMAT, SamplingParams(), SamplingPlan()),
    ],
    ids=["greedy", "sampled", "base-format"],
)
def test_a_cells_key_is_the_cell_key_of_its_rows(tmp_path, chat, sampling, plan):
    pld = PromptLookupDrafter().config()
    cell = Cell("tiny", "toy", "pld", pld, 12, "float32", chat_template=chat, sampling=sampling)
    out = tmp_path / "r.jsonl"
    prompts = toy_prompts(2)
    returned = run_cell(
        tiny_engine(), ToyTokenizer(), prompts, cell, PromptLookupDrafter, out, log=lambda s: None, plan=plan
    )
    on_disk = read_rows(out)
    samples = len(plan.samples(sampling))
    assert len(returned) == len(on_disk) == 2 * len(prompts) * samples
    cells = {"pld": cell, "ar": ar_cell_of(cell)}
    for row in returned + on_disk:
        assert row["status"] == "ok"
        assert cells[row["method"]].key(row["prompt_id"], row["sample_seed"]) == cell_key(row)
    if isinstance(chat, BaseFormat):
        assert {r["prompt_format"] for r in on_disk} == {TOY_FORMAT.template}
    if not sampling.greedy:
        assert len({r["sample_seed"] for r in on_disk}) == samples
    order = lambda r: (r["method"], r["prompt_id"], str(r["sample_seed"]))  # noqa: E731
    assert sorted(returned, key=order) == sorted(on_disk, key=order)  # the runner returns rows as written


def test_a_cells_row_starts_with_its_identity_and_keys_like_it():
    cell = Cell("m", "b", "pld", {"k": 3}, 8, "float32", chat_template=TOY_FORMAT, sampling=SAMPLED)
    row = cell.row("p0", sample_idx=1, sample_seed=42)
    assert isinstance(row, ResultRow) and row.prompt_format == TOY_FORMAT.template
    assert cell_key(row.to_dict()) == cell.key("p0", 42) != cell.key("p0", 43)
    assert cell.row_base() == {k: v for k, v in row.to_dict().items() if k in cell.row_base()}
    assert cell.row_base() is not cell.row_base()  # callers get their own dict
