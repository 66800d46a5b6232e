"""Draft trees: the one data structure every drafter hands to the verification engine. Nodes are in
topological order; node 0 is the anchor, the last committed token not yet in the KV cache (Goose §4.2,
docs/paper.md). Source labels let every run count p_s (spine) and p_t (branch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# Context-matched tokens are SPINE (PLD's chain too), adjacency-table tokens BRANCH (TR, iso, eagle2).
# LOOKAHEAD: Lookahead decoding's Jacobi nodes, forwarded past `accept_limit` and never drafts (not counted).
ROOT = 0
SPINE = 1
BRANCH = 2
LOOKAHEAD = 3
SOURCE_NAMES: dict[int, str] = {ROOT: "root", SPINE: "spine", BRANCH: "branch", LOOKAHEAD: "lookahead"}
DRAFT_SOURCES: tuple[int, ...] = (SPINE, BRANCH)


@dataclass
class DraftTree:
    """A token tree to verify in one forward pass: tokens, parents (parents[0] = −1, else < i) and source
    labels per node. `proposals`: per node, the q its children were sampled from (STAND), else None.
    `accept_limit`: only nodes 0 … accept_limit − 1 may be accepted; later nodes are forwarded for their logits
    alone (Lookahead's Jacobi branch, arXiv 2402.02057 §3); None = every node. `paths`: for drafts of K i.i.d.
    paths (arXiv 2602.16961, 2602.16994), the paths in draw order, each the node indices from its first node
    (a child of the branching point: the anchor, or a delayed tree's trunk end) to its leaf; the tree is their
    trie (identical prefixes merged), so a node's children are its paths' distinct draws in first-appearance
    order. None for other drafts.
    """

    tokens: list[int]
    parents: list[int]
    sources: list[int]
    depths: list[int] = field(default_factory=list)
    proposals: list[tuple[tuple[int, ...], tuple[float, ...]] | None] | None = None
    accept_limit: int | None = None
    paths: list[tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        if not (len(self.tokens) == len(self.parents) == len(self.sources)):
            raise ValueError("tokens, parents and sources must have the same length")
        if self.accept_limit is not None and not 1 <= self.accept_limit <= len(self.tokens):
            raise ValueError(
                f"accept_limit = {self.accept_limit}: must be in [1, {len(self.tokens)}] (node count)"
            )
        if not self.depths:
            depths = [0] * len(self.tokens)
            for i in range(1, len(self.tokens)):
                depths[i] = depths[self.parents[i]] + 1
            self.depths = depths

    @classmethod
    def single(cls, anchor: int) -> DraftTree:
        """The AR 'tree': the anchor alone."""
        return cls([anchor], [-1], [ROOT], [0])

    @classmethod
    def chain(cls, anchor: int, draft: list[int], source: int = SPINE) -> DraftTree:
        """A chain (PLD): anchor followed by `draft`, one child per node."""
        n = len(draft)
        return cls(
            [anchor, *draft],
            [-1, *range(n)],
            [ROOT, *([source] * n)],
            list(range(n + 1)),
        )

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def acceptable(self) -> int:
        """How many leading nodes may be accepted (all unless `accept_limit` is set)."""
        return len(self.tokens) if self.accept_limit is None else self.accept_limit

    def prefix(self, b: int) -> DraftTree:
        """The first b nodes (ancestor-closed because parents come before children)."""
        if b >= len(self.tokens):
            return self
        return DraftTree(
            self.tokens[:b],
            self.parents[:b],
            self.sources[:b],
            self.depths[:b],
            None if self.proposals is None else self.proposals[:b],
            None if self.accept_limit is None else min(self.accept_limit, b),
            None if self.paths is None else [tuple(i for i in path if i < b) for path in self.paths],
        )

    def add(self, token: int, parent: int, source: int) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.sources.append(source)
        self.depths.append(self.depths[parent] + 1)
        if self.proposals is not None:
            self.proposals.append(None)
        return len(self.tokens) - 1

    def truncate_depth(self, max_depth: int) -> DraftTree:
        """The ancestor-closed subtree of depth <= max_depth (`self` if nothing is cut)."""
        if max_depth < 0:
            raise ValueError(f"max_depth must be >= 0, got {max_depth}")
        if max(self.depths) <= max_depth:
            return self
        return self.subset([i for i, d in enumerate(self.depths) if d <= max_depth])

    def subset(self, keep: list[int]) -> DraftTree:
        """The nodes `keep` (ascending, ancestor-closed, with the anchor) re-indexed in order; proposals,
        accept_limit and paths follow them."""
        new_index = {old: new for new, old in enumerate(keep)}
        return DraftTree(
            [self.tokens[i] for i in keep],
            [-1 if i == 0 else new_index[self.parents[i]] for i in keep],
            [self.sources[i] for i in keep],
            [self.depths[i] for i in keep],
            None if self.proposals is None else [self.proposals[i] for i in keep],
            None if self.accept_limit is None else sum(1 for i in keep if i < self.accept_limit),
            None
            if self.paths is None
            else [tuple(new_index[i] for i in path if i in new_index) for path in self.paths],
        )

    def children(self) -> list[list[int]]:
        """children()[i] = indices of node i's children, in insertion order."""
        kids: list[list[int]] = [[] for _ in self.tokens]
        for i in range(1, len(self.tokens)):
            kids[self.parents[i]].append(i)
        return kids

    def validate(self) -> None:
        """Raise ValueError unless anchor at 0, parents first, no duplicate token under one parent (among the
        acceptable nodes)."""
        if not self.tokens:
            raise ValueError("empty tree")
        if self.parents[0] != -1 or self.sources[0] != ROOT:
            raise ValueError("node 0 must be the anchor (parent -1, source ROOT)")
        seen: set[tuple[int, int]] = set()
        for i in range(1, len(self.tokens)):
            p = self.parents[i]
            if not 0 <= p < i:
                raise ValueError(f"node {i} has parent {p}; parents must come before children")
            if self.depths[i] != self.depths[p] + 1:
                raise ValueError(f"node {i} has depth {self.depths[i]}, parent depth {self.depths[p]}")
            key = (p, self.tokens[i])
            if i >= self.acceptable:
                continue
            if key in seen:
                raise ValueError(f"token {self.tokens[i]} drafted twice under node {p}")
            seen.add(key)
        if self.proposals is not None:
            if len(self.proposals) != len(self.tokens):
                raise ValueError("proposals must have one entry per node")
            for i in range(1, len(self.tokens)):
                q = self.proposals[self.parents[i]]
                if q is not None and self.tokens[i] not in q[0]:
                    raise ValueError(
                        f"node {i}: token {self.tokens[i]} is not in its parent's proposal support"
                    )


def ancestor_matrix(parents: torch.Tensor, max_depth: int | None = None) -> torch.Tensor:
    """Boolean [n, n], A[i, j] iff j is i or an ancestor of i, by pointer doubling: log2(depth) tensor ops."""
    n = parents.numel()
    idx = torch.arange(n, device=parents.device)
    jump = parents.clamp(min=0)  # the root points at itself
    anc = torch.zeros(n, n, dtype=torch.bool, device=parents.device)
    anc[idx, idx] = True
    anc[idx, jump] = True
    reach, target = 1, (n - 1 if max_depth is None else max_depth)
    while reach < target:
        anc |= anc[jump]
        jump = jump[jump]
        reach *= 2
    return anc


def tree_tensors(
    tree: DraftTree, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, parents, depths) of `tree` on `device` in one host-to-device copy."""
    meta = torch.tensor((tree.tokens, tree.parents, tree.depths), dtype=torch.long)
    if torch.device(device).type != "cpu":
        meta = meta.to(device, non_blocking=True)
    return meta[0], meta[1], meta[2]


@dataclass(frozen=True)
class TreeInputs:
    """The verification forward's inputs on the model's device: tokens, parents, positions (P + depth) and the
    [n, n] ancestor matrix (the engine's mask adds the cached prefix)."""

    tokens: torch.Tensor
    parents: torch.Tensor
    positions: torch.Tensor
    ancestors: torch.Tensor


def tree_attention_inputs(tree: DraftTree, prefix_len: int, device: torch.device | str = "cpu") -> TreeInputs:
    """Inputs of the verification forward over `tree` after P cached tokens (a chain's mask: the lower triangle)."""
    tokens, parents, depths = tree_tensors(tree, device)
    n, max_depth = len(tree), max(tree.depths)
    if n > 1 and max_depth == n - 1:  # n nodes, n - 1 levels: a chain
        ancestors = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril_()
    else:
        ancestors = ancestor_matrix(parents, max_depth)
    return TreeInputs(tokens, parents, depths + prefix_len, ancestors)
