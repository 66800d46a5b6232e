"""The hardware-aware tree's candidate pool and its selection (Sequoia, Chen et al., arXiv 2402.12374, §3.1 and
§3.3, on this harness's training-free sources).

A pool is a token trie under the anchor: every source inserts its drafts as paths, a (parent, token) edge
proposed by several sources becomes one node carrying every source's bit and confidence bin. A node's value
is P(its path is accepted) = Π r(edge) along the path, r from `AcceptanceEstimator`; since r ≤ 1 a value
never exceeds its parent's, so the best-first heap order makes every prefix of b nodes the ancestor-closed
subtree of size b with the largest E[accepted] = Σ values. `best_size` then picks the b maximising
E[committed | b] / t(b) (committed = accepted + the bonus token). Pure Python, no torch.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

# Source bits of a pool node (a node may carry several).
CTX = 0  # the context matcher's chain (earliest occurrence, extended): Goose's spine, PLD's chain
ALT = 1  # the context matcher's other occurrences of the same n-gram
SUF = 2  # SuffixDecoding's frequency tree
ADJ = 3  # this prompt's adjacency table's successors: Goose's branches
RUN = 4  # the run's adjacency table (rows earlier prompts wrote, as TR keeps its table), for a token without a row yet
SOURCE_BITS: tuple[str, ...] = ("ctx", "alt", "suf", "adj", "run")
NUM_MASKS = 1 << len(SOURCE_BITS)
TABLE_BITS = (1 << ADJ) | (1 << RUN)  # the sources read from an adjacency table
# The source whose confidence bin keys a multi-source node, most informative first.
LEAD_ORDER: tuple[int, ...] = (SUF, ALT, ADJ, RUN, CTX)
CONF_BINS = 5  # confidence bins per source (see `conf_bin`)
# Siblings are distinct tokens, so at most one is accepted: their rates, each learnt for its own cell, are
# scaled down together where they add up to more than this (their estimates' sum otherwise overstates
# E[accepted] wherever several sources propose under one node).
SIBLING_MASS = 1.0


def conf_bin(value: float) -> int:
    """Bin of a confidence in [0, 1] (a frequency, a share, a softmax score): 5 equal-width bins."""
    return min(CONF_BINS - 1, max(0, int(value * CONF_BINS)))


@dataclass
class CandidatePool:
    """The candidate trie: node 0 is the anchor; per node its token, parent, depth, source mask and per-source
    confidence bin (-1: not proposed by that source); `kids[i]` maps a token to its child."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    masks: list[int] = field(default_factory=list)
    bins: list[list[int]] = field(default_factory=list)
    kids: list[dict[int, int]] = field(default_factory=list)
    # per node, the lazy paths still to be added under it: (tokens, source, bins, first index not yet added)
    tails: dict[int, list[tuple[Sequence[int], int, Sequence[int], int]]] = field(default_factory=dict)

    @classmethod
    def rooted(cls, anchor: int) -> CandidatePool:
        return cls([int(anchor)], [-1], [0], [0], [[-1] * len(SOURCE_BITS)], [{}])

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, parent: int, token: int, source: int, bin_: int) -> int:
        """The child `token` of `parent` with `source`'s bit and bin (the best bin if proposed twice)."""
        token = int(token)
        node = self.kids[parent].get(token)
        if node is None:
            node = len(self.tokens)
            self.tokens.append(token)
            self.parents.append(parent)
            self.depths.append(self.depths[parent] + 1)
            self.masks.append(0)
            self.bins.append([-1] * len(SOURCE_BITS))
            self.kids.append({})
            self.kids[parent][token] = node
        self.masks[node] |= 1 << source
        self.bins[node][source] = max(self.bins[node][source], bin_)
        return node

    def add_path(
        self, parent: int, tokens: Sequence[int], source: int, bins: Sequence[int], lazy: bool = False
    ) -> None:
        """A chain of tokens under `parent`, one bin per token. lazy: only its first node now, each further one
        when its parent's children are first asked for (`children`), so that the part of a long chain no
        selection or labelling reaches costs nothing; the nodes, masks and bins reached are those of the
        eager path, only their numbering differs."""
        if len(tokens) != len(bins):
            raise ValueError(f"add_path: {len(tokens)} tokens but {len(bins)} bins")
        self._add_from(parent, tokens, source, bins, 0, lazy)

    def _add_from(
        self, parent: int, tokens: Sequence[int], source: int, bins: Sequence[int], start: int, lazy: bool
    ) -> None:
        end = min(start + 1, len(tokens)) if lazy else len(tokens)
        for i in range(start, end):
            parent = self.add(parent, tokens[i], source, bins[i])
        if end < len(tokens):
            self.tails.setdefault(parent, []).append((tokens, source, bins, end))

    def children(self, node: int) -> dict[int, int]:
        """`kids[node]` (token -> child), with the next node of every lazy path through `node` added first."""
        tails = self.tails.pop(node, None)
        if tails:
            for tokens, source, bins, start in tails:
                self._add_from(node, tokens, source, bins, start, True)
        return self.kids[node]

    def add_tree(
        self, tokens: Sequence[int], parents: Sequence[int], source: int, bins: Sequence[int]
    ) -> None:
        """A draft tree under the anchor: parents index earlier entries, −1 is the anchor."""
        where: list[int] = []
        for token, p, b in zip(tokens, parents, bins, strict=True):
            where.append(self.add(0 if p < 0 else where[p], token, source, b))

    def lead_bin(self, node: int) -> int:
        """The confidence bin of the node's most informative source (`LEAD_ORDER`)."""
        b = self.bins[node]
        for s in LEAD_ORDER:
            if b[s] >= 0:
                return b[s]
        return 0


# rate(pool, node) -> r, P(node accepted | parent accepted) in [0, 1]
RateFn = Callable[[CandidatePool, int], float]
# expand(pool, node): add lazily generated children of `node` (the adjacency successors) before it is opened
ExpandFn = Callable[[CandidatePool, int], None]
# gain(pool, node) -> what verifying the node is worth beyond this step, in expected tokens committed later
GainFn = Callable[[CandidatePool, int], float]


@dataclass
class Selection:
    """Pool nodes in best-first order (`order[0]` = 0, the anchor), their values (P(path accepted); 1 for the
    anchor), per selected node its parent's place in `order`, and its gain past this step (0 without one)."""

    order: list[int]
    values: list[float]
    parents: list[int]
    gains: list[float] = field(default_factory=list)
    scale: float = 1.0  # c, the request's calibration the selection weighed values by (`scaled`)

    def __len__(self) -> int:
        return len(self.order)

    def expected_committed(self) -> list[float]:
        """E[committed | b] for b = 1..len, values scaled by c and gains included: the anchor's 1 is the
        bonus token."""
        return expected_committed(self.values, self.gains, self.scale)


def scaled(value: float, scale: float) -> float:
    """min(1, c·q): a path value q weighed by the request's calibration c (a probability stays ≤ 1)."""
    return min(1.0, scale * value)


def expected_committed(
    values: Sequence[float], gains: Sequence[float] = (), scale: float = 1.0
) -> list[float]:
    """E[committed | b] for b = 1..len(values) of a best-first order: the running sum of each node's value
    (P(path accepted), weighed by c = `scale`: min(1, c·q); the anchor's 1 is the bonus token) plus its
    gain past this step (none: 0)."""
    if gains and len(gains) != len(values):
        raise ValueError(f"expected_committed: {len(gains)} gains for {len(values)} values")
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += (v if i == 0 else scaled(v, scale)) + (gains[i] if gains else 0.0)
        out.append(total)
    return out


def select_best_first(
    pool: CandidatePool,
    rate: RateFn,
    budget: int,
    expand: ExpandFn | None = None,
    latency: Callable[[int], float] | None = None,
    gain: GainFn | None = None,
    max_gain: float = 0.0,
    scale: float = 1.0,
) -> Selection:
    """The `budget` most valuable pool nodes, anchor included, in best-first order (ties: shallower, then
    earlier in the pool); every prefix is the largest-E[accepted] ancestor-closed subtree of its size.
    A node's children's rates are scaled down together where they add up to more than SIBLING_MASS.
    With `gain` (at most `max_gain`) a node is ranked by its value plus its gain, and a prefix is the
    greedy, no longer the provably best, subtree of its size.
    With `latency` t the selection stops once no larger tree can beat the best E[committed | b] / t(b) so
    far: each further node adds at most the heap's top key plus `max_gain`, so no size m > b can do better
    once E[committed | b] + (m − b)·that ≤ best · t(m) for every m (t need not be non-decreasing), and
    `best_size` picks the same b from the shorter selection.
    With `scale` c (the request's calibration, `RequestScale`) a node counts min(1, c·value) + gain, in the
    order and in E[committed | b]; `values` stay the estimator's."""
    if budget < 1:
        raise ValueError(f"budget = {budget}: must be >= 1")
    if not scale > 0:
        raise ValueError(f"scale = {scale}: must be > 0")
    order, values, parents, gains = [0], [1.0], [-1], [0.0]
    # (-(min(1, c·value) + gain), depth, pool node, parent's place, value, gain)
    heap: list[tuple[float, int, int, int, float, float]] = []

    def open_node(node: int, place: int) -> None:
        kids = pool.children(node)  # the lazy paths' nodes first, then the expansion's
        if expand is not None:
            expand(pool, node)
        if not kids:
            return
        value = values[place]
        depth = pool.depths[node] + 1
        rated = [(child, rate(pool, child)) for child in kids.values()]
        mass = 0.0
        for child, r in rated:
            if not 0.0 <= r <= 1.0:
                raise ValueError(f"pool node {child}: rate {r} outside [0, 1]")
            mass += r
        share = SIBLING_MASS / mass if mass > SIBLING_MASS else 1.0
        for child, r in rated:
            v = value * r * share
            g = gain(pool, child) if gain is not None else 0.0
            heapq.heappush(heap, (-(scaled(v, scale) + g), depth, child, place, v, g))

    open_node(0, 0)
    if not heap:  # no candidate: the anchor alone, without reading the latency curve
        return Selection(order, values, parents, gains, scale)
    expected = 1.0
    costs = [latency(m) for m in range(1, budget + 1)] if latency is not None else []  # t(1..budget)
    cheapest_from = list(accumulate(reversed(costs), min))[::-1]  # [i] = min t(m) over m > i
    best = 1.0 / costs[0] if costs else 0.0
    while heap and len(order) < budget:
        neg, _, node, parent_place, value, g = heapq.heappop(heap)
        order.append(node)
        values.append(value)
        gains.append(g)
        parents.append(parent_place)
        b = len(order)
        if b >= budget:
            break
        open_node(node, b - 1)
        if latency is not None and heap:
            expected -= neg
            best = max(best, expected / costs[b - 1])
            # the most any further node adds: its min(1, c·value) is at most its ancestor's in the heap, so at
            # most the top key, and its gain at most max_gain
            step = max_gain - heap[0][0]
            if (expected + step * (budget - b)) / cheapest_from[b] <= best or _cannot_pay(
                expected, step, best, costs, b
            ):
                break  # no larger tree can do better
    return Selection(order, values, parents, gains, scale)


def _cannot_pay(expected: float, step: float, best: float, costs: Sequence[float], b: int) -> bool:
    """Whether no size m > b reaches `best`: E + (m − b)·step ≤ best·t(m) for every m (`costs[m − 1]` =
    t(m)); the scan stops at the first m that could, usually the next one."""
    for m in range(b + 1, len(costs) + 1):
        if expected + (m - b) * step > best * costs[m - 1]:
            return False
    return True


def best_size(expected: Sequence[float], latency: Callable[[int], float], min_size: int = 1) -> int:
    """b* = argmax_b expected[b − 1] / latency(b) over b in [min_size, len(expected)] (Sequoia's hardware-aware
    size); ties go to the smaller tree."""
    n = len(expected)
    if n == 0:
        raise ValueError("no sizes to choose from")
    lo = min(max(1, min_size), n)
    best, best_rate = lo, expected[lo - 1] / latency(lo)
    for b in range(lo + 1, n + 1):
        r = expected[b - 1] / latency(b)
        if r > best_rate:
            best, best_rate = b, r
    return best


def occurrence_bins(primary: list[int], others: list[list[int]]) -> list[list[int]]:
    """Per other occurrence's continuation, the confidence bin of each token: the share of all continuations
    (the primary chain's included) that pass through the token's prefix, among those through its parent's."""
    counts: dict[tuple[int, ...], int] = {}
    for cont in [primary, *others]:
        for j in range(1, len(cont) + 1):
            key = tuple(cont[:j])
            counts[key] = counts.get(key, 0) + 1
    total = 1 + len(others)
    out = []
    for cont in others:
        bins, above = [], total
        for j in range(1, len(cont) + 1):
            here = counts[tuple(cont[:j])]
            bins.append(conf_bin(here / above))
            above = here
        out.append(bins)
    return out
