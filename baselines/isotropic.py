"""Isotropic control (SPEC "Isotropic control"): balanced k-ary trees from the adjacency table.

Same branch source as Goose (per-prompt adjacency table with K successors, bigram tier, prefill
harvest, min_score) and the same budget B, but no spine: breadth-first expansion from the anchor
where every node takes its top-`branching` successors (k = 3 for iso3, 5 for iso5), down to depth
D, until the tree holds B nodes (anchor included).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch

from goose.engine.drafter import Drafter, VerifyOutcome
from goose.engine.tree import BRANCH, DraftTree
from goose.sources.adjacency import AdjacencyTable
from goose.validation import check_hyperparameters


def prev_of_anchor(committed: list[int]) -> int | None:
    """The committed token before the anchor (the root's bigram predecessor), if any."""
    return committed[-2] if len(committed) >= 2 else None


class AdjacencyDrafter(Drafter):
    """Shared state of the drafters that read a per-prompt adjacency table (iso, eagle2).

    The table (K successors, optional bigram tier) is allocated lazily in `begin`, reset per
    prompt, harvested from the prefill logits if `prefill_harvest`, and overwritten from every
    verification forward (all nodes, rejected ones included).
    """

    def __init__(self, name: str, k: int, min_score: float, use_bigram: bool, prefill_harvest: bool) -> None:
        super().__init__(name=name)
        check_hyperparameters(
            type(self).__name__,
            k=k,
            min_score=min_score,
            use_bigram=use_bigram,
            prefill_harvest=prefill_harvest,
        )
        self.k = k
        self.min_score = min_score
        self.use_bigram = use_bigram
        self.prefill_harvest = prefill_harvest
        self.table: AdjacencyTable | None = None
        self._prev_anchor: int | None = None

    @property
    def needs_prefill_logits(self) -> bool:  # type: ignore[override]
        """The table is seeded from the prefill logits only with `prefill_harvest`."""
        return self.prefill_harvest

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        vocab = prefill_logits.shape[-1]
        if self.table is None or self.table.vocab_size != vocab:
            self.table = AdjacencyTable(vocab, self.k, use_scores=True, use_bigram=self.use_bigram)
        else:
            self.table.reset()
        if self.prefill_harvest:
            self.table.update_from_prefill(prompt_ids, prefill_logits)
        self._prev_anchor = None

    def successors(self, token: int, prev: int | None) -> tuple[list[int], list[float]]:
        """Successors above min_score (bigram row first when the tier is on)."""
        assert self.table is not None, "begin() must be called before propose()"
        return self.table.successors(token, prev if self.use_bigram else None, self.min_score)

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        if self.table is not None:
            self.table.update_from_tree(tree.tokens, tree.parents, outcome.logits, self._prev_anchor)


class IsotropicDrafter(AdjacencyDrafter):
    """Balanced tree: every node takes its top-`branching` successors (score >= min_score),
    breadth-first, depth <= D (`max_depth`), at most B (`budget`) nodes with the anchor.

    `node_budget(committed)` returns the budget of this step (B by default); a subclass may
    override it, e.g. with Goose's confidence-dependent B_eff.
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
    ) -> None:
        check_hyperparameters(type(self).__name__, branching=branching, max_depth=max_depth, budget=budget)
        super().__init__(f"iso{branching}", k, min_score, use_bigram, prefill_harvest)
        self.branching = branching
        self.max_depth = max_depth
        self.budget = budget

    def config(self) -> dict[str, Any]:
        return {
            "branching": self.branching,
            "max_depth": self.max_depth,
            "budget": self.budget,
            "k": self.k,
            "min_score": self.min_score,
            "use_bigram": self.use_bigram,
            "prefill_harvest": self.prefill_harvest,
        }

    def node_budget(self, committed: list[int]) -> int:
        """B for this step, anchor included."""
        return self.budget

    def build_tree(self, anchor: int, prev_anchor: int | None, budget: int) -> DraftTree:
        """Breadth-first k-ary expansion from the anchor."""
        tree = DraftTree.single(anchor)
        queue = deque([0])
        while queue and len(tree) < budget:
            node = queue.popleft()
            if tree.depths[node] >= self.max_depth:
                break  # breadth-first: every later node in the queue is at least as deep
            prev = prev_anchor if node == 0 else tree.tokens[tree.parents[node]]
            ids, _ = self.successors(tree.tokens[node], prev)
            for token in ids[: self.branching]:
                if len(tree) >= budget:
                    break
                queue.append(tree.add(token, node, BRANCH))
        return tree

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        self._prev_anchor = prev_of_anchor(committed)
        tree = self.build_tree(anchor, self._prev_anchor, self.node_budget(committed))
        if len(tree) < 2:
            self.route = "ar"
            return DraftTree.single(anchor)
        self.route = "tree"
        return tree
