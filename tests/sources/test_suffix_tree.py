"""Suffix tree (SuffixDecoding's source): hand-computed counts and drafts, and a seeded fuzz test of
the incremental, path-compressed tree against counts and drafts computed from scratch."""

from __future__ import annotations

import heapq
import random
from collections import Counter

import pytest

from goose.sources.suffix_tree import SuffixTree

TEXT = [1, 2, 3, 1, 2, 4, 1, 2]


def tree_of(*seqs: list[int], max_depth: int = 64) -> SuffixTree:
    tree = SuffixTree(max_depth)
    for seq_id, seq in enumerate(seqs):
        tree.extend(seq_id, seq)
    tree.check_integrity()
    return tree


# ---------------------------------------------------------------- hand-computed counts
def test_counts_of_a_small_string():
    tree = tree_of(TEXT)
    # [1, 2] occurs at 0, 3 and 6; continued by 3 (at 0) and 4 (at 3); the one at 6 ends the text
    assert tree.count([1, 2]) == 3
    assert tree.next_counts([1, 2]) == {3: 1, 4: 1}
    assert tree.count([]) == 8  # the root counts every token
    assert tree.count([1]) == 3 and tree.count([2]) == 3 and tree.count([3]) == 1
    assert tree.next_counts([2]) == {3: 1, 4: 1}
    assert tree.count([2, 3, 1, 2, 4]) == 1
    assert tree.next_counts([2, 3, 1]) == {2: 1}  # inside a compressed edge
    assert tree.count([1, 2, 5]) == 0 and tree.count([5]) == 0
    assert tree.count(TEXT) == 1


def test_max_depth_cuts_suffixes():
    tree = tree_of(TEXT, max_depth=3)
    assert tree.count([1, 2, 3]) == 1
    assert tree.count([1, 2, 3, 1]) == 0  # longer than max_depth
    assert tree.count([1, 2]) == 3 and tree.next_counts([1, 2]) == {3: 1, 4: 1}


def test_counts_sum_over_sequences():
    tree = tree_of([1, 2, 3], [1, 2, 4], [5, 1, 2])
    assert tree.count([1, 2]) == 3 and tree.next_counts([1, 2]) == {3: 1, 4: 1}
    assert tree.count([]) == 9
    assert tree.sequence(1) == [1, 2, 4] and tree.sequence_ids() == [0, 1, 2]


# ---------------------------------------------------------------- hand-computed drafts
def test_tree_draft_of_the_small_string():
    tree = tree_of(TEXT)
    # m = 1: [2] (count 3) -> 3, 4 at 1/3 each; MAX_SPEC = 1 -> [3], score 1/3
    # m = 2: [1, 2] (count 3) -> 3, 4 at 1/3 each; MAX_SPEC = 2 -> [3, 4], score 2/3 (best)
    # m = 3: [4, 1, 2] occurs only at the end: no continuation, the loop stops
    draft = tree.speculate_tail(0, min_token_prob=0.1)
    assert draft.tokens == [3, 4] and draft.parents == [-1, -1]
    assert draft.probs == pytest.approx([1 / 3, 1 / 3])
    assert draft.score == pytest.approx(2 / 3) and draft.match_len == 2
    # α = 2: m = 2 drafts 4 tokens: 3, 4, then each one's continuation (1 after both, 1/3 each)
    draft = tree.speculate_tail(0, max_spec_factor=2.0)
    assert draft.tokens == [3, 4, 1, 1] and draft.parents == [-1, -1, 0, 1]
    assert draft.score == pytest.approx(4 / 3) and draft.match_len == 2
    # the same from the root walk
    assert tree.speculate(TEXT, max_spec_factor=2.0) == draft


def test_chain_draft_of_the_small_string():
    tree = tree_of(TEXT)
    # m = 2: most frequent child of [1, 2] (tie 3 / 4 -> the smaller id, 3) at 1/3, then the rest of
    # the edge "3 1 2 4 ..." at the same probability; MAX_SPEC = 2
    draft = tree.speculate_tail(0, tree=False)
    assert draft.tokens == [3, 1] and draft.parents == [-1, 0]
    assert draft.score == pytest.approx(2 / 3) and draft.match_len == 2


def test_draft_with_unequal_counts_and_min_token_prob():
    text = [1, 2, 3, 1, 2, 3, 1, 2, 4, 1, 2]
    tree = tree_of(text)
    assert tree.next_counts([1, 2]) == {3: 2, 4: 1} and tree.count([1, 2]) == 4
    # m = 1: [2] (count 4) -> 3 at 2/4, 4 at 1/4; MAX_SPEC = 1 -> [3], score 1/2
    # m = 2: [1, 2] -> 3 at 1/2; then 3's continuation 1 (count(1 2 3 1) = count(1 2 3) = 2: still
    #        1/2) beats 4 (1/4); MAX_SPEC = 2 -> [3, 1], score 1 (best)
    # m = 3: [4, 1, 2] occurs only at the end: stop
    draft = tree.speculate_tail(0)
    assert draft.tokens == [3, 1] and draft.parents == [-1, 0]
    assert draft.probs == pytest.approx([0.5, 0.5]) and draft.match_len == 2
    # α = 2, m = 2: MAX_SPEC = 4: 3, 1, 2 at 1/2; then 4 under the anchor (1/4, depth 1) ties with
    # the continuations of [1 2 3 1 2] (3 and 4 at 1/2 * 1/2, depth 4): the shallower wins
    draft = tree.speculate_tail(0, max_spec_factor=2.0)
    assert draft.tokens == [3, 1, 2, 4] and draft.parents == [-1, 0, 1, -1]
    assert draft.probs == pytest.approx([0.5, 0.5, 0.5, 0.25]) and draft.score == pytest.approx(1.75)
    # min_token_prob 0.3: no token at 1/4 is ever drafted
    draft = tree.speculate_tail(0, max_spec_factor=2.0, min_token_prob=0.3)
    assert draft.tokens == [3, 1, 2] and draft.score == pytest.approx(1.5)


def test_spec_length_grows_with_match_and_offset():
    tree = tree_of([7, 8, 9, 10, 11, 12, 7, 8, 9])
    # m = 3 ([7, 8, 9], twice): continuation 10, 11, 12, ... at 1/2; MAX_SPEC = m
    draft = tree.speculate_tail(0)
    assert draft.tokens == [10, 11, 12] and draft.match_len == 3
    assert tree.speculate_tail(0, max_spec_offset=2.0).tokens == [10, 11, 12, 7, 8]
    assert tree.speculate_tail(0, max_spec_tokens=2).tokens == [10, 11]
    # offset -3: MAX_SPEC = m - 3 = 0 for every m <= 3; nothing is drafted
    assert tree.speculate_tail(0, max_spec_offset=-3.0).tokens == []
    assert tree.speculate_tail(0, min_token_prob=0.6).tokens == []  # 1/2 < 0.6


def test_no_match_and_short_patterns():
    tree = tree_of([1, 2, 3])
    assert tree.speculate([9, 9]).tokens == []
    assert tree.speculate([]).tokens == []
    assert tree.speculate([1]).tokens == [2]  # a pattern of one token: m = 1
    assert SuffixTree(4).speculate_tail(0).tokens == []


# ---------------------------------------------------------------- from scratch, for the fuzz test
def brute_counts(seqs: list[list[int]], max_depth: int) -> Counter:
    counts: Counter = Counter()
    for seq in seqs:
        for i in range(len(seq)):
            for n in range(1, min(max_depth, len(seq) - i) + 1):
                counts[tuple(seq[i : i + n])] += 1
    return counts


def brute_speculate(seqs, max_depth, pattern, cap, factor, offset, min_prob, tree):
    """SuffixDecoding's speculate on an uncompressed trie (a dict of counts), written directly
    from its definition; the same tie rules as goose.sources.suffix_tree."""
    counts = brute_counts(seqs, max_depth)
    following: dict[tuple, dict[int, int]] = {}
    for w, c in counts.items():
        following.setdefault(w[:-1], {})[w[-1]] = c

    def step(prob, w, t):  # probability of w + t; a count equal to w's is an edge interior: x 1 exactly
        c = following[w][t]
        return prob if c == counts[w] else prob * c / counts[w]

    best = ([], [], [], 0.0, 0)
    for m in range(1, min(len(pattern), max_depth - 1) + 1):
        w = tuple(pattern[len(pattern) - m :])
        if counts.get(w, 0) == 0 or not following.get(w):
            break
        limit = max(0, min(cap, int(m * factor + offset + 1e-6)))
        if limit == 0:
            continue
        toks, pars, probs = [], [], []
        if tree:
            heap = []
            for t in following[w]:
                p = step(1.0, w, t)
                if p >= min_prob:
                    heapq.heappush(heap, (-p, 1, -1, t, w + (t,)))
            while heap and len(toks) < limit:
                neg, depth, parent, t, s = heapq.heappop(heap)
                toks.append(t), pars.append(parent), probs.append(-neg)
                for u in following.get(s, {}):
                    p = step(-neg, s, u)
                    if p >= min_prob:
                        heapq.heappush(heap, (-p, depth + 1, len(toks) - 1, u, s + (u,)))
        else:
            prob, s = 1.0, w
            while len(toks) < limit and following.get(s):
                t = max(following[s].items(), key=lambda kv: (kv[1], -kv[0]))[0]
                prob = step(prob, s, t)
                if prob < min_prob:
                    break
                s = s + (t,)
                toks.append(t), pars.append(len(toks) - 2), probs.append(prob)
        score = sum(probs)
        if score >= best[3]:
            best = (toks, pars, probs, score, m)
    return best


def as_tuple(draft):
    return (draft.tokens, draft.parents, draft.probs, draft.score, draft.match_len)


@pytest.mark.parametrize("seed", range(12))
def test_incremental_tree_equals_counts_and_drafts_from_scratch(seed: int):
    rng = random.Random(seed)
    max_depth = rng.choice([2, 3, 5, 8, 64])
    alphabet = rng.randint(2, 5)
    n_seqs = rng.randint(1, 3)
    seqs: list[list[int]] = [[] for _ in range(n_seqs)]
    tree = SuffixTree(max_depth)
    for _ in range(rng.randint(3, 12)):  # chunks appended to random sequences, interleaved
        sid = rng.randrange(n_seqs)
        chunk = [rng.randrange(alphabet) for _ in range(rng.randint(1, 9))]
        if rng.random() < 0.3 and seqs[sid]:  # repeat earlier text so that long matches occur
            start = rng.randrange(len(seqs[sid]))
            chunk = seqs[sid][start : start + rng.randint(1, 12)]
        tree.extend(sid, chunk)
        seqs[sid].extend(chunk)
        tree.check_integrity()
        assert tree.substring_counts() == brute_counts(seqs, max_depth)
        knobs = dict(
            max_spec_tokens=rng.choice([None, 1, 3, 16]),
            max_spec_factor=rng.choice([0.5, 1.0, 2.0]),
            max_spec_offset=rng.choice([0.0, 1.0, -1.0]),
            min_token_prob=rng.choice([0.0, 0.1, 0.3]),
            tree=rng.random() < 0.5,
        )
        cap = max_depth if knobs["max_spec_tokens"] is None else knobs["max_spec_tokens"]
        args = (
            cap,
            knobs["max_spec_factor"],
            knobs["max_spec_offset"],
            knobs["min_token_prob"],
            knobs["tree"],
        )
        # a request's own tree: the pattern is its sequence's tail
        tail = tree.speculate_tail(sid, **knobs)
        assert as_tuple(tail) == brute_speculate(seqs, max_depth, seqs[sid][-max_depth:], *args)
        assert tail == tree.speculate(seqs[sid][-max_depth:], **knobs)
        # any pattern: a random window of some sequence, or random tokens
        other = seqs[rng.randrange(n_seqs)] or [0]
        end = rng.randint(1, len(other))
        pattern = other[max(0, end - max_depth) : end] + (
            [rng.randrange(alphabet)] if rng.random() < 0.3 else []
        )
        assert as_tuple(tree.speculate(pattern, **knobs)) == brute_speculate(seqs, max_depth, pattern, *args)
    # a rebuild from scratch (one extend per sequence, in order of first use) gives the same tree
    rebuilt = SuffixTree(max_depth)
    for sid in tree.sequence_ids():
        rebuilt.extend(sid, seqs[sid])
    assert rebuilt.substring_counts() == tree.substring_counts()
    for sid in tree.sequence_ids():
        for mode in (True, False):
            assert rebuilt.speculate_tail(sid, tree=mode) == tree.speculate_tail(sid, tree=mode)


@pytest.mark.parametrize("seed", range(5))
def test_tree_drafts_are_best_first(seed: int):
    rng = random.Random(100 + seed)
    seq = [rng.randrange(3) for _ in range(300)]
    tree = tree_of(seq)
    for end in range(20, 300, 7):
        draft = tree.speculate(seq[:end][-64:], max_spec_factor=4.0, min_token_prob=0.0)
        for i, (p, parent) in enumerate(zip(draft.probs, draft.parents, strict=True)):
            assert parent < i
            assert i == 0 or p <= draft.probs[i - 1]
            assert parent == -1 or p <= draft.probs[parent]
        assert draft.score == pytest.approx(sum(draft.probs))


def test_append_cost_does_not_grow_with_the_text():
    """O(max_depth) per token: the nodes grow at most linearly (path compression), and the active
    suffixes never exceed max_depth."""
    rng = random.Random(7)
    tree = SuffixTree(16)
    seq = [rng.randrange(50) for _ in range(2000)]
    tree.extend(0, seq)
    assert len(tree._active[0]) == 16
    nodes, stack = 0, [tree.root]
    while stack:
        node = stack.pop()
        nodes += 1
        stack.extend(node.children.values())
    assert nodes <= 2 * len(seq) + 1  # vs up to 16 * 2000 trie nodes uncompressed


def test_bad_max_depth():
    with pytest.raises(ValueError, match="max_depth = 0"):
        SuffixTree(0)
