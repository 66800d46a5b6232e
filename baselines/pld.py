"""Prompt Lookup Decoding (Saxena 2023; docs/paper.md, Baselines): match the last n tokens (n = 3, 2, 1) in
prompt + output and draft up to 10 following tokens as one chain, from the earliest occurrence (as Goose's
matcher and transformers do). Nodes are SPINE, so PLD runs report p_s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from goose.engine.core.drafter import Drafter
from goose.engine.core.tree import SPINE, DraftTree
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_hyperparameters


class PromptLookupDrafter(Drafter):
    """PLD: one chain of up to `num_draft` context-matched tokens per step."""

    def __init__(self, ngram_sizes: Sequence[int] = (3, 2, 1), num_draft: int = 10) -> None:
        super().__init__(name="pld")
        check_hyperparameters("PromptLookupDrafter", ngram_sizes=ngram_sizes, num_draft=num_draft)
        self.ngram_sizes = tuple(int(n) for n in ngram_sizes)
        self.num_draft = int(num_draft)
        self.matcher = ContextMatcher(self.ngram_sizes, max_chain=self.num_draft)

    def config(self) -> dict[str, Any]:
        return {"ngram_sizes": list(self.ngram_sizes), "num_draft": self.num_draft}

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
