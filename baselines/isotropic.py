"""Isotropic control (Goose §5.3, docs/paper.md): balanced k-ary trees from the adjacency table.

Goose's branch source and budget B, but no spine: breadth-first from the anchor every node takes its
top-`branching` successors (k = 3 for iso3, 5 for iso5) down to depth D until the tree holds B nodes.
`compat="authors"` follows the official isotropic control (goose.method.compat): Goose's routing and B_eff,
no root bigram from tree cycles, float16 unigram scores, whole-tree verification.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from baselines.shared.adjacency_drafter import AdjacencyDrafter, prev_of_anchor
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.method.compat import check_compat, rules_for
from goose.method.config import CandidatePoolConfig, GooseConfig
from goose.sources.context_matcher import ContextMatcher


@dataclass(frozen=True)
class IsotropicConfig(CandidatePoolConfig):
    """The isotropic control's hyperparameters: Goose's candidate pool, `branching` children per node (3 for
    iso3, 5 for iso5) and `compat` (goose.method.compat)."""

    owner = "IsotropicDrafter"
    branching: int = field(kw_only=True)
    compat: str = field(default="harness", kw_only=True)

    def _validate(self) -> None:
        super()._validate()
        check_compat(self.owner_name(), self.compat)


class IsotropicDrafter(AdjacencyDrafter):
    """Balanced tree: every node takes its top-`branching` successors, breadth-first, depth <= D, at most B
    nodes; keyword arguments are `IsotropicConfig`'s fields. `node_budget` may be overridden (e.g. Goose's
    B_eff). compat="authors" (`iso_goose_routing`) routes each cycle as Goose does: a tree at B_eff when the
    anchor has successors, else the context chain, else AR, with Goose's default matcher.
    """

    config_class: type[IsotropicConfig] = IsotropicConfig

    def __init__(self, **hyperparameters: Any) -> None:
        cfg = self.config_class(**hyperparameters)
        super().__init__(f"iso{cfg.branching}", cfg)
        self.rules = rules_for(self.compat)
        goose = GooseConfig()  # the official isotropic control runs Goose's matcher at its defaults
        self._goose = goose
        self.matcher = ContextMatcher(goose.ngram_lengths, goose.max_chain)

    @property
    def verifies_full_tree(self) -> bool:  # type: ignore[override]
        return not self.rules.cut_to_budget

    def config(self) -> dict[str, Any]:
        out = {key: value for key, value in self.cfg.as_dict().items() if key != "compat"}
        if self.compat != "harness":  # the default is left out: earlier rows keep their config hash
            out["compat"] = self.compat
        return out

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        if self.rules.iso_goose_routing:
            self.matcher.reset()
            self.matcher.append(prompt_ids)

    def node_budget(self, committed: list[int]) -> int:
        return self.budget

    def build_tree(self, anchor: int, prev_anchor: int | None, budget: int) -> DraftTree:
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
        if self.rules.iso_goose_routing:
            return self._propose_goose_routed(anchor, committed)
        tree = self.build_tree(anchor, self._prev_anchor, self.node_budget(committed))
        if len(tree) < 2:
            self.route = "ar"
            return DraftTree.single(anchor)
        self.route = "tree"
        return tree

    def _propose_goose_routed(self, anchor: int, committed: list[int]) -> DraftTree:
        """Goose's routing with an isotropic tree at B_eff (compat=authors)."""
        assert self.table is not None, "begin() must be called before propose()"
        goose, rules = self._goose, self.rules
        self.matcher.sync(committed)
        found = self.matcher.match()
        successors, _ = self.table.successors(anchor, self._prev_anchor if self.use_bigram else None)
        if successors:
            c = rules.confidence(len(found.chain), found.consensus, goose.long_match)
            budget = rules.effective_budget(c, self.budget, goose.max_extended_chain)
            tree = self.build_tree(anchor, self._prev_anchor, budget)
            if len(tree) >= 2:
                self.route = "tree"
                self.count("b_eff_sum", budget)
                return tree
            self.route = "ar"
            return DraftTree.single(anchor)
        if found.chain:
            self.route = "chain"
            return DraftTree.chain(anchor, found.chain, SPINE)
        self.route = "ar"
        return DraftTree.single(anchor)
