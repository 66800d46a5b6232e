"""Prompt Lookup Decoding drafter: the matcher cases of the paper's PLD (n = 3, 2, 1; up to 10 tokens)."""

from __future__ import annotations

import torch

from baselines.pld import PromptLookupDrafter
from goose.engine.core.tree import ROOT, SPINE


def propose(committed: list[int], **kw):
    d = PromptLookupDrafter(**kw)
    d.begin(committed[:1], torch.zeros(1, 8))
    return d, d.propose(committed)


def test_trigram_match_drafts_the_continuation_as_a_spine_chain():
    committed = [1, 2, 3, 4, 5, 6, 9, 1, 2, 3]
    d, tree = propose(committed)
    assert d.route == "chain"
    assert tree.tokens == [3, 4, 5, 6, 9, 1, 2, 3]
    assert tree.parents == [-1, 0, 1, 2, 3, 4, 5, 6]
    assert tree.sources == [ROOT] + [SPINE] * 7


def test_longest_ngram_wins_over_earlier_shorter_match():
    # the unigram 3 occurs first at position 0 (-> 7), but the bigram (2, 3) occurs at 4 (-> 8)
    committed = [3, 7, 0, 0, 2, 3, 8, 0, 2, 3]
    _, tree = propose(committed)
    assert tree.tokens[:2] == [3, 8]


def test_earliest_occurrence_and_draft_length_cap():
    committed = (
        [5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6, 7] + list(range(20, 40)) + [5, 6, 7]
    )
    _, tree = propose(committed, num_draft=10)
    assert tree.tokens[1:] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # earliest occurrence, 10 tokens
    _, tree3 = propose(committed, num_draft=3)
    assert tree3.tokens[1:] == [1, 2, 3]


def test_no_match_is_an_ar_step():
    d, tree = propose([1, 2, 3, 4])
    assert d.route == "ar" and len(tree) == 1 and tree.tokens == [4]


def test_matcher_follows_committed_tokens_incrementally():
    d = PromptLookupDrafter()
    d.begin([1, 2, 3], torch.zeros(3, 8))
    assert len(d.propose([1, 2, 3, 4])) == 1
    tree = d.propose([1, 2, 3, 4, 1, 2])
    assert tree.tokens == [2, 3, 4, 1, 2]
