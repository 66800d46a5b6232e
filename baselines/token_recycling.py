"""Token Recycling (Luo et al., ACL 2025) as docs/paper.md (Baselines) defines it: a [V, 8] table of top-8
successor ids, overwritten from every tree node's logits (not the prefill), kept across the prompts of a
run; drafts fill a fixed 80-node, 6-level template breadth-first from the anchor. The paper gives only the
level sizes, so `TR_TEMPLATE` is designed here by `design_template`'s rule (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.adjacency import AdjacencyTable
from goose.sources.run_long import RunLongTable
from goose.validation import check_bool

TR_K = 8
TR_LEVEL_SIZES: tuple[int, ...] = (8, 21, 25, 15, 8, 3)

# fmt: off
TR_TEMPLATE: tuple[tuple[int, ...], ...] = (
    # depth 1 (8)
    (0,), (1,), (2,), (3,), (4,), (5,), (6,), (7,),
    # depth 2 (21)
    (0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7),
    (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (3, 0), (3, 1),
    (4, 0), (5, 0), (6, 0), (7, 0),
    # depth 3 (25)
    (0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 0, 4), (0, 0, 5),
    (0, 1, 0), (0, 1, 1), (0, 1, 2), (0, 2, 0), (0, 2, 1), (0, 3, 0), (0, 4, 0), (0, 5, 0),
    (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 1, 0), (1, 2, 0),
    (2, 0, 0), (2, 0, 1), (2, 1, 0), (3, 0, 0), (4, 0, 0), (5, 0, 0),
    # depth 4 (15)
    (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2), (0, 0, 0, 3), (0, 0, 1, 0), (0, 0, 1, 1),
    (0, 0, 2, 0), (0, 0, 3, 0), (0, 1, 0, 0), (0, 1, 0, 1), (0, 1, 1, 0), (0, 2, 0, 0),
    (0, 3, 0, 0), (1, 0, 0, 0), (2, 0, 0, 0),
    # depth 5 (8)
    (0, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 2), (0, 0, 0, 1, 0), (0, 0, 0, 2, 0),
    (0, 0, 1, 0, 0), (0, 1, 0, 0, 0), (1, 0, 0, 0, 0),
    # depth 6 (3)
    (0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 1), (0, 0, 0, 0, 1, 0),
)
# fmt: on


def design_template(
    level_sizes: tuple[int, ...] = TR_LEVEL_SIZES, k: int = TR_K, alpha: float = 1.0
) -> tuple[tuple[int, ...], ...]:
    """The rule behind TR_TEMPLATE: per level, the `size` children of the previous level's paths with the
    highest prior Π 1/(r+1)**alpha, ties to the smaller path, in lexicographic order."""
    prior: dict[tuple[int, ...], float] = {(): 1.0}
    frontier: list[tuple[int, ...]] = [()]
    template: list[tuple[int, ...]] = []
    for size in level_sizes:
        candidates = [path + (r,) for path in frontier for r in range(k)]
        for c in candidates:
            prior[c] = prior[c[:-1]] / (c[-1] + 1) ** alpha
        candidates.sort(key=lambda c: (-prior[c], c))
        frontier = sorted(candidates[:size])
        template.extend(frontier)
    return tuple(template)


def check_template(owner: str, template: Any, k: int) -> None:
    """ValueError unless the template lists non-empty rank paths, parents first, every rank < k."""
    paths = [tuple(p) for p in template] if isinstance(template, (list, tuple)) else None
    if not paths:
        raise ValueError(f"{owner}.template = {template!r}: must be a non-empty list of rank paths")
    seen: set[tuple[int, ...]] = {()}
    for path in paths:
        if not path or any(not isinstance(r, int) or isinstance(r, bool) or r < 0 for r in path):
            raise ValueError(f"{owner}.template: path {path!r} must be a non-empty tuple of ranks >= 0")
        if path[:-1] not in seen:
            raise ValueError(f"{owner}.template: path {path!r} comes before its parent path {path[:-1]!r}")
        seen.add(path)
    top = max(r for path in paths for r in path)
    if top >= k:
        raise ValueError(f"{owner}.k = {k!r}: must be > {top}, the largest rank the template uses")


def fill_template(
    anchor: int, table: AdjacencyTable, template: tuple[tuple[int, ...], ...] = TR_TEMPLATE
) -> DraftTree:
    """Fill the rank-path template breadth-first: node (r_1..r_d) takes the r_d-th successor of its parent's
    token, skipped with its subtree when missing. Parents must come first."""
    tree = DraftTree.single(anchor)
    node_of: dict[tuple[int, ...], int] = {(): 0}
    succ_of: dict[int, list[int]] = {}
    for path in template:
        parent = node_of.get(path[:-1])
        if parent is None:
            continue
        if parent not in succ_of:
            succ_of[parent] = table.successors(tree.tokens[parent])[0]
        ids = succ_of[parent]
        rank = path[-1]
        if rank < len(ids):
            node_of[path] = tree.add(ids[rank], parent, BRANCH)
    return tree


@dataclass(frozen=True)
class TokenRecyclingConfig(DrafterConfig):
    """TR's hyperparameters (docs/paper.md, Baselines): K successor ids per table row, the rank-path
    `template` (TR_TEMPLATE: 80 nodes on 6 levels) and `persistent_table`: keep the table across prompts
    (TR's setting); false starts each prompt empty, as Goose does (the like-for-like comparison)."""

    owner = "TokenRecyclingDrafter"
    k: int = TR_K
    template: tuple[tuple[int, ...], ...] = TR_TEMPLATE
    persistent_table: bool = True

    def _validate(self) -> None:
        super()._validate()  # k, by goose.validation.HYPERPARAMETERS
        check_bool(f"{self.owner}.persistent_table", self.persistent_table)
        check_template(self.owner, self.template, self.k)
        object.__setattr__(self, "template", tuple(tuple(p) for p in self.template))


class TokenRecyclingDrafter(RunLongTable, Drafter):
    """Token Recycling: fixed 80-node template over a run-long top-K id table (K = 8). Keyword arguments
    are `TokenRecyclingConfig`'s fields."""

    config_class = TokenRecyclingConfig
    name = "tr"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=self.name if name is None else name)
        self.cfg = TokenRecyclingConfig(**hyperparameters)
        self.k = self.cfg.k
        self.template = self.cfg.template
        self.persistent_table = self.cfg.persistent_table
        self.table: AdjacencyTable | None = None

    def config(self) -> dict[str, Any]:
        """The logged config: the template by its size and level sizes (no prefill harvest, ever)."""
        return {
            "k": self.k,
            "template_nodes": len(self.template),
            "level_sizes": [sum(1 for p in self.template if len(p) == d) for d in range(1, 7)],
            "prefill_harvest": False,
            "persistent_table": self.persistent_table,
        }

    @property
    def logits_topk(self) -> int:  # type: ignore[override]
        """The table's K: the engine hands every verified node's top-K over (`VerifyOutcome.top`)."""
        return self.k

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Allocate the table on the first prompt; keep it unless `persistent_table` is off (no prefill
        harvest either way)."""
        super().begin(prompt_ids, prefill_logits)
        vocab = prefill_logits.shape[-1]
        if self.table is None or not self.persistent_table:
            self.table = AdjacencyTable(vocab, self.k, use_scores=False, use_bigram=False)
        elif self.table.vocab_size != vocab:
            raise ValueError(f"vocab changed from {self.table.vocab_size} to {vocab} within a run")

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        tree = fill_template(anchor, self.table, self.template) if self.table is not None else None
        if tree is None or len(tree) < 2:
            self.route = "ar"
            return DraftTree.single(anchor)
        self.route = "tree"
        return tree

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: the anchor's logits into the table (TR learns from every verified node), only
        with `learn_logits`."""
        if learn_logits:
            self.observe(DraftTree.single(committed[-1]), outcome)

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        if self.table is not None:
            self.table.update(tree.tokens, outcome.logits, top=outcome.top)
