"""Prompt Lookup Decoding (Saxena 2023; docs/paper.md, Baselines): match the last n tokens (n = 3, 2, 1) in
prompt + output and draft up to 10 following tokens as one chain, from the earliest occurrence (as Goose's
matcher and transformers do). Nodes are SPINE, so PLD runs report p_s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from goose.engine.core.drafter import Drafter
from goose.engine.core.tree import SPINE, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.context_matcher import ContextMatcher


@dataclass(frozen=True)
class PldConfig(DrafterConfig):
    """PLD's hyperparameters (docs/paper.md, Baselines): the n-gram sizes matched, longest first as
    listed, and `num_draft`, the longest chain drafted."""

    owner = "PromptLookupDrafter"
    ngram_sizes: tuple[int, ...] = (3, 2, 1)
    num_draft: int = 10

    def _validate(self) -> None:
        super()._validate()  # both fields are checked by goose.validation.HYPERPARAMETERS
        object.__setattr__(self, "ngram_sizes", tuple(int(n) for n in self.ngram_sizes))


class PromptLookupDrafter(Drafter):
    """PLD: one chain of up to `num_draft` context-matched tokens per step. Keyword arguments are
    `PldConfig`'s fields."""

    config_class = PldConfig

    def __init__(self, **hyperparameters: Any) -> None:
        super().__init__(name="pld")
        self.cfg = PldConfig(**hyperparameters)
        self.ngram_sizes = self.cfg.ngram_sizes
        self.num_draft = self.cfg.num_draft
        self.matcher = ContextMatcher(self.ngram_sizes, max_chain=self.num_draft)

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self.matcher.reset()

    def propose(self, committed: list[int]) -> DraftTree:
        self.matcher.sync(committed)
        chain = self.matcher.match().chain
        if not chain:
            self.route = "ar"
            return DraftTree.single(committed[-1])
        self.route = "chain"
        return DraftTree.chain(committed[-1], chain, SPINE)
