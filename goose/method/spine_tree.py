"""The anisotropic spine tree (Goose §4.1, Algorithm 1, docs/paper.md).

Node 0 is the anchor, nodes 1..L the spine, then root alternatives, spine alternatives (max(1, int(b · ρ))
of the branch budget b = B_eff − 1 − L, split 1/i) and breadth-first branch extension with the rest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol

from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.method.compat import HARNESS, CompatRules
from goose.method.confidence import safe_floor, spine_length
from goose.method.config import GooseConfig


class SuccessorSource(Protocol):
    """What the builder needs from the adjacency table (goose.sources.adjacency.AdjacencyTable)."""

    def successors(self, token: int, prev: int | None = None) -> tuple[list[int], list[float]]: ...


def harmonic_split(total: int, n: int) -> list[int]:
    """Split `total` alternatives over n spine nodes with weights 1/i, by largest remainder (ties to the node
    nearer the root): sums exactly and never increases with depth (Proposition 2's decay)."""
    if n <= 0 or total <= 0:
        return [0] * max(n, 0)
    weights = [1.0 / i for i in range(1, n + 1)]
    h = sum(weights)
    quotas = [total * w / h for w in weights]
    shares = [int(q) for q in quotas]
    left = total - sum(shares)
    by_remainder = sorted(range(n), key=lambda i: (-(quotas[i] - shares[i]), i))
    for i in by_remainder[:left]:
        shares[i] += 1
    return shares


def sequential_harmonic_split(total: int, n: int) -> list[int]:
    """The official split (compat=authors): node i gets min(max(1, int(total/(i·H_n))), what is left), in
    order, possibly leaving part of `total` to the extension."""
    weights = [1.0 / (i + 1) for i in range(n)]
    h = sum(weights)
    shares: list[int] = []
    left = total
    for w in weights:
        share = min(max(1, int(total * w / h)), left) if left > 0 else 0
        shares.append(share)
        left -= share
    return shares


def branch_shares(
    budget: int, spine_len: int, rho: float, *, floor=safe_floor, floor_at_rho0: bool = False
) -> tuple[int, int]:
    """(root share, spine share) of the branch budget B_eff − 1 − L: spine share max(1, int(budget · ρ)) when
    L > 0. At ρ = 0 (the "no spine branches" ablation) the spine gets nothing unless `floor_at_rho0`
    (compat=authors)."""
    branch_budget = max(0, budget - 1 - spine_len)
    if spine_len <= 0 or branch_budget == 0 or (rho <= 0.0 and not floor_at_rho0):
        return branch_budget, 0
    spine_share = min(branch_budget, max(1, floor(branch_budget * rho)))
    return branch_budget - spine_share, spine_share


def build_spine_tree(
    table: SuccessorSource,
    anchor: int,
    prev: int | None,
    chain: Sequence[int],
    *,
    budget: int,
    ratio: float,
    rho: float = GooseConfig.rho,
    max_depth: int = GooseConfig.max_depth,
    k: int = GooseConfig.k,
    min_score: float = GooseConfig.min_score,
    rules: CompatRules = HARNESS,
) -> DraftTree:
    """Build the spine tree (a pure branch tree when `chain` is empty): `budget` is B_eff, `ratio` the spine
    ratio, `rho` ρ, `max_depth` D, `k` K (a node at depth d gets at most max(1, K // d) children in the
    extension); `rules` the compat rules for rounding, the spine cap, the split and the ρ = 0 floor."""
    L = spine_length(len(chain), budget, ratio, floor=rules.floor, cap=rules.spine_cap)
    tree = DraftTree.chain(anchor, [int(t) for t in chain[:L]], SPINE)
    root_share, spine_share = branch_shares(
        budget, L, rho, floor=rules.floor, floor_at_rho0=rules.rho0_spine_floor
    )
    split = harmonic_split if rules.largest_remainder_split else sequential_harmonic_split
    frontier: deque[tuple[int, float]] = deque()  # (branch node, the score it was drafted with)
    used: list[set[int]] = [set() for _ in range(L + 1)]  # tokens already under each node
    for i in range(L):
        used[i].add(tree.tokens[i + 1])

    def attach(parent: int, tokens: list[int], scores: list[float], limit: int) -> None:
        added = 0
        for token, score in zip(tokens, scores, strict=True):
            if added >= limit or len(tree) >= budget or score < min_score:
                break
            token = int(token)
            if token in used[parent]:
                continue
            node = tree.add(token, parent, BRANCH)
            used[parent].add(token)
            used.append(set())
            added += 1
            if tree.depths[node] < max_depth:
                frontier.append((node, score))

    # Root alternatives: the anchor's successors, skipping the first spine token.
    attach(0, *table.successors(anchor, prev), root_share)
    # Spine-node alternatives: spine share split 1/i over spine nodes, skipping the next spine token.
    for i, share in enumerate(split(spine_share, L), start=1):
        if share > 0:
            attach(i, *table.successors(tree.tokens[i], tree.tokens[i - 1]), share)
    # Breadth-first extension of branch nodes shallower than D until the budget is spent.
    while frontier and len(tree) < budget:
        node, score = frontier.popleft()
        depth = tree.depths[node]
        tokens, scores = table.successors(tree.tokens[node], tree.tokens[tree.parents[node]])
        remaining = budget - len(tree)
        width = max(1, min(len(tokens), rules.ceil(remaining * score)))
        width = min(width, max(1, k // depth))
        attach(node, tokens, scores, width)
    return tree
