"""Isotropic control at Goose's confidence-dependent budget (Goose §5.3, docs/paper.md: same adjacency source,
same budget rule): a balanced k-ary tree of B_eff = B + int(c · (max_extended_chain − B)) nodes, c the
context match's confidence (no spine, no chain extension). iso3 / iso5 keep B.
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
    """Isotropic tree whose budget is B_eff of the context match's confidence c. Arguments as for
    IsotropicDrafter, plus Goose's matcher and confidence settings; stats: b_eff_sum.
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
        self.matcher.sync(committed)
        found = self.matcher.match()
        c = match_confidence(len(found.chain), found.consensus, self.long_match)
        b_eff = effective_budget(c, self.budget, self.max_extended_chain)
        self.count("b_eff_sum", b_eff)
        return b_eff
