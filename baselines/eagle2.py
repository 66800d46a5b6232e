"""EAGLE-2-style pruned tree, training-free (docs/paper.md, Baselines): EAGLE-2's dynamic tree with adjacency
scores in place of a draft model's probabilities. A node's value is the product of scores along its path;
layer by layer to depth D the `topk` most valuable nodes are expanded, then the B − 1 most valuable drafted
nodes are kept. Scores are <= 1 and ties go to the earlier node, so the kept set is ancestor-closed
(`prune_by_value` checks the premise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baselines.shared.adjacency_drafter import AdjacencyDrafter, prev_of_anchor
from goose.engine.core.tree import BRANCH, DraftTree
from goose.method.config import CandidatePoolConfig


def prune_by_value(parents: Sequence[int], values: Sequence[float], keep: int) -> list[int]:
    """Indices of the `keep` most valuable candidates, node 0 included, ascending. Requires values[i] <=
    values[parents[i]] (checked); ties to the smaller index, so the result is ancestor-closed.
    """
    n = len(parents)
    if len(values) != n:
        raise ValueError("parents and values must have the same length")
    for i in range(1, n):
        if not 0 <= parents[i] < i:
            raise ValueError(f"candidate {i} has parent {parents[i]}; parents must come first")
        if values[i] > values[parents[i]]:
            raise ValueError(
                f"candidate {i} is worth more than its parent ({values[i]} > {values[parents[i]]})"
            )
    if keep >= n:
        return list(range(n))
    ranked = sorted(range(1, n), key=lambda i: (-values[i], i))
    return sorted([0, *ranked[: max(keep - 1, 0)]])


def subtree(tokens: Sequence[int], parents: Sequence[int], kept: Sequence[int]) -> DraftTree:
    new_index = {old: new for new, old in enumerate(kept)}
    tree = DraftTree.single(tokens[kept[0]])
    for old in kept[1:]:
        tree.add(tokens[old], new_index[parents[old]], BRANCH)
    return tree


@dataclass(frozen=True)
class Eagle2Config(CandidatePoolConfig):
    """EAGLE-2-style hyperparameters: Goose's candidate pool and `topk`, the most valuable nodes of a layer
    expanded into the next."""

    owner = "Eagle2Drafter"
    topk: int = 10


class Eagle2Drafter(AdjacencyDrafter):
    """Value-pruned dynamic tree over the adjacency table: budget B, depth D, `topk` nodes expanded per layer,
    K successors per row; keyword arguments are `Eagle2Config`'s fields.
    """

    config_class = Eagle2Config

    def __init__(self, **hyperparameters: Any) -> None:
        super().__init__("eagle2", Eagle2Config(**hyperparameters))

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    def node_budget(self, committed: list[int]) -> int:
        return self.budget

    def expand(self, anchor: int, prev_anchor: int | None) -> tuple[list[int], list[int], list[float]]:
        tokens, parents, values = [anchor], [-1], [1.0]
        layer = [0]
        for _ in range(self.max_depth):
            expanded = sorted(sorted(layer, key=lambda i: (-values[i], i))[: self.topk])
            layer = []
            for node in expanded:
                prev = prev_anchor if node == 0 else tokens[parents[node]]
                ids, scores = self.successors(tokens[node], prev)
                for token, score in zip(ids, scores, strict=True):
                    tokens.append(token)
                    parents.append(node)
                    values.append(values[node] * min(score, 1.0))
                    layer.append(len(tokens) - 1)
            if not layer:
                break
        return tokens, parents, values

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        self._prev_anchor = prev_of_anchor(committed)
        tokens, parents, values = self.expand(anchor, self._prev_anchor)
        kept = prune_by_value(parents, values, self.node_budget(committed))
        if len(kept) < 2:
            self.route = "ar"
            return DraftTree.single(anchor)
        self.route = "tree"
        return subtree(tokens, parents, kept)
