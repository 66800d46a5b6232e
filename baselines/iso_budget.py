"""Isotropic control at Goose's confidence-dependent budget (Goose §5.3, docs/paper.md: same adjacency source,
same budget rule): a balanced k-ary tree of B_eff = B + int(c · (max_extended_chain − B)) nodes, c the
context match's confidence (no spine, no chain extension). iso3 / iso5 keep B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from baselines.isotropic import IsotropicConfig, IsotropicDrafter
from goose.method.confidence import effective_budget, match_confidence
from goose.method.config import ContextMatchConfig
from goose.sources.context_matcher import ContextMatcher


@dataclass(frozen=True)
class IsotropicGooseBudgetConfig(IsotropicConfig, ContextMatchConfig):
    """The isotropic control's hyperparameters plus Goose's context matcher and budget rule."""

    owner = "IsotropicGooseBudgetDrafter"


class IsotropicGooseBudgetDrafter(IsotropicDrafter):
    """Isotropic tree whose budget is B_eff of the context match's confidence c. Arguments as for
    IsotropicDrafter, plus Goose's matcher and confidence settings; stats: b_eff_sum.
    """

    config_class = IsotropicGooseBudgetConfig

    def __init__(
        self,
        branching: int,
        max_depth: int = IsotropicGooseBudgetConfig.max_depth,
        budget: int = IsotropicGooseBudgetConfig.budget,
        k: int = IsotropicGooseBudgetConfig.k,
        min_score: float = IsotropicGooseBudgetConfig.min_score,
        use_bigram: bool = IsotropicGooseBudgetConfig.use_bigram,
        prefill_harvest: bool = IsotropicGooseBudgetConfig.prefill_harvest,
        max_chain: int = IsotropicGooseBudgetConfig.max_chain,
        max_extended_chain: int = IsotropicGooseBudgetConfig.max_extended_chain,
        long_match: int = IsotropicGooseBudgetConfig.long_match,
        ngram_lengths: Sequence[int] = IsotropicGooseBudgetConfig.ngram_lengths,
    ) -> None:
        super().__init__(
            branching,
            max_depth,
            budget,
            k,
            min_score,
            use_bigram,
            prefill_harvest,
            max_chain=max_chain,
            max_extended_chain=max_extended_chain,
            long_match=long_match,
            ngram_lengths=ngram_lengths,
        )
        self.name = f"iso{branching}_beff"
        self.matcher = ContextMatcher(self.ngram_lengths, self.max_chain)

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
