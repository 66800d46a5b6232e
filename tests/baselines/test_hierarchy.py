"""Hierarchy Drafting: the databases are queried in order (context, model, statistics), hand-built cases."""

from __future__ import annotations

import torch

from baselines.hierarchy import HierarchyDrafter, NgramStatistics
from goose.engine.core.tree import BRANCH, SPINE
from tests.conftest import method_config

VOCAB = 16


def top_row(order: list[int]) -> torch.Tensor:
    row = torch.full((1, VOCAB), -100.0)
    for rank, token in enumerate(order):
        row[0, token] = 50.0 - rank
    return row


def drafter(**kw) -> HierarchyDrafter:
    return HierarchyDrafter(**{"num_candidates": 2, "draft_len": 3, "k": 2, **kw})


def test_ngram_statistics_counts_and_backs_off() -> None:
    s = NgramStatistics(2)
    s.add([1, 2, 3, 1, 2, 4, 1, 2, 4], 0)
    assert s.counts[(1, 2)] == {3: 1, 4: 2}
    assert s.next_tokens([9, 1, 2]) == [4, 3]  # (1, 2): 4 twice, 3 once
    assert s.next_tokens([9, 4]) == [1]  # (9, 4) unseen: the unigram (4)
    assert s.next_tokens([9]) == []


def test_context_database_first() -> None:
    d = drafter()
    d.begin([1, 2, 3, 1, 2, 4, 1], torch.zeros(1, VOCAB))
    d.model_table.update([2], top_row([7, 8]))  # the model database would hit too
    tree = d.propose([1, 2, 3, 1, 2, 4, 1, 2])
    # (4, 1, 2) unseen; (1, 2) at 3 -> 4 1 2 (most recent first) and at 0 -> 3 1 2
    assert d.route == "context"
    assert tree.tokens == [2, 4, 1, 2, 3, 1, 2]
    assert tree.parents == [-1, 0, 1, 2, 0, 4, 5]
    assert set(tree.sources[1:]) == {SPINE}


def test_model_database_when_the_context_misses() -> None:
    d = drafter()
    d.begin([5, 6, 7], torch.zeros(1, VOCAB))
    d.statistics.add([8, 1], 0)  # the statistics database would hit too
    d.model_table.update([8, 3], torch.cat([top_row([3, 4]), top_row([9, 10])]))
    tree = d.propose([5, 6, 7, 8])
    # 8 never occurred before: the model's successors of 8 are 3 (then 3 -> 9, 9 unseen) and 4 (unseen)
    assert d.route == "model"
    assert tree.tokens == [8, 3, 9, 4]
    assert tree.parents == [-1, 0, 1, 0]
    assert set(tree.sources[1:]) == {BRANCH}


def test_a_unigram_context_match_leaves_the_step_to_the_model_database() -> None:
    for min_context, route in ((2, "model"), (1, "context")):
        d = drafter(min_context_ngram=min_context)
        d.begin([8, 9, 5, 6], torch.zeros(1, VOCAB))
        d.model_table.update([8], top_row([3, 4]))
        tree = d.propose([8, 9, 5, 6, 8])  # (6, 8) unseen; the unigram (8) at 0 -> 9 5 6
        assert d.route == route
        assert tree.tokens == ([8, 3, 4] if route == "model" else [8, 9, 5, 6])


def test_statistics_database_from_an_earlier_prompt() -> None:
    for persistent, route, tokens in ((True, "statistics", [8, 1, 2, 3]), (False, "ar", [8])):
        d = drafter(persistent_statistics=persistent)
        d.begin([8, 1, 2, 3], torch.zeros(1, VOCAB))
        d.propose([8, 1, 2, 3, 4])  # counts 8 -> 1, (8, 1) -> 2, (8, 1, 2) -> 3, ...
        d.end()
        d.begin([5, 6, 7], torch.zeros(1, VOCAB))  # fresh context and model databases
        tree = d.propose([5, 6, 7, 8])
        assert d.route == route and tree.tokens == tokens
    assert d.stats["hd_miss"] == 1


def test_bad_settings_name_the_field() -> None:
    import pytest

    with pytest.raises(ValueError, match="min_context_ngram"):
        HierarchyDrafter(max_ngram_size=2, min_context_ngram=3)


def test_method_yaml_instantiates() -> None:
    from hydra.utils import instantiate

    d = instantiate(method_config("hierarchy").drafter)
    assert isinstance(d, HierarchyDrafter) and d.carries_run_state
