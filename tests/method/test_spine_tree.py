"""Spine tree builder (SPEC "Goose" step 6): harmonic split, budget shares, hand-built trees with
known answers, and invariants on random adjacency tables."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import pytest

from goose.engine.core.tree import BRANCH, ROOT, SPINE
from goose.method.spine_tree import branch_shares, build_spine_tree, harmonic_split


class FakeTable:
    """successors(token, prev): the bigram row (prev, token) if present, else the unigram row."""

    def __init__(self, rows=None, bigrams=None, default=None):
        self.rows = rows or {}
        self.bigrams = bigrams or {}
        self.default = default  # callable token -> (ids, scores) for unseen tokens
        self.calls: list[tuple[int, int | None]] = []

    def successors(self, token, prev=None):
        self.calls.append((token, prev))
        if (prev, token) in self.bigrams:
            return self.bigrams[(prev, token)]
        if token in self.rows:
            return self.rows[token]
        return self.default(token) if self.default else ([], [])


# ------------------------------------------------------------------ harmonic split


def test_harmonic_split_of_19_over_20_spine_nodes():
    # quotas 19 * (1/i) / H_20: 5.28, 2.64, 1.76, 1.32, 1.06, 0.88, 0.75, 0.66, 0.59, 0.53, 0.48,
    # 0.44, 0.41, ...; floors sum to 10, the 9 largest remainders (i = 6, 3, 7, 8, 2, 9, 10, 11, 12)
    # get one more.
    assert harmonic_split(19, 20) == [5, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1] + [0] * 8


@pytest.mark.parametrize("total, n", [(0, 4), (1, 1), (1, 5), (7, 3), (14, 30), (29, 20), (50, 2), (3, 100)])
def test_harmonic_split_sums_exactly_and_decays(total, n):
    shares = harmonic_split(total, n)
    assert len(shares) == n and sum(shares) == total
    assert all(a >= b for a, b in pairwise(shares))
    h = sum(1 / i for i in range(1, n + 1))
    assert all(abs(s - total / i / h) < 1 for i, s in enumerate(shares, start=1))


def test_harmonic_split_random_totals():
    rng = random.Random(1)
    for _ in range(500):
        total, n = rng.randint(0, 200), rng.randint(1, 100)
        shares = harmonic_split(total, n)
        assert sum(shares) == total and all(a >= b for a, b in pairwise(shares))
    assert harmonic_split(5, 0) == []


# ------------------------------------------------------------------ shares


@pytest.mark.parametrize(
    "budget, L, rho, expected",
    [
        (60, 30, 0.5, (15, 14)),  # branch budget 29, spine max(1, int(14.5)) = 14
        (60, 0, 0.5, (59, 0)),  # no spine: everything at the root
        (60, 30, 0.0, (29, 0)),  # ρ = 0 ablation: no spine branches
        (60, 50, 0.05, (8, 1)),  # int(9 * 0.05) = 0 -> floor of 1
        (60, 58, 0.5, (0, 1)),  # branch budget 1
        (60, 20, 1.0, (0, 39)),
        (100, 99, 0.5, (0, 0)),  # saturated spine: nothing left
    ],
)
def test_branch_shares(budget, L, rho, expected):
    assert branch_shares(budget, L, rho) == expected


# ------------------------------------------------------------------ hand-built trees

ROWS = {
    0: ([1, 10, 11, 12], [0.5, 0.3, 0.195, 0.005]),  # anchor; 12 is below min_score
    1: ([2, 20], [0.6, 0.4]),
    2: ([3, 30], [0.7, 0.3]),
    3: ([4, 40], [0.9, 0.1]),
    10: ([12, 13, 14], [0.5, 0.3, 0.2]),
    11: ([15, 16], [0.9, 0.1]),
    20: ([21, 22], [0.8, 0.2]),
}


def test_small_tree_without_extension():
    # B_eff = 8, L = min(3, int(8 * 0.5)) = 3, branch budget 4: spine 2 (split [1, 1, 0]), root 2
    table = FakeTable(ROWS)
    tree = build_spine_tree(table, 0, 99, [1, 2, 3], budget=8, ratio=0.5, rho=0.5, max_depth=6, k=10)
    assert tree.tokens == [0, 1, 2, 3, 10, 11, 20, 30]
    assert tree.parents == [-1, 0, 1, 2, 0, 0, 1, 2]
    assert tree.sources == [ROOT, SPINE, SPINE, SPINE, BRANCH, BRANCH, BRANCH, BRANCH]
    tree.validate()
    # the anchor's successors are looked up with the committed token before it; spine nodes with
    # their spine parent (bigram key)
    assert table.calls[:3] == [(0, 99), (1, 0), (2, 1)]


def test_small_tree_with_breadth_first_extension():
    # B_eff = 11, branch budget 7: spine max(1, int(3.5)) = 3 split [2, 1, 0], root 4.
    # Root: 10, 11 (1 is the spine, 12 is below min_score). Node 1: 20 (2 is the spine, only one
    # other successor). Node 2: 30. 8 nodes, 3 left for the extension, frontier 10, 11, 20, 30:
    #   10 (score .3): width ceil(3 * .3) = 1 -> 12;  11 (.195): ceil(2 * .195) = 1 -> 15;
    #   20 (.4): ceil(1 * .4) = 1 -> 21; budget spent.
    tree = build_spine_tree(FakeTable(ROWS), 0, None, [1, 2, 3], budget=11, ratio=0.5, rho=0.5)
    assert tree.tokens == [0, 1, 2, 3, 10, 11, 20, 30, 12, 15, 21]
    assert tree.parents == [-1, 0, 1, 2, 0, 0, 1, 2, 4, 5, 6]
    assert tree.sources[4:] == [BRANCH] * 7
    tree.validate()


def test_extension_width_follows_score_and_remaining_budget():
    # No chain: a branch tree. Root share = 9, but the anchor has one successor (5, score 0.8).
    # Extension of 5 (depth 1): remaining 8, width = min(3 successors, ceil(8 * 0.8) = 7) = 3.
    rows = {0: ([5], [0.8]), 5: ([6, 7, 8], [0.5, 0.3, 0.2])}
    tree = build_spine_tree(FakeTable(rows), 0, None, [], budget=10, ratio=0.5)
    assert tree.tokens == [0, 5, 6, 7, 8]
    assert SPINE not in tree.sources


def test_extension_width_capped_by_k_over_depth():
    # depth-1 node with score 1.0: ceil(remaining * 1) is large, K // 1 = 3 caps it at 3;
    # its depth-2 children get at most max(1, 3 // 2) = 1 child each.
    def default(token):
        return [token * 10 + j for j in range(1, 6)], [0.9, 0.04, 0.03, 0.02, 0.01]

    table = FakeTable({0: ([1], [1.0])}, default=default)
    tree = build_spine_tree(table, 0, None, [], budget=40, ratio=0.5, k=3, max_depth=6)
    kids = tree.children()
    assert len(kids[1]) == 3
    for c in kids[1]:
        assert len(kids[c]) == 1


def test_depth_limit_and_min_score():
    table = FakeTable(default=lambda t: ([t + 1, t + 2], [0.98, 0.02]))
    tree = build_spine_tree(table, 0, None, [], budget=200, ratio=0.5, k=10, max_depth=3, min_score=0.05)
    assert max(tree.depths) == 3  # nodes at depth 3 are not extended
    assert tree.tokens == [0, 1, 2, 3]  # the 0.02 successors are never drafted


def test_rho_zero_hangs_nothing_on_the_spine():
    tree = build_spine_tree(FakeTable(ROWS), 0, None, [1, 2, 3], budget=11, ratio=0.5, rho=0.0)
    spine = {1, 2, 3}
    assert not any(tree.parents[i] in spine and tree.sources[i] == BRANCH for i in range(len(tree)))


def test_bigram_row_used_for_spine_alternatives():
    table = FakeTable(ROWS, bigrams={(1, 2): ([3, 31], [0.5, 0.5])})
    tree = build_spine_tree(table, 0, None, [1, 2, 3], budget=8, ratio=0.5)
    assert 31 in tree.tokens and 30 not in tree.tokens


def test_saturated_spine_fills_the_budget_exactly():
    chain = list(range(1, 151))
    tree = build_spine_tree(FakeTable(ROWS), 0, None, chain, budget=100, ratio=1.0)
    assert len(tree) == 100 and tree.tokens[1:] == chain[:99]
    assert tree.sources[1:] == [SPINE] * 99


def test_no_duplicate_tokens_under_a_parent_even_if_the_table_repeats():
    table = FakeTable(default=lambda t: ([7, 7, 8, 7, 9], [0.3, 0.3, 0.2, 0.1, 0.1]))
    tree = build_spine_tree(table, 0, None, [7, 8], budget=30, ratio=0.5)
    tree.validate()  # raises on a duplicate token under one parent


# ------------------------------------------------------------------ invariants on random tables


def random_table(rng: random.Random, vocab: int, k: int) -> FakeTable:
    rows = {}
    for t in range(vocab):
        if rng.random() < 0.15:
            continue  # unseen token
        ids = rng.sample(range(vocab), min(k, vocab))
        raw = sorted((rng.random() ** 3 for _ in ids), reverse=True)
        z = sum(raw)
        rows[t] = (ids, [r / z for r in raw])
    return FakeTable(rows)


def test_random_tree_invariants():
    rng = random.Random(7)
    for _ in range(300):
        vocab, k = rng.randint(3, 40), rng.randint(1, 10)
        table = random_table(rng, vocab, k)
        budget = rng.randint(2, 120)
        ratio = rng.choice([0.15, 0.3, 0.5, 0.8, 1.0])
        rho, depth = rng.choice([0.0, 0.25, 0.5, 1.0]), rng.randint(1, 8)
        min_score = rng.choice([0.0, 0.01, 0.1])
        chain = [rng.randrange(vocab) for _ in range(rng.randint(0, 30))]
        tree = build_spine_tree(
            table, rng.randrange(vocab), None, chain,
            budget=budget, ratio=ratio, rho=rho, max_depth=depth, k=k, min_score=min_score,
        )  # fmt: skip
        tree.validate()
        L = min(len(chain), min(math.floor(budget * ratio + 1e-9), budget - 1))
        assert tree.sources[0] == ROOT and len(tree) <= budget
        assert tree.tokens[1 : L + 1] == chain[:L]
        assert tree.parents[1 : L + 1] == list(range(L))
        assert tree.sources[1 : L + 1] == [SPINE] * L
        assert all(s == BRANCH for s in tree.sources[L + 1 :])
        kids = tree.children()
        root_share, spine_share = branch_shares(budget, L, rho)
        assert sum(1 for c in kids[0] if tree.sources[c] == BRANCH) <= root_share
        assert (
            sum(sum(1 for c in kids[i] if tree.sources[c] == BRANCH) for i in range(1, L + 1)) <= spine_share
        )
        for i in range(L + 1, len(tree)):
            if kids[i]:  # an extended branch node: shallower than D, width <= max(1, K // depth)
                assert tree.depths[i] < depth
                assert len(kids[i]) <= max(1, k // tree.depths[i])
            parent = tree.parents[i]
            prev = tree.tokens[tree.parents[parent]] if parent > 0 else None
            ids, scores = table.successors(tree.tokens[parent], prev)
            assert scores[ids.index(tree.tokens[i])] >= min_score
