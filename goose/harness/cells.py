"""A cell (model x bench x method x config x generation settings) and the samples of its prompts.

`Cell` holds what identifies a cell, starts each of its rows (`Cell.row`) and owns their keys (`Cell.key`, equal
to `goose.records.results.cell_key` of the row); `SamplingPlan` and `Draw` say which samples a prompt gets and
with which seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import GREEDY, SamplingParams, derive_seed
from goose.harness.chat import BaseFormat, PromptForm, prompt_format
from goose.records.results import cell_key, config_hash
from goose.records.row import CELL_FIELDS, SCHEMA_VERSION, ResultRow

_PROMPT_SLOT, _SEED_SLOT = CELL_FIELDS.index("prompt_id"), CELL_FIELDS.index("sample_seed")


@dataclass(frozen=True)
class Cell:
    """What identifies a cell, copied into each row. chat_template: the prompt form (goose.harness.chat):
    True = the tokenizer's chat template, False = raw, a `BaseFormat` = a base model's plain instruction
    format (rows: chat_template false, prompt_format its template); sampling: the warp (temperature 0 =
    greedy); both part of the row's key. Frozen, so that its fields and key, computed once, stay true."""

    model: str
    bench: str
    method: str
    method_config: dict[str, Any]
    max_new_tokens: int
    dtype: str
    chat_template: PromptForm = False
    sampling: SamplingParams = GREEDY

    def row_base(self) -> dict[str, Any]:
        """The cell's fields of a row (a new dict each call)."""
        return dict(self._fields)

    def row(self, prompt_id: str, sample_idx: int | None = None, sample_seed: int | None = None) -> ResultRow:
        """A new row of this cell for one prompt and sample, holding what identifies it (the runner fills in
        the rest)."""
        return ResultRow(
            schema_version=SCHEMA_VERSION,  # as append_row writes it, so the row in memory is the one on disk
            **self._fields,
            prompt_id=prompt_id,
            sample_idx=sample_idx,
            sample_seed=sample_seed,
        )

    def ar_reference(self) -> Cell:
        """The AR cell of the same prompts and generation settings: every method's reference (AR drafts
        nothing, so one reference serves every verifier)."""
        return Cell(
            self.model,
            self.bench,
            "ar",
            ARDrafter().config(),
            self.max_new_tokens,
            self.dtype,
            self.chat_template,
            replace(self.sampling, verifier="auto"),
        )

    def key(self, prompt_id: str, sample_seed: int | None = None) -> tuple:
        """`cell_key` of this cell's row for one prompt and sample, without building the row: the key of the
        cell's fields is computed once, and the prompt and seed are put in their places."""
        key = list(self._key)
        key[_PROMPT_SLOT], key[_SEED_SLOT] = prompt_id, sample_seed
        return tuple(key)

    @cached_property
    def _key(self) -> tuple:
        return cell_key({**self._fields, "prompt_id": None, "sample_seed": None})

    @cached_property
    def _fields(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "bench": self.bench,
            "method": self.method,
            "method_config": self.method_config,
            "config_hash": config_hash(self.method_config),
            "max_new_tokens": self.max_new_tokens,
            "dtype": self.dtype,
            "chat_template": bool(self.chat_template) and not isinstance(self.chat_template, BaseFormat),
            "prompt_format": prompt_format(self.chat_template),
            **self.sampling.as_dict(),
        }


@dataclass(frozen=True)
class SamplingPlan:
    """The `sampling` config group beyond the warp: the run's seed and the samples per prompt."""

    seed: int = 0
    num_samples: int = 1

    def samples(self, params: SamplingParams) -> list[tuple[int | None, int | None]]:
        """(sample_idx, sample_seed) of each sample of a prompt; greedy decoding has one, unseeded."""
        if params.greedy:
            return [(None, None)]
        return [(i, derive_seed(self.seed, i)) for i in range(self.num_samples)]


@dataclass(frozen=True)
class Draw:
    """One generation's sampling: the warp, which sample of the prompt it is, and the seeds."""

    params: SamplingParams = GREEDY
    sample_idx: int | None = None
    sample_seed: int | None = None
    sequence_seed: int = 0
    run_seed: int = 0  # the sampling group's seed (provenance only)


def sequence_seed(sample_seed: int | None, prompt_id: Any) -> int:
    """The seed of one generation: the sample's seed mixed with the prompt, so that the prompts of a
    run draw independent noise."""
    return 0 if sample_seed is None else derive_seed(sample_seed, str(prompt_id))
