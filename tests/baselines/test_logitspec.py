"""LogitSpec: the draft tree of a short string with given last logits, worked out by hand."""

from __future__ import annotations

import pytest
import torch

from baselines.logitspec import LogitSpecDrafter, latest_complete_continuation
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.sources.context_matcher import ContextMatcher
from tests.conftest import method_config

VOCAB = 12


def logit_ranking(order: list[int]) -> torch.Tensor:
    """A [1, V] logit row whose top tokens are `order`, best first."""
    row = torch.full((1, VOCAB), -100.0)
    for rank, token in enumerate(order):
        row[0, token] = 50.0 - rank
    return row


def test_latest_complete_occurrence_else_earliest() -> None:
    m = ContextMatcher((2, 1), max_chain=20)
    m.append([7, 1, 8, 8, 7, 1, 9, 9, 7, 1])  # (7, 1) starts at 0 and 4 (the tail at 8 has no next token)
    assert latest_complete_continuation(m, [7, 1], 2) == [9, 9]  # start 4: the latest with 2 tokens after
    assert latest_complete_continuation(m, [7, 1], 5) == [8, 8, 7, 1, 9]  # start 4 has 4 after: start 0
    assert latest_complete_continuation(m, [7, 1], 9) == [8, 8, 7, 1, 9, 9, 7, 1]  # none complete: earliest
    assert latest_complete_continuation(m, [3, 9], 2) == [7, 1]  # unigram (9) at 6 and 7: 7 is complete
    assert latest_complete_continuation(m, [3, 3], 2) == []


def test_tree_of_a_short_string_with_given_logits() -> None:
    # committed = 1 2 3 4 2 5 9 1 | 2 (anchor); the last logit ranks 2 (the anchor), 5, 4, 7, ...
    d = LogitSpecDrafter(
        num_pred_tokens=3, draft_tree_capacity=8, guess_rank_limits=[1], guess_lengths=[3, 1]
    )
    prompt = [1, 2, 3, 4, 2, 5, 9, 1]
    d.begin(prompt, logit_ranking([2, 5, 4, 7, 8, 10]))
    tree = d.propose([*prompt, 2])
    # anchor: (9, 1, 2) unseen, (1, 2) at 0 -> 3 4 2 (SPINE); guess 5 (rank 1, 3 tokens): (1, 2, 5) unseen,
    # (2, 5) at 4 -> 9 1; guess 4 (rank 2, 1 token) alone; the tree is then full (8 nodes): 7 is left out
    assert tree.tokens == [2, 3, 4, 2, 5, 9, 1, 4]
    assert tree.parents == [-1, 0, 1, 2, 0, 4, 5, 0]
    assert tree.sources == [ROOT, SPINE, SPINE, SPINE, BRANCH, SPINE, SPINE, BRANCH]
    assert d.route == "tree"
    assert d.stats == {"logitspec_anchor_hits": 1, "logitspec_guess_hits": 1, "logitspec_guesses": 2}


def test_a_guess_on_the_anchor_chain_shares_its_nodes() -> None:
    d = LogitSpecDrafter(
        num_pred_tokens=3, draft_tree_capacity=5, guess_rank_limits=[1], guess_lengths=[3, 1]
    )
    prompt = [1, 2, 3, 4, 2, 5, 9, 1]
    d.begin(prompt, logit_ranking([2, 3, 6]))
    tree = d.propose([*prompt, 2])
    # guess 3 keys (1, 2, 3) at 0 -> 4 2: the path 3 4 2 is the anchor's chain already; then guess 6 alone fills the
    # 5 nodes
    assert tree.tokens == [2, 3, 4, 2, 6]
    assert tree.parents == [-1, 0, 1, 2, 0]


def test_observe_takes_the_guesses_from_the_last_accepted_node() -> None:
    d = LogitSpecDrafter(draft_tree_capacity=4)
    d.begin([1, 2], logit_ranking([3]))
    d.propose([1, 2, 3])
    tree = DraftTree([3, 9, 8], [-1, 0, 0], [ROOT, BRANCH, BRANCH])  # the verified tree: 9 accepted
    logits = torch.cat([logit_ranking([9, 1]), logit_ranking([4, 5, 6]), logit_ranking([7])])
    d.observe(tree, VerifyOutcome(logits, [9, 4, 7], [0, 1], [9, 4]))
    # guesses from node 1's logit: 4 (the anchor, skipped), 5, 6, then the rest
    nxt = d.propose([1, 2, 3, 9, 4])
    assert nxt.tokens[:3] == [4, 5, 6] and nxt.parents[:3] == [-1, 0, 0]


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="guess_lengths"):
        LogitSpecDrafter(guess_rank_limits=[8, 32], guess_lengths=[4, 1])
    with pytest.raises(ValueError, match="draft_tree_capacity"):
        LogitSpecDrafter(draft_tree_capacity=1)


def test_method_yaml_has_the_papers_defaults() -> None:
    from hydra.utils import instantiate

    d = instantiate(method_config("logitspec").drafter)
    assert isinstance(d, LogitSpecDrafter)
    assert (d.max_ngram_size, d.num_pred_tokens, d.draft_tree_capacity) == (3, 20, 64)
