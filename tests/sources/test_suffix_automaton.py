"""Suffix automaton (SAM-Decoding's dynamic SAM): hand-computed longest earlier-occurring suffixes
and their earliest continuations, the 2n - 1 state bound, substring recognition, and the
incremental match against a brute-force search (seeded fuzz)."""

from __future__ import annotations

import random

import pytest

from goose.sources.suffix_automaton import SuffixAutomaton


def brute_force(tokens: list[int]) -> tuple[int, int]:
    """(L, e): the longest suffix of `tokens` that also ends at some position j < last, and the
    earliest such j; (0, -1) when none. Lengths with a match are downward closed (a match of L
    ends with a match of L - 1), so L grows until a length has no earlier occurrence."""
    last = len(tokens) - 1
    best, earliest = 0, -1
    for length in range(1, len(tokens)):
        suffix = tokens[last - length + 1 :]
        ends = [j for j in range(length - 1, last) if tokens[j - length + 1 : j + 1] == suffix]
        if not ends:
            break
        best, earliest = length, ends[0]
    return best, earliest


# After each token of [1, 2, 3, 1, 2, 4, 1, 2]: (match length, earliest end, continuation up to 10).
HAND = [
    (0, -1, []),  # [1]
    (0, -1, []),  # [1, 2]
    (0, -1, []),  # [1, 2, 3]
    (1, 0, [2, 3, 1]),  # [.., 1]: "1" ended at 0
    (2, 1, [3, 1, 2]),  # [.., 1, 2]: "1 2" ended at 1
    (0, -1, []),  # [.., 4]: 4 is new
    (1, 0, [2, 3, 1, 2, 4, 1]),  # [.., 4, 1]: "4 1" is new, "1" ended at 0 (and 3)
    (2, 1, [3, 1, 2, 4, 1, 2]),  # [.., 1, 2]: "4 1 2" is new, "1 2" ended at 1 and 4: earliest 1
]


def test_hand_example_after_each_token():
    sam = SuffixAutomaton()
    for i, token in enumerate([1, 2, 3, 1, 2, 4, 1, 2]):
        sam.append(token)
        assert (sam.match_length, sam.match_end, sam.continuation(10)) == HAND[i], i


def test_earliest_occurrence_not_latest():
    sam = SuffixAutomaton([1, 2, 3, 1, 2, 4, 1, 2])
    assert sam.match_end == 1  # "1 2" also ended at 4; the draft copies after the first one
    assert sam.continuation(3) == [3, 1, 2]


def test_continuation_is_cut_at_max_len_and_at_the_end_of_the_text():
    sam = SuffixAutomaton([5, 6, 7, 8, 9, 5, 6])
    assert (sam.match_length, sam.match_end) == (2, 1)
    assert sam.continuation(2) == [7, 8]
    assert sam.continuation(100) == [7, 8, 9, 5, 6]
    assert sam.continuation(0) == []


def test_overlapping_occurrence_reaches_the_last_token():
    sam = SuffixAutomaton([4, 4, 4])
    assert (sam.match_length, sam.match_end) == (2, 1)  # "4 4" ended at 1, overlapping the suffix
    assert sam.continuation(5) == [4]


def test_no_match_and_empty_text():
    sam = SuffixAutomaton()
    assert (sam.match_length, sam.match_end, sam.continuation(5)) == (0, -1, [])
    sam.extend([1, 2, 3])
    assert (sam.match_length, sam.match_end, sam.continuation(5)) == (0, -1, [])


def test_longest_match_wins_over_an_earlier_shorter_one():
    # "2" occurs first at 0 (-> 7), but the longer suffix "1 2" occurs at 3 (-> 9)
    sam = SuffixAutomaton([2, 7, 1, 2, 9, 1, 2])
    assert (sam.match_length, sam.match_end) == (2, 3)
    assert sam.continuation(5) == [9, 1, 2]


def test_climb_copies_after_a_shorter_suffix_when_too_few_tokens_follow():
    sam = SuffixAutomaton([2, 7, 1, 2, 9, 1, 2])
    # 3 tokens follow "1 2" (ended at 3); the shorter suffix "2" first ended at 0, 6 follow it
    assert sam.continuation(5, climb=True) == [7, 1, 2, 9, 1]
    assert sam.continuation(3, climb=True) == [9, 1, 2]  # enough tokens: no climb
    # the climb never reaches the root: "1 2" and "2" share a class here, whose link is the root
    flat = SuffixAutomaton([5, 1, 2, 9, 1, 2])
    assert flat.continuation(10, climb=True) == flat.continuation(10) == [9, 1, 2]


@pytest.mark.parametrize(
    "text",
    [
        [1, 2],
        [1, 2, 2, 2, 2, 2, 2],  # "abbb...b" attains the 2n - 1 bound
        [1, 1, 1, 1, 1],
        [1, 2, 3, 1, 2, 4, 1, 2],
        [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6],
    ],
)
def test_number_of_states_at_most_2n_minus_1(text: list[int]):
    sam = SuffixAutomaton()
    for n, token in enumerate(text, start=1):
        sam.append(token)
        if n >= 2:
            assert sam.num_states <= 2 * n - 1
    if text[0] == 1 and set(text[1:]) == {2}:
        assert sam.num_states == 2 * len(text) - 1


@pytest.mark.parametrize("seed", range(6))
def test_state_bound_and_substrings_on_random_text(seed: int):
    rng = random.Random(seed)
    text = [rng.randrange(3) for _ in range(60)]
    sam = SuffixAutomaton(text)
    assert sam.num_states <= 2 * len(text) - 1
    substrings = {tuple(text[i:j]) for i in range(len(text)) for j in range(i + 1, min(len(text), i + 8) + 1)}
    for sub in substrings:
        assert sam.occurs(sub)
    for _ in range(200):  # random patterns: recognised iff they are substrings
        pattern = [rng.randrange(4) for _ in range(rng.randint(1, 8))]
        assert sam.occurs(pattern) == (tuple(pattern) in substrings)


@pytest.mark.parametrize("seed", range(12))
def test_incremental_match_equals_brute_force(seed: int):
    rng = random.Random(seed)
    alphabet = rng.choice([2, 3, 5, 20])
    n = rng.randint(20, 140)
    text: list[int] = []
    for _ in range(n):  # random tokens, with copied stretches so that long matches occur
        if text and rng.random() < 0.08:
            start = rng.randrange(len(text))
            text.extend(text[start : start + rng.randint(1, 12)])
        else:
            text.append(rng.randrange(alphabet))
    sam = SuffixAutomaton()
    chunk_start = 0
    while chunk_start < len(text):  # appended in chunks of varying size, as steps commit tokens
        chunk = text[chunk_start : chunk_start + rng.randint(1, 6)]
        for token in chunk:
            sam.append(token)
            prefix = text[: len(sam)]
            length, end = brute_force(prefix)
            assert (sam.match_length, sam.match_end) == (length, end), (seed, len(prefix))
            assert sam.continuation(7) == (prefix[end + 1 : end + 8] if length else [])
        chunk_start += len(chunk)
    assert sam.num_states <= 2 * len(text) - 1


def test_sync_appends_only_the_new_tail_and_rejects_a_shorter_history():
    sam = SuffixAutomaton()
    sam.sync([1, 2, 3])
    sam.sync([1, 2, 3])
    assert sam.tokens == [1, 2, 3]
    sam.sync([1, 2, 3, 1, 2])
    assert (sam.tokens, sam.match_length, sam.match_end) == ([1, 2, 3, 1, 2], 2, 1)
    with pytest.raises(ValueError, match="reset"):
        sam.sync([1, 2])
    sam.reset()
    assert (len(sam), sam.num_states, sam.match_length) == (0, 1, 0)
    sam.sync([9, 9])
    assert (sam.match_length, sam.match_end) == (1, 0)
