"""Isotropic control at Goose's confidence-dependent budget (Goose §5.3, docs/paper.md: same adjacency source,
same budget rule): a balanced k-ary tree of B_eff = B + int(c · (max_extended_chain − B)) nodes, c the
context match's confidence (no spine, no chain extension). iso3 / iso5 keep B.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from baselines.isotropic import IsotropicConfig, IsotropicDrafter
from goose.method.confidence import effective_budget, match_confidence
from goose.method.config import ContextMatchConfig
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_choice


@dataclass(frozen=True)
class IsotropicGooseBudgetConfig(IsotropicConfig, ContextMatchConfig):
    """The isotropic control's hyperparameters plus Goose's context matcher and budget rule."""

    owner = "IsotropicGooseBudgetDrafter"

    def _validate(self) -> None:
        super()._validate()
        why = "compat=authors is iso3 / iso5's Goose routing, already at B_eff"
        check_choice(f"{self.owner_name()}.compat", self.compat, ("harness",), why=why)


class IsotropicGooseBudgetDrafter(IsotropicDrafter):
    """Isotropic tree whose budget is B_eff of the context match's confidence c; keyword arguments are
    `IsotropicGooseBudgetConfig`'s fields (IsotropicDrafter's plus Goose's matcher and budget rule). stats:
    b_eff_sum.
    """

    config_class = IsotropicGooseBudgetConfig

    def __init__(self, **hyperparameters: Any) -> None:
        super().__init__(**hyperparameters)
        self.name = f"iso{self.branching}_beff"
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
