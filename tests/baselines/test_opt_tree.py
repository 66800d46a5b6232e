"""OPT-Tree over Goose's candidates: best-first selection on hand-built candidate sets (ties
included), optimality against brute force, learnt rates moving the tree, mapping of cut trees
back to the proposal, config, validation, and losslessness on tiny models."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from baselines.opt_tree import Candidate, OptTreeDrafter, select_best_first
from goose.engine.budget.auto_budget import AutoBudget, prefix_tree
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.acceptance import AcceptanceModel
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from tests.conftest import method_config

V = 64


def path_tokens(tree: DraftTree, node: int) -> tuple[int, ...]:
    """Tokens from the anchor's child down to `node` (() for the anchor)."""
    out = []
    while node > 0:
        out.append(tree.tokens[node])
        node = tree.parents[node]
    return tuple(reversed(out))


def from_table(table: dict[tuple[int, ...], list[tuple[int, int, float]]]):
    """children callback of a hand-built candidate set: path -> [(token, source, rate)], rank =
    position in the list."""

    def children(tree: DraftTree, node: int) -> list[Candidate]:
        rows = table.get(path_tokens(tree, node), [])
        return [Candidate(t, s, r, rate) for r, (t, s, rate) in enumerate(rows)]

    return children


# anchor 0; values: 1: .9, (1,4): .72, (1,4,6): .36, 2: .3, 3: .2, (1,4,7): .18 (depth 3),
# (1,4,6,9): .18 (depth 4, an exact tie with (1,4,7)), (2,8): .15, (1,5): .09
HAND = {
    (): [(1, SPINE, 0.9), (2, BRANCH, 0.3), (3, BRANCH, 0.2)],
    (1,): [(4, SPINE, 0.8), (5, BRANCH, 0.1)],
    (1, 4): [(6, SPINE, 0.5), (7, BRANCH, 0.25)],
    (1, 4, 6): [(9, SPINE, 0.5)],
    (2,): [(8, BRANCH, 0.5)],
}


def test_selection_on_a_hand_built_candidate_set():
    full = select_best_first(0, from_table(HAND), 100)
    assert full.tree.tokens == [0, 1, 4, 6, 2, 3, 7, 9, 8, 5]
    assert full.tree.parents == [-1, 0, 1, 2, 0, 0, 2, 3, 4, 1]
    assert full.tree.sources == [ROOT, SPINE, SPINE, SPINE, BRANCH, BRANCH, BRANCH, SPINE, BRANCH, BRANCH]
    assert full.values == pytest.approx([1.0, 0.9, 0.72, 0.36, 0.3, 0.2, 0.18, 0.18, 0.15, 0.09])
    assert full.ranks == [0, 0, 0, 0, 1, 2, 1, 0, 0, 1]
    full.tree.validate()
    five = select_best_first(0, from_table(HAND), 5)
    assert five.tree.tokens == [0, 1, 4, 6, 2]
    assert five.expected_accepted == pytest.approx(0.9 + 0.72 + 0.36 + 0.3)


def test_tie_between_depths_goes_to_the_shallower_node():
    # (1,4,7) at depth 3 and (1,4,6,9) at depth 4 are both worth exactly .72/4 = .18
    values = select_best_first(0, from_table(HAND), 8).values
    assert values[6] == values[7]
    seven = select_best_first(0, from_table(HAND), 7)
    assert seven.tree.tokens[-1] == 7 and 9 not in seven.tree.tokens
    # and a tie at one value across depths 1 and 2: the depth-1 node first
    tie = {(): [(1, BRANCH, 0.5), (2, BRANCH, 0.25)], (1,): [(3, BRANCH, 0.5)]}
    assert select_best_first(0, from_table(tie), 3).tree.tokens == [0, 1, 2]
    assert select_best_first(0, from_table(tie), 4).tree.tokens == [0, 1, 2, 3]


def test_child_tying_its_parent_never_comes_first():
    # 3 (child of 1, rate 1.0) and 4 (its child, rate 1.0) are worth exactly as much as 1 and 2
    tie = {
        (): [(1, BRANCH, 0.5), (2, BRANCH, 0.5)],
        (1,): [(3, SPINE, 1.0)],
        (1, 3): [(4, SPINE, 1.0)],
    }
    for budget, tokens in ((2, [0, 1]), (3, [0, 1, 2]), (4, [0, 1, 2, 3]), (5, [0, 1, 2, 3, 4])):
        sel = select_best_first(0, from_table(tie), budget)
        assert sel.tree.tokens == tokens
        assert all(v == 0.5 for v in sel.values[1:])
    # the parent itself can lose only to something worth more: a rate-1.0 child follows it at once
    chain = {(): [(1, SPINE, 0.5), (2, BRANCH, 0.4)], (1,): [(3, SPINE, 1.0)]}
    assert select_best_first(0, from_table(chain), 2).tree.tokens == [0, 1]
    assert select_best_first(0, from_table(chain), 3).tree.tokens == [0, 1, 3]


def test_every_prefix_is_the_best_tree_of_its_size():
    full = select_best_first(0, from_table(HAND), 100)
    for b in range(1, len(full.tree) + 1):
        sel = select_best_first(0, from_table(HAND), b)
        cut = prefix_tree(full.tree, b)
        cut.validate()
        assert (sel.tree.tokens, sel.tree.parents) == (cut.tokens, cut.parents)


def test_rates_out_of_range_are_rejected():
    with pytest.raises(ValueError, match="rate must be in"):
        select_best_first(0, from_table({(): [(1, BRANCH, 1.5)]}), 3)


def _random_candidates(rng: random.Random, n: int):
    """A random candidate tree of n nodes with rates from a small set (many exact ties)."""
    table: dict[tuple[int, ...], list[tuple[int, int, float]]] = {}
    paths = [()]
    for token in range(1, n):
        parent = rng.choice(paths)
        rate = rng.choice([1.0, 0.5, 0.25, 0.75, 0.125])
        table.setdefault(parent, []).append((token, BRANCH, rate))
        paths.append((*parent, token))
    return table, paths


def _best_by_brute_force(table, paths, budget: int) -> float:
    value = {(): 1.0}
    for path in paths[1:]:
        rate = next(r for t, _, r in table[path[:-1]] if t == path[-1])
        value[path] = value[path[:-1]] * rate
    best = 0.0
    for subset in itertools.combinations(paths[1:], budget - 1):
        chosen = set(subset)
        if all(p[:-1] == () or p[:-1] in chosen for p in subset):  # ancestor-closed: a tree
            best = max(best, sum(value[p] for p in subset))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_best_first_maximises_expected_accepted_length(seed):
    rng = random.Random(seed)
    table, paths = _random_candidates(rng, 10)
    for budget in (2, 4, 6):
        sel = select_best_first(0, from_table(table), budget)
        assert sel.expected_accepted == pytest.approx(_best_by_brute_force(table, paths, budget))
        assert all(sel.values[sel.tree.parents[i]] >= sel.values[i] for i in range(1, len(sel.tree)))


# ------------------------------------------------------------------ the drafter
PROMPT = list(range(1, 40)) + [1, 2, 3]  # suffix [1, 2, 3] -> chain 4, 5, ... (earliest occurrence)


def prefill_logits(prompt=PROMPT) -> torch.Tensor:
    return torch.randn(len(prompt), V, generator=torch.Generator().manual_seed(0))


def started(prompt=PROMPT, **hp) -> OptTreeDrafter:
    d = OptTreeDrafter(**hp)
    d.begin(prompt, prefill_logits(prompt))  # every prompt token gets a row
    return d


def outcome(tree: DraftTree, accepted: list[int]) -> VerifyOutcome:
    return VerifyOutcome(
        torch.zeros(len(tree), V), [0] * len(tree), accepted, [tree.tokens[i] for i in accepted[1:]] + [0]
    )


def spine_path(tree: DraftTree) -> list[int]:
    return [0] + [i for i, s in enumerate(tree.sources) if s == SPINE]


def test_candidates_are_gooses_spine_then_adjacency_alternatives():
    d = started(budget=60)
    tree = d.propose(PROMPT)
    tree.validate()
    assert d.route == "spine_tree" and len(tree) == 60
    spine = spine_path(tree)[1:]
    assert [tree.tokens[i] for i in spine] == list(range(4, 4 + len(spine)))  # the matched chain
    assert [tree.parents[i] for i in spine] == [0, *spine[:-1]]  # one chain under the anchor
    for i in range(1, len(tree)):  # branches: successors (>= min_score) of the node's token
        if tree.sources[i] == BRANCH:
            p = tree.parents[i]
            prev = d._prev_anchor if p == 0 else tree.tokens[tree.parents[p]]
            assert tree.tokens[i] in d.successors(tree.tokens[p], prev)[0]
            assert tree.sources[p] != BRANCH or tree.depths[p] < d.max_depth
    # priors: r = 0.6 on the spine, 0.35 / (rank + 1) on branches
    assert d.rate(SPINE, 3, 0) == pytest.approx(0.6) and d.rate(BRANCH, 1, 1) == pytest.approx(0.175)


def test_no_match_and_no_successors_is_an_ar_step():
    d = OptTreeDrafter()
    d.begin([1, 2, 3], torch.zeros(1, V))  # harvest of the last prompt position only
    tree = d.propose([1, 2, 3, 50])  # 50 has no row, no n-gram match
    assert len(tree) == 1 and d.route == "ar" and d.stats == {"route_ar": 1}


def test_always_accepted_spine_makes_the_tree_deeper_along_the_spine():
    d = started(budget=30)
    first = d.propose(PROMPT)
    depths = [first.sources.count(SPINE)]
    d.observe(first, outcome(first, spine_path(first)))
    for _ in range(8):
        tree = d.propose(PROMPT)
        depths.append(tree.sources.count(SPINE))
        d.observe(tree, outcome(tree, spine_path(tree)))
    assert depths == sorted(depths) and depths[-1] > depths[0] + 10
    assert d.rate(SPINE, 1, 0) > 0.9


def test_learner_sees_the_verified_prefix_and_depth_cut():
    d = started(budget=40)
    tree = d.propose(PROMPT)
    cut = prefix_tree(tree, 25).truncate_depth(3)  # budget=auto's prefix, then the engine's cut
    assert len(cut) < 25
    nodes = d.verified_nodes(cut)
    assert nodes is not None and [tree.tokens[i] for i in nodes] == cut.tokens
    reached_before = d.acceptance.reached.sum()
    d.observe(cut, outcome(cut, [0, 1]))
    assert d.acceptance.reached.sum() - reached_before == sum(1 for p in cut.parents[1:] if p in (0, 1))
    keys = AcceptanceModel.bucket_keys([SPINE], [1], [0])
    assert cut.sources[1] == SPINE and d.acceptance.accepted[keys][0] == 1.0
    # an unrelated tree is not learnt from
    other = DraftTree.chain(99, [98, 97], SPINE)
    d.propose(PROMPT)
    assert d.verified_nodes(other) is None


def test_expected_accepted_and_shape_stats_of_the_verified_tree():
    d = started(budget=20)
    tree = d.propose(PROMPT)
    sel_values = list(d._proposed.values)
    d.observe(tree, outcome(tree, [0]))
    assert d.stats["opt_expected_accepted"] == pytest.approx(sum(sel_values[1:]))
    spine = tree.sources.count(SPINE)
    branch = tree.sources.count(BRANCH)
    assert d.stats["shape_trees"] == 1 and d.stats["shape_spine_depth"] == spine
    assert d.stats["shape_branch_nodes"] == branch
    assert d.stats["shape_branch_on_spine"] + d.stats["shape_branch_on_root"] == branch


def test_learnt_rates_are_run_state_and_restore_the_same_trees():
    d = started(budget=30)
    for _ in range(3):
        tree = d.propose(PROMPT)
        d.observe(tree, outcome(tree, spine_path(tree)))
    assert d.carries_run_state
    d.begin(PROMPT, prefill_logits())  # a new prompt: fresh table and pool, the rates stay
    assert d.rate(SPINE, 1, 0) > 0.8
    fresh = started(budget=30)
    assert fresh.propose(PROMPT).tokens != d.propose(PROMPT).tokens
    fresh.restore_run_state(d.run_state())
    assert fresh.propose(PROMPT).tokens == d.propose(PROMPT).tokens


# ------------------------------------------------------------------ config and validation
def test_method_config_instantiates_through_hydra():
    from hydra.utils import instantiate

    from goose.harness.compose import compose_config

    cfg = method_config("opt_tree")
    assert cfg.name == "opt_tree"
    drafter = instantiate(cfg.drafter, _convert_="all")
    assert isinstance(drafter, OptTreeDrafter) and drafter.name == "opt_tree"
    assert drafter.config() == OptTreeDrafter().config()
    config = drafter.config()
    assert (config["budget"], config["max_depth"], config["k"], config["min_score"]) == (60, 6, 10, 0.01)
    assert config["ngram_lengths"] == [5, 4, 3] and drafter.needs_prefill_logits
    compose_config(["method=opt_tree", "method.drafter.budget=40"])  # validated like a run.py job


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("budget", 1, ">= 2"),
        ("max_depth", 0, ">= 1"),
        ("k", 0, ">= 1"),
        ("min_score", 1.0, "in [0.0, 1.0)"),
        ("max_chain", 0, ">= 1"),
        ("ngram_lengths", [3, 4], "longest first"),
        ("extend_chain", "yes", "true or false"),
        ("max_extended_chain", 10, ">= 20"),
        ("chain_extension_threshold", 1.5, "in [0.0, 1.0]"),
        ("prior_strength", 0.0, "> 0"),
        ("spine_prior", 1.2, "in [0.0, 1.0]"),
        ("branch_prior", -0.1, "in [0.0, 1.0]"),
        ("use_bigram", 1, "true or false"),
    ],
)
def test_bad_hyperparameters_name_field_value_and_range(field, value, allowed):
    with pytest.raises(ValueError) as err:
        OptTreeDrafter(**{field: value})
    assert f"OptTreeDrafter.{field} = {value!r}" in str(err.value) and allowed in str(err.value)


# ------------------------------------------------------------------ end to end on tiny models
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_generation_is_lossless_on_tiny_models(arch):
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model(arch, seed=3)
    drafter = OptTreeDrafter()
    prompts = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 10, 11, 9, 10, 11, 9, 10]]
    for prompt in prompts:  # the learnt rates carry over to the second prompt
        ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
        gen = generate(verification_engine(model, eos_token_ids=()), drafter, prompt, max_new_tokens=40)
        assert gen.output_ids == ref.output_ids
        assert sum(v for r, v in gen.routes().items() if r != "ar") > 0
        assert gen.tau >= 1.0
        assert gen.drafter_stats["shape_trees"] == sum(1 for s in gen.steps if s.tree_size > 1)
    assert drafter.acceptance.reached.sum() > 0


def test_generation_under_budget_auto_is_lossless():
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("qwen3", seed=4)
    engine = verification_engine(model, eos_token_ids=())
    prompt = [3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 3, 4, 5]
    ref = generate(engine, ARDrafter(), prompt, 24).output_ids
    table = LatencyTable(sizes=[1, 8, 64], seconds=[1.0, 1.3, 4.0])
    inner = OptTreeDrafter()
    got = generate(engine, inner, prompt, 24, sizer=AutoBudget(table))
    assert got.output_ids == ref
    assert got.drafter_stats["auto_nodes_verified"] < got.drafter_stats["auto_nodes_proposed"]
    assert inner.acceptance.reached.sum() > 0  # learnt from the cut trees too
