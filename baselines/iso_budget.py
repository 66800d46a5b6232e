"""Isotropic control at Goose's confidence-dependent budget (SPEC "Isotropic control": same
adjacency source, same budget rule).

`IsotropicGooseBudgetDrafter` is `baselines.isotropic.IsotropicDrafter` (balanced k-ary tree,
k = 3 or 5) whose node budget per step is Goose's B_eff = B + int(c * (max_extended_chain - B)),
c being the confidence of the context match at the current position (no chain extension: the tree
has no spine, only its size follows c). The plain iso3 / iso5 presets keep the fixed budget B.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from baselines.isotropic import IsotropicDrafter
from goose.method.confidence import effective_budget, match_confidence
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_hyperparameters, check_int


class IsotropicGooseBudgetDrafter(IsotropicDrafter):
    """Isotropic tree whose budget is B_eff of the context match's confidence c.

    branching, max_depth (D), budget (B), k (K), min_score, use_bigram, prefill_harvest: as for
    IsotropicDrafter. max_chain, long_match, ngram_lengths: the context matcher and confidence
    schedule of Goose; max_extended_chain: the budget a fully confident step reaches (c = 1).
    stats: b_eff_sum (sum of B_eff over steps).
    """

    def __init__(
        self,
        branching: int,
        max_depth: int = 6,
        budget: int = 60,
        k: int = 10,
        min_score: float = 0.01,
        use_bigram: bool = True,
        prefill_harvest: bool = True,
        max_chain: int = 20,
        max_extended_chain: int = 100,
        long_match: int = 8,
        ngram_lengths: Sequence[int] = (5, 4, 3),
    ) -> None:
        super().__init__(branching, max_depth, budget, k, min_score, use_bigram, prefill_harvest)
        owner = type(self).__name__
        check_hyperparameters(owner, max_chain=max_chain, long_match=long_match, ngram_lengths=ngram_lengths)
        check_int(f"{owner}.max_extended_chain", max_extended_chain, low=max_chain, why="at least max_chain")
        self.name = f"iso{branching}_beff"
        self.max_chain = max_chain
        self.max_extended_chain = max_extended_chain
        self.long_match = long_match
        self.ngram_lengths = tuple(ngram_lengths)
        self.matcher = ContextMatcher(self.ngram_lengths, max_chain)

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "max_chain": self.max_chain,
            "max_extended_chain": self.max_extended_chain,
            "long_match": self.long_match,
            "ngram_lengths": list(self.ngram_lengths),
        }

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self.matcher.reset()
        self.matcher.append(prompt_ids)

    def node_budget(self, committed: list[int]) -> int:
        """B_eff of this step: B + int(c * (max_extended_chain - B))."""
        self.matcher.sync(committed)
        found = self.matcher.match()
        c = match_confidence(len(found.chain), found.consensus, self.long_match)
        b_eff = effective_budget(c, self.budget, self.max_extended_chain)
        self.count("b_eff_sum", b_eff)
        return b_eff
