"""Tree baselines on the adjacency table: Token Recycling, isotropic (iso3/iso5), EAGLE-2-style."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from baselines.eagle2 import Eagle2Drafter, prune_by_value, subtree
from baselines.isotropic import IsotropicDrafter
from baselines.token_recycling import (
    TR_LEVEL_SIZES,
    TR_TEMPLATE,
    TokenRecyclingDrafter,
    design_template,
    fill_template,
)
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, DraftTree
from goose.sources.adjacency import AdjacencyTable
from tests.conftest import method_config

CONF = Path(__file__).resolve().parents[2] / "conf" / "method"


def row_logits(vocab: int, scores: dict[int, float]) -> torch.Tensor:
    """[1, V] logits whose top entries are `scores` (log-probabilities), the rest far below."""
    out = torch.full((1, vocab), -1000.0)
    for t, s in scores.items():
        out[0, t] = math.log(s)
    return out


def set_row(table: AdjacencyTable, token: int, scores: dict[int, float], prev: int | None = None) -> None:
    prev_tokens = None if prev is None else [prev]
    table.update([token], row_logits(table.vocab_size, scores), prev_tokens)


def random_drafter_table(drafter, vocab: int = 64, seed: int = 0) -> None:
    """begin() on a random prefill that covers every token, so every row is filled."""
    gen = torch.Generator().manual_seed(seed)
    prompt = list(range(vocab))
    drafter.begin(prompt, torch.randn(vocab, vocab, generator=gen))


def levels(tree: DraftTree) -> list[int]:
    return [tree.depths.count(d) for d in range(1, max(tree.depths) + 1)]


# ---------------------------------------------------------------- Token Recycling template
def test_tr_template_level_sizes_and_prefix_closure() -> None:
    assert len(TR_TEMPLATE) == 80
    sizes = tuple(sum(1 for p in TR_TEMPLATE if len(p) == d) for d in range(1, 7))
    assert sizes == TR_LEVEL_SIZES == (8, 21, 25, 15, 8, 3)
    assert len(set(TR_TEMPLATE)) == 80
    seen: set[tuple[int, ...]] = {()}
    for path in TR_TEMPLATE:  # parents listed before children
        assert path[:-1] in seen, path
        assert all(0 <= r < 8 for r in path)
        seen.add(path)


def test_tr_template_is_the_documented_design() -> None:
    assert design_template() == TR_TEMPLATE


def test_tr_fill_from_hand_table() -> None:
    vocab = 32
    table = AdjacencyTable(vocab, 8, use_scores=False)
    # anchor 0 -> 5..12; token 5 -> 13..20; token 13 -> 21..28; every other token unseen
    for token, first in ((0, 5), (5, 13), (13, 21)):
        logits = torch.full((1, vocab), -100.0)
        logits[0, first : first + 8] = torch.arange(8, 0, -1, dtype=torch.float32)
        table.update([token], logits)
    tree = fill_template(0, table)
    tree.validate()
    # level 1: all 8 ranks of the anchor; level 2: only (0, r) (token 5 has a row) -> 8 nodes;
    # level 3: (0, 0, r) for r < 6 under token 13; (0, 1, *) etc. have unseen parents; level 4:
    # parents (tokens 21..) unseen -> nothing.
    assert tree.tokens == [0, *range(5, 13), *range(13, 21), *range(21, 27)]
    assert tree.parents == [-1, *[0] * 8, *[1] * 8, *[9] * 6]
    assert tree.sources == [ROOT, *[BRANCH] * 22]


def test_tr_full_table_fills_all_80_nodes() -> None:
    drafter = TokenRecyclingDrafter()
    vocab = 64
    drafter.begin([1, 2], torch.zeros(2, vocab))
    assert drafter.propose([1, 2]).tokens == [2]  # no prefill harvest: nothing known yet
    assert drafter.route == "ar"
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(vocab, vocab, generator=gen)
    tree = DraftTree([0, *range(1, vocab)], [-1, *[0] * (vocab - 1)], [ROOT, *[BRANCH] * (vocab - 1)])
    drafter.observe(tree, VerifyOutcome(logits, logits.argmax(-1).tolist(), [0], [1]))
    draft = drafter.propose([5, 7])
    draft.validate()
    assert drafter.route == "tree"
    assert len(draft) == 81
    assert levels(draft) == list(TR_LEVEL_SIZES)
    top = logits.topk(8, dim=-1).indices
    assert draft.tokens[1:9] == top[7].tolist()  # anchor 7's row in rank order


def test_tr_does_not_harvest_prefill() -> None:
    drafter = TokenRecyclingDrafter()
    drafter.begin([3, 4, 5], torch.randn(3, 16))
    assert drafter.table.num_rows == 0


# ---------------------------------------------------------------- isotropic
@pytest.mark.parametrize(
    ("branching", "budget", "max_depth", "expected_levels"),
    [
        (3, 60, 6, [3, 9, 27, 20]),
        (5, 60, 6, [5, 25, 29]),
        (3, 1000, 3, [3, 9, 27]),
        (2, 1000, 6, [2, 4, 8, 16, 32, 64]),
    ],
)
def test_iso_tree_is_balanced(
    branching: int, budget: int, max_depth: int, expected_levels: list[int]
) -> None:
    drafter = IsotropicDrafter(branching=branching, max_depth=max_depth, budget=budget, use_bigram=False)
    random_drafter_table(drafter)  # softmax over 10 random logits: every score well above 0.01
    tree = drafter.propose([1, 2, 3])
    tree.validate()
    assert drafter.route == "tree"
    assert len(tree) <= budget
    assert levels(tree) == expected_levels
    kids = tree.children()
    for node in range(len(tree)):
        assert len(kids[node]) <= branching
    # breadth-first: every node of a full level above the last has exactly `branching` children
    for node in range(len(tree)):
        if tree.depths[node] < len(expected_levels) - 1:
            assert len(kids[node]) == branching
    assert set(tree.sources[1:]) == {BRANCH}


def test_iso_children_are_top_successors_above_min_score() -> None:
    drafter = IsotropicDrafter(branching=3, budget=60)
    drafter.begin([0], torch.zeros(1, 16))
    drafter.table.reset()
    set_row(drafter.table, 1, {4: 0.5, 5: 0.3, 6: 0.195, 7: 0.005})
    tree = drafter.propose([9, 1])
    assert tree.tokens == [1, 4, 5, 6]  # 7 is below min_score 0.01; 4, 5, 6 unseen
    assert tree.parents == [-1, 0, 0, 0]
    set_row(drafter.table, 1, {4: 0.995, 7: 0.005})
    assert drafter.propose([9, 1]).tokens == [1, 4]


def test_iso_bigram_row_first_with_committed_prev() -> None:
    drafter = IsotropicDrafter(branching=2, budget=60)
    drafter.begin([0], torch.zeros(1, 16))
    drafter.table.reset()
    set_row(drafter.table, 1, {4: 0.6, 5: 0.4}, prev=8)  # bigram (8, 1) and unigram row of 1
    set_row(drafter.table, 1, {6: 0.6, 7: 0.4}, prev=9)  # bigram (9, 1); unigram row now 6, 7
    assert drafter.propose([8, 1]).tokens == [1, 4, 5]
    assert drafter.propose([9, 1]).tokens == [1, 6, 7]
    assert drafter.propose([3, 1]).tokens == [1, 6, 7]  # bigram miss -> unigram
    assert drafter.propose([1]).tokens == [1, 6, 7]  # no prev at all


def test_iso_observe_updates_with_parent_tokens_as_prev() -> None:
    vocab = 16
    drafter = IsotropicDrafter(branching=2, budget=60)
    drafter.begin([0], torch.zeros(1, vocab))
    drafter.table.reset()
    set_row(drafter.table, 1, {4: 0.6, 5: 0.4})
    tree = drafter.propose([8, 1])
    assert tree.tokens == [1, 4, 5]
    logits = torch.cat(
        [
            row_logits(vocab, {10: 0.9, 11: 0.1}),
            row_logits(vocab, {12: 0.9, 13: 0.1}),
            row_logits(vocab, {14: 0.9, 15: 0.1}),
        ]
    )
    drafter.observe(tree, VerifyOutcome(logits, [10, 12, 14], [0], [10]))
    table = drafter.table
    assert sorted(table._bg_slot) == sorted([8 * vocab + 1, 1 * vocab + 4, 1 * vocab + 5])
    assert table.successors(1, prev=8, min_score=0.01)[0] == [10, 11]  # root: prev = committed[-2]
    assert table.successors(4, prev=1, min_score=0.01)[0] == [12, 13]
    assert table.successors(5, prev=1, min_score=0.01)[0] == [14, 15]


def test_iso_no_successors_is_an_ar_step() -> None:
    drafter = IsotropicDrafter(branching=3)
    drafter.begin([0], torch.zeros(1, 16))
    drafter.table.reset()
    tree = drafter.propose([2, 3])
    assert tree.tokens == [3] and drafter.route == "ar"


def test_iso_node_budget_hook() -> None:
    class Narrow(IsotropicDrafter):
        def node_budget(self, committed: list[int]) -> int:
            return 7

    drafter = Narrow(branching=3, use_bigram=False)
    random_drafter_table(drafter)
    assert len(drafter.propose([1, 2])) == 7


# ---------------------------------------------------------------- EAGLE-2-style pruning
def test_prune_by_value_hand_example() -> None:
    parents = [-1, 0, 0, 1, 1, 2]
    values = [1.0, 0.6, 0.4, 0.5, 0.05, 0.3]
    assert prune_by_value(parents, values, 4) == [0, 1, 2, 3]
    assert prune_by_value(parents, values, 2) == [0, 1]
    assert prune_by_value(parents, values, 100) == [0, 1, 2, 3, 4, 5]
    assert prune_by_value(parents, values, 1) == [0]


def test_prune_by_value_ties_keep_ancestors() -> None:
    # a chain of score-1 steps: every value ties; the parent (smaller index) must win
    parents = [-1, 0, 1, 2, 0]
    values = [1.0, 0.5, 0.5, 0.5, 0.5]
    assert prune_by_value(parents, values, 3) == [0, 1, 2]
    assert prune_by_value(parents, values, 4) == [0, 1, 2, 3]


def test_prune_by_value_rejects_child_worth_more_than_parent() -> None:
    with pytest.raises(ValueError):
        prune_by_value([-1, 0, 1], [1.0, 0.3, 0.4], 2)


@pytest.mark.parametrize("seed", range(20))
def test_prune_by_value_random_trees(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 200)
    parents, values = [-1], [1.0]
    for i in range(1, n):
        p = rng.randrange(i)
        score = rng.choice([1.0, 0.5, rng.random()])  # ties on purpose
        parents.append(p)
        values.append(values[p] * score)
    keep = rng.randint(1, n + 5)
    kept = prune_by_value(parents, values, keep)
    assert len(kept) == min(keep, n)
    assert kept == sorted(kept) and kept[0] == 0
    kept_set = set(kept)
    for i in kept[1:]:
        assert parents[i] in kept_set
    dropped = [i for i in range(n) if i not in kept_set]
    if dropped:  # nothing dropped is worth more than anything kept
        assert max(values[i] for i in dropped) <= min(values[i] for i in kept)
    tree = subtree(list(range(n)), parents, kept)  # distinct tokens: validate checks the shape
    tree.validate()


def test_eagle2_hand_expansion_and_cut() -> None:
    vocab = 16
    drafter = Eagle2Drafter(budget=4, topk=1, k=2, use_bigram=False)
    drafter.begin([0], torch.zeros(1, vocab))
    drafter.table.reset()
    set_row(drafter.table, 0, {1: 0.6, 2: 0.4})
    set_row(drafter.table, 1, {3: 0.9, 4: 0.1})
    set_row(drafter.table, 2, {5: 0.7, 6: 0.3})
    tokens, parents, values = drafter.expand(0, None)
    # layer 1: 1 (0.6), 2 (0.4); topk=1 expands only token 1 -> 3 (0.54), 4 (0.06); 3 unseen
    assert tokens == [0, 1, 2, 3, 4]
    assert parents == [-1, 0, 0, 1, 1]
    assert values == pytest.approx([1.0, 0.6, 0.4, 0.54, 0.06], abs=1e-6)
    tree = drafter.propose([0])
    tree.validate()
    assert tree.tokens == [0, 1, 2, 3]  # B - 1 = 3 best: 0.6, 0.54, 0.4
    assert tree.parents == [-1, 0, 0, 1]
    assert drafter.route == "tree"

    wide = Eagle2Drafter(budget=60, topk=2, k=2, use_bigram=False)
    wide.table = drafter.table
    tokens, parents, values = wide.expand(0, None)
    assert tokens == [0, 1, 2, 3, 4, 5, 6]
    assert values == pytest.approx([1.0, 0.6, 0.4, 0.54, 0.06, 0.28, 0.12], abs=1e-6)


def test_eagle2_budget_depth_and_monotone_values() -> None:
    drafter = Eagle2Drafter(budget=60, max_depth=6, topk=10, use_bigram=False)
    random_drafter_table(drafter, seed=1)
    tokens, parents, values = drafter.expand(3, None)
    assert len(tokens) > 60
    kept = prune_by_value(parents, values, 60)
    tree = drafter.propose([2, 3])
    tree.validate()
    assert len(tree) == 60  # B nodes with the anchor
    assert max(tree.depths) <= 6
    assert tree.tokens == [tokens[i] for i in kept]
    kept_values = [values[i] for i in kept]
    for i in range(1, len(tree)):
        assert kept_values[i] <= kept_values[tree.parents[i]]


# ---------------------------------------------------------------- configs
@pytest.mark.parametrize(
    ("name", "cls", "expected"),
    [
        ("tr", TokenRecyclingDrafter, {"k": 8}),
        ("iso3", IsotropicDrafter, {"branching": 3, "budget": 60, "max_depth": 6, "k": 10}),
        ("iso5", IsotropicDrafter, {"branching": 5, "budget": 60, "max_depth": 6, "k": 10}),
        ("eagle2", Eagle2Drafter, {"budget": 60, "max_depth": 6, "topk": 10, "k": 10}),
    ],
)
def test_method_configs_instantiate(name: str, cls: type, expected: dict) -> None:
    from hydra.utils import instantiate

    cfg = method_config(name)
    assert cfg.name == name
    drafter = instantiate(cfg.drafter)
    assert isinstance(drafter, cls)
    assert drafter.name == name
    config = drafter.config()
    for key, value in expected.items():
        assert config[key] == value
    if "min_score" in config:
        assert config["min_score"] == 0.01
        assert config["use_bigram"] is True and config["prefill_harvest"] is True


# ---------------------------------------------------------------- end to end on a tiny model
@pytest.mark.parametrize(
    "make",
    [
        TokenRecyclingDrafter,
        lambda: IsotropicDrafter(branching=3),
        lambda: IsotropicDrafter(branching=5),
        Eagle2Drafter,
    ],
    ids=["tr", "iso3", "iso5", "eagle2"],
)
def test_drafter_generation_is_lossless_on_tiny_model(make) -> None:
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("llama", seed=3)
    drafter = make()
    prompts = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 10, 11, 9, 10, 11, 9, 10]]
    for prompt in prompts:  # two prompts: TR's table carries over, the others start fresh
        ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
        gen = generate(verification_engine(model, eos_token_ids=()), drafter, prompt, max_new_tokens=40)
        assert gen.output_ids == ref.output_ids
        assert gen.routes().get("tree", 0) > 0
        assert gen.tau >= 1.0
