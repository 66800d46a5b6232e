"""Context matcher (docs/paper.md, "Goose" step 1): earliest occurrence, n preference, consensus, incremental
index == brute-force rescan, chain extension by repeated matching."""

from __future__ import annotations

import random

import pytest

from goose.sources.context_matcher import ContextMatcher


def matcher_over(tokens: list[int], ngram_lengths=(5, 4, 3), max_chain: int = 20) -> ContextMatcher:
    m = ContextMatcher(ngram_lengths, max_chain)
    m.append(tokens)
    return m


def brute_force(pool: list[int], suffix: list[int], ngram_lengths, max_chain: int):
    """(chain, n, start, consensus) by rescanning the whole pool."""
    for n in ngram_lengths:
        if len(suffix) < n:
            continue
        key = suffix[-n:]
        # an occurrence needs a next token: start p <= len(pool) - n - 1
        starts = [p for p in range(len(pool) - n) if pool[p : p + n] == key]
        if starts:
            nexts = {pool[p + n] for p in starts}
            chain = pool[starts[0] + n : starts[0] + n + max_chain]
            return chain, n, starts[0], len(starts) >= 2 and len(nexts) == 1
    return [], 0, -1, False


def test_earliest_occurrence_and_no_consensus_when_continuations_differ():
    pool = [1, 2, 3, 4, 5, 9, 1, 2, 3, 4, 5, 8, 1, 2, 3, 4, 5]
    found = matcher_over(pool).match()
    assert (found.n, found.start) == (5, 0)
    assert found.chain == [9, 1, 2, 3, 4, 5, 8, 1, 2, 3, 4, 5]
    assert not found.consensus  # two earlier occurrences, continuing with 9 and 8


def test_longest_n_wins_over_an_earlier_shorter_match():
    # 5-gram [1,2,3,4,5] occurs at 5 (-> 30); its 3-gram tail [3,4,5] occurs earlier at 1 (-> 20)
    pool = [8, 3, 4, 5, 20, 1, 2, 3, 4, 5, 30, 1, 2, 3, 4, 5]
    found = matcher_over(pool).match()
    assert (found.n, found.start, found.chain[0]) == (5, 5, 30)


def test_four_gram_preferred_to_three_gram():
    pool = [9, 3, 4, 5, 20, 7, 2, 3, 4, 5, 30, 1, 2, 3, 4, 5]
    found = matcher_over(pool).match()
    assert (found.n, found.start, found.chain[0]) == (4, 6, 30)


def test_three_gram_when_nothing_longer_matches():
    pool = [3, 4, 5, 20, 21, 1, 2, 3, 4, 5]
    found = matcher_over(pool).match()
    assert (found.n, found.start, found.chain) == (3, 0, [20, 21, 1, 2, 3, 4, 5])


def test_consensus_needs_two_earlier_occurrences_with_the_same_next_token():
    found = matcher_over([1, 2, 3, 7, 1, 2, 3, 7, 1, 2, 3], ngram_lengths=(3,)).match()
    assert found.consensus and found.chain[0] == 7


def test_current_suffix_is_not_an_earlier_occurrence():
    # [1,2,3] appears twice, but the second is the query itself: one earlier occurrence only.
    found = matcher_over([1, 2, 3, 7, 1, 2, 3], ngram_lengths=(3,)).match()
    assert found.chain == [7, 1, 2, 3] and not found.consensus


def test_consensus_false_when_later_occurrence_disagrees():
    found = matcher_over([1, 2, 3, 7, 1, 2, 3, 7, 1, 2, 3, 6, 1, 2, 3], ngram_lengths=(3,)).match()
    assert not found.consensus


def test_consensus_is_judged_at_the_longest_matching_n():
    # the 3-gram [4,5,6] has two agreeing earlier occurrences, but the 4-gram [3,4,5,6] matches
    # once, so there is no consensus.
    pool = [0, 4, 5, 6, 1, 3, 4, 5, 6, 1, 3, 4, 5, 6]
    m = matcher_over(pool, ngram_lengths=(4, 3))
    found = m.match()
    assert found.n == 4 and not found.consensus
    assert matcher_over(pool, ngram_lengths=(3,)).match().consensus


def test_overlapping_occurrences():
    found = matcher_over([5, 5, 5, 5, 5, 5], ngram_lengths=(3,)).match()
    # [5,5,5] starts at 0, 1, 2 with a next token (3 is the query itself)
    assert (found.start, found.chain, found.consensus) == (0, [5, 5, 5], True)


def test_max_chain_cuts_the_continuation():
    pool = list(range(40)) + [0, 1, 2]
    found = matcher_over(pool, max_chain=20).match()
    assert found.chain == list(range(3, 23))


def test_no_match():
    found = matcher_over([1, 2, 3, 4, 5, 6]).match()
    assert (found.chain, found.n, found.consensus) == ([], 0, False)
    assert ContextMatcher((5, 4, 3), 20).match().chain == []


def test_incremental_index_equals_brute_force_rescan():
    rng = random.Random(0)
    for trial in range(30):
        vocab = rng.choice([2, 3, 4, 6])
        lengths = rng.choice([(5, 4, 3), (3,), (4, 2)])
        max_chain = rng.choice([1, 5, 20])
        m = ContextMatcher(lengths, max_chain)
        pool: list[int] = []
        while len(pool) < 150:
            chunk = [rng.randrange(vocab) for _ in range(rng.randint(1, 7))]
            pool += chunk
            if rng.random() < 0.5:
                m.append(chunk)
            else:
                m.sync(pool)  # the drafter's path: only the new tail is indexed
            found = m.match()
            assert (found.chain, found.n, found.start, found.consensus) == brute_force(
                pool, pool, lengths, max_chain
            ), (trial, pool)
            # an arbitrary query suffix (as used by chain extension)
            query = [rng.randrange(vocab) for _ in range(6)]
            found = m.match(query)
            assert (found.chain, found.n, found.start, found.consensus) == brute_force(
                pool, query, lengths, max_chain
            )
        for n in lengths:
            key = pool[-n - 1 : -1]
            assert m.occurrences(key) == [p for p in range(len(pool) - n) if pool[p : p + n] == key]


def test_sync_appends_only_the_new_tail_and_rejects_a_shorter_history():
    m = matcher_over([1, 2, 3])
    m.sync([1, 2, 3, 4, 5])
    assert m.tokens == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="reset"):
        m.sync([1, 2])
    m.reset()
    assert len(m) == 0 and m.match([1, 2, 3]).chain == []


def test_extend_chain_repeats_matching_from_the_end_of_the_drafted_text():
    pool = list(range(1, 31)) + [1, 2, 3]
    m = matcher_over(pool)
    chain = m.match().chain
    assert chain == list(range(4, 24))
    # drafted tail [19..23] matches at 18 -> [24, ..., 30, 1, 2, 3], cut at the limit of 25 tokens
    assert m.extend_chain(chain, limit=25, require_consensus=False) == list(range(4, 29))
    # at c = 1 a proposal without consensus is not appended
    assert m.extend_chain(chain, limit=25, require_consensus=True) == chain
    assert m.extend_chain(chain, limit=10, require_consensus=False) == chain  # already long enough


def test_extend_chain_with_consensus_continues_while_each_proposal_has_consensus():
    m = matcher_over([1, 2, 3, 4] * 3 + [1, 2, 3], ngram_lengths=(3,), max_chain=2)
    found = m.match()
    assert found.consensus and found.chain == [4, 1]
    assert m.extend_chain(found.chain, limit=6, require_consensus=True) == [4, 1, 2, 3, 4, 1]


def test_extend_chain_stops_when_nothing_matches():
    m = matcher_over([1, 2, 3, 4, 1, 2, 3], ngram_lengths=(3,))
    assert m.extend_chain([50, 51, 52], limit=30, require_consensus=False) == [50, 51, 52]
    # a chain shorter than n: the lookup reads the pool's tail before it ([2, 3] + [4] -> [1, 2, 3])
    assert m.extend_chain([4], limit=5, require_consensus=False) == [4, 1, 2, 3, 4]
