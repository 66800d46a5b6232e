"""Acceptance by tree depth and by sibling rank in the step records (goose.engine.core.decode
`shape_counts`, `StepRecord`, `Generation.shape_totals`): a hand-built tree with known counts, and
a real generation whose per-step counts agree with its accepted lengths and tree sizes."""

from __future__ import annotations

from baselines.token_recycling import TokenRecyclingDrafter
from goose.engine.core.decode import SHAPE_FIELDS, generate, shape_counts
from goose.engine.core.drafter import ARDrafter
from tests.toy_harness import one_thread, tiny_engine, toy_prompts  # noqa: F401

# node:     0  1  2  3  4  5  6
# parent:  -1  0  0  1  1  2  3
# depth:    0  1  1  2  2  2  3
# rank:     -  0  1  0  1  0  0
PARENTS = [-1, 0, 0, 1, 1, 2, 3]


def test_hand_built_tree_counts_by_depth_and_rank():
    counts = shape_counts(PARENTS, [0, 2, 5])  # through the second child of the anchor
    assert counts == {
        "depth_offered": [2, 3, 1],
        "depth_accepted": [1, 1, 0],
        "rank_offered": [4, 2],
        "rank_accepted": [1, 1],
    }
    deep = shape_counts(PARENTS, [0, 1, 3, 6])  # the first-child spine to the bottom
    assert deep["depth_accepted"] == [1, 1, 1] and deep["rank_accepted"] == [3, 0]


def test_anchor_only_and_nothing_accepted():
    assert shape_counts([-1], [0]) == {name: [] for name in SHAPE_FIELDS}
    none = shape_counts(PARENTS, [0])
    assert none["depth_accepted"] == [0, 0, 0] and none["rank_accepted"] == [0, 0]
    assert sum(none["depth_offered"]) == sum(none["rank_offered"]) == len(PARENTS) - 1


def test_step_records_agree_with_accepted_lengths_and_tree_sizes():
    engine = tiny_engine()
    prompt = [int(t) for t in toy_prompts(1, length=16)[0].text.split()]
    gen = generate(engine, TokenRecyclingDrafter(), prompt, max_new_tokens=24)
    ar = generate(engine, ARDrafter(), prompt, max_new_tokens=24)
    assert gen.output_ids == ar.output_ids  # recording the counts changes no decoding
    for step in gen.steps:
        assert sum(step.depth_offered) == sum(step.rank_offered) == step.tree_size - 1
        assert sum(step.depth_accepted) == sum(step.rank_accepted) == step.accepted_len
        # one accepted node per depth along the path, none below it
        assert step.depth_accepted[: step.accepted_len] == [1] * step.accepted_len
        assert not any(step.depth_accepted[step.accepted_len :])
    totals = gen.shape_totals()
    assert sum(totals["depth_accepted"]) == sum(s.accepted_len for s in gen.steps)
    assert sum(totals["depth_offered"]) == sum(s.tree_size - 1 for s in gen.steps)
    assert any(s.tree_size > 1 for s in gen.steps)
