"""budget=auto: the prefix cut, the choice of b against the latency curve, the acceptance
statistics, and losslessness of drafters sized by the `AutoBudget` sizer on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baselines.pld import PromptLookupDrafter
from goose.engine.budget.auto_budget import AutoBudget, AutoBudgetSettings, prefix_tree, with_auto_budget
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.acceptance import AcceptanceModel
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter, VerifyOutcome
from goose.engine.core.sizing import Speculator, StepTiming, TreeSizer
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.engine.forward.choose import verification_engine
from goose.method.drafter import GooseDrafter
from tests.tiny_models import tiny_model

FLAT = LatencyTable(sizes=[1, 128], seconds=[1.0, 1.0])
STEEP = LatencyTable(sizes=[1, 128], seconds=[1.0, 128.0])  # latency(n) = n
NO_GATE = AutoBudgetSettings(gate=None, price_bookkeeping=False)  # the size rule alone: every step drafts


def spine_tree(anchor: int = 1, spine: int = 6, branches: int = 6) -> DraftTree:
    tree = DraftTree.chain(anchor, list(range(10, 10 + spine)), SPINE)
    for j in range(branches):
        tree.add(100 + j, j % (spine + 1), BRANCH)
    return tree


class FixedDrafter(Drafter):
    """Proposes the same tree every step; records what it observed."""

    def __init__(self, tree: DraftTree):
        super().__init__(name="fixed")
        self.tree = tree
        self.seen: list[tuple[DraftTree, VerifyOutcome]] = []

    def propose(self, committed):
        self.route = "tree"
        tokens = [committed[-1], *self.tree.tokens[1:]]
        return DraftTree(tokens, list(self.tree.parents), list(self.tree.sources))

    def observe(self, tree, outcome):
        self.seen.append((tree, outcome))


def sized_step(sizer: TreeSizer, drafter: Drafter, committed: list[int]) -> DraftTree:
    """One step's tree as the decode loop sizes it: between `propose` and `verify`."""
    sizer.start_step(committed)
    return sizer.size(drafter.propose(committed))


def test_prefix_tree_is_a_valid_ancestor_closed_tree():
    tree = spine_tree()
    for b in range(1, len(tree) + 1):
        cut = prefix_tree(tree, b)
        cut.validate()
        assert cut.tokens == tree.tokens[:b] and cut.parents == tree.parents[:b]


def test_flat_latency_keeps_everything_steep_latency_cuts_to_ar():
    tree = spine_tree()
    flat = AutoBudget(FLAT)
    steep = AutoBudget(STEEP)
    keys = flat.acceptance.keys(tree)
    assert flat.choose(tree, keys) == len(tree)
    assert steep.choose(tree, keys) == 1
    assert AutoBudget(FLAT, max_nodes=5).choose(tree, keys) == 5
    assert AutoBudget(STEEP, min_nodes=3).choose(tree, keys) == 3


def test_choice_maximises_expected_tokens_per_second():
    tree = DraftTree.chain(1, list(range(10, 40)), SPINE)
    lat = LatencyTable(sizes=[1, 8, 32], seconds=[1.0, 1.2, 3.0])
    sizer = AutoBudget(lat)
    keys = sizer.acceptance.keys(tree)
    q = sizer.acceptance.path_probabilities(tree, keys)
    rate = [sum(q[:b]) / lat(b) for b in range(1, len(tree) + 1)]
    assert sizer.choose(tree, keys) == int(np.argmax(rate)) + 1
    r = sizer.acceptance.rates(keys)
    assert q[3] == pytest.approx(r[0] * r[1] * r[2])


def test_acceptance_model_learns_from_outcomes():
    model = AcceptanceModel(prior_strength=2.0)
    tree = DraftTree.single(1)
    s = tree.add(5, 0, SPINE)
    tree.add(6, 0, BRANCH)  # rank 1 under the root: never accepted
    tree.add(7, s, SPINE)  # reached when node 1 is accepted; never accepted itself
    keys = model.keys(tree)
    assert keys[2].tolist() == [0, 1, 0]  # sibling ranks
    before = model.rates(keys)
    for _ in range(50):
        model.update(tree, keys, [0, 1])
    after = model.rates(keys)
    assert after[0] > 0.9 > before[0]
    assert after[1] < 0.05 and after[2] < 0.05
    assert model.reached[SPINE, 2, 0] == 50  # node 3 was reached every time
    for _ in range(600):
        model.update(tree, keys, [0, 1])
    assert model.reached.max() <= model.cap  # halved past the cap


def test_the_sizer_cuts_a_prefix_and_the_drafter_observes_it():
    model = tiny_model("llama", seed=3)
    engine = verification_engine(model, eos_token_ids=())
    full = spine_tree(anchor=0)
    inner = FixedDrafter(full)
    table = LatencyTable(sizes=[1, 4, 13], seconds=[1.0, 1.1, 30.0])
    speculator = with_auto_budget(inner, engine, latency=table, settings=NO_GATE)
    assert speculator.drafter is inner and isinstance(speculator.sizer, AutoBudget)
    gen = generate(engine, inner, list(range(5, 15)), max_new_tokens=6, sizer=speculator.sizer)
    assert gen.output_ids == generate(engine, ARDrafter(), list(range(5, 15)), 6).output_ids
    for tree, outcome in inner.seen:
        assert len(tree) < len(full) and tree.tokens[1:] == full.tokens[1 : len(tree)]
        assert outcome.logits.shape[0] == len(tree)
    stats = gen.drafter_stats
    assert stats["auto_trees"] == len(inner.seen) == gen.forward_calls - 1
    assert stats["auto_nodes_verified"] < stats["auto_nodes_proposed"]
    config = speculator.config()
    assert config["budget_auto"] is True and list(config)[0] == "budget_auto"  # FixedDrafter has no config


def test_cut_to_one_node_is_an_ar_step():
    model = tiny_model("llama", seed=3)
    engine = verification_engine(model, eos_token_ids=())
    prompt, chain = list(range(5, 15)), DraftTree.chain(0, [10, 11, 12, 13], SPINE)
    gen = generate(engine, FixedDrafter(chain), prompt, 6, sizer=AutoBudget(STEEP, settings=NO_GATE))
    assert {s.route for s in gen.steps} == {"ar"} and {s.tree_size for s in gen.steps} == {1}
    assert gen.drafter_stats["auto_cut_to_ar"] == len(gen.steps)
    fixed = generate(engine, FixedDrafter(chain), prompt, 6)  # budget=fixed: no sizer
    assert {s.route for s in fixed.steps} == {"tree"} and "auto_trees" not in fixed.drafter_stats


def test_the_fixed_budget_sizer_verifies_the_tree_as_proposed():
    tree = spine_tree()
    sizer = TreeSizer()
    assert sizer.size(tree) is tree and sizer.end() == {} and sizer.config() == {}
    speculator = Speculator.of(FixedDrafter(tree))
    assert Speculator.of(speculator) is speculator and not speculator.carries_run_state
    assert speculator.run_state() == {"drafter": None, "sizer": None}


def test_capabilities_are_declared_on_the_drafter_class():
    """The loop and the sizer read what a drafter needs as class attributes with defaults, never probe it."""
    from baselines.hw_tree import HwTreeDrafter
    from baselines.self_draft.drafter import SelfDraftDrafter
    from baselines.stand import StandDrafter

    assert not Drafter.sizes_itself and not Drafter.needs_draft_forward
    assert Drafter().use_latency(float) is None and Drafter().use_draft_forward(None) is None  # no-op hooks
    assert all(cls.sizes_itself for cls in (StandDrafter, HwTreeDrafter, SelfDraftDrafter))
    assert SelfDraftDrafter.needs_draft_forward and not GooseDrafter.sizes_itself


def test_a_speculator_carries_the_drafter_and_the_sizer_state_across_prompts():
    drafter = FixedDrafter(DraftTree.chain(1, [10, 11, 12, 13], SPINE))
    speculator = Speculator(drafter, AutoBudget(LatencyTable(sizes=[1, 2, 8], seconds=[1.0, 1.1, 1.7])))
    assert speculator.carries_run_state  # the sizer's learnt rates, although the drafter carries nothing
    sizer = speculator.sizer
    sizer.begin(drafter)
    tree = sized_step(sizer, drafter, [1])
    sizer.observe(
        tree, VerifyOutcome(torch.zeros(len(tree), 4), [0] * len(tree), [0], [1]), StepTiming(0.0, 1.0)
    )
    state = speculator.run_state()
    fresh = Speculator(FixedDrafter(drafter.tree), AutoBudget(sizer.latency))
    fresh.restore_run_state(state)
    assert np.array_equal(fresh.sizer.acceptance.reached, sizer.acceptance.reached)
    assert fresh.sizer.acceptance is not sizer.acceptance  # a copy: the checkpoint stays as it was


@pytest.mark.parametrize("make", [lambda: GooseDrafter(), lambda: PromptLookupDrafter()])
def test_wrapped_drafters_are_lossless(make):
    model = tiny_model("qwen3", seed=4)
    engine = verification_engine(model, eos_token_ids=())
    prompt = [3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 3, 4, 5]
    ref = generate(engine, ARDrafter(), prompt, 24).output_ids
    table = LatencyTable(sizes=[1, 8, 64], seconds=[1.0, 1.3, 4.0])
    got = generate(engine, make(), prompt, 24, sizer=AutoBudget(table))
    assert got.output_ids == ref


def test_goose_spine_count_follows_the_cut():
    """Goose's EMA divides by the spine nodes of the tree that was verified, not of the tree it
    built: the sizer cut a long spine to 2 nodes, both accepted -> acceptance 2/2 = 1."""
    goose = GooseDrafter()
    sizer = AutoBudget(LatencyTable(sizes=[1, 3, 4], seconds=[1.0, 1.0, 100.0]))
    prompt = [3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 3, 4]
    logits = torch.full((len(prompt), 16), -5.0)
    for i, t in enumerate(prompt[1:]):
        logits[i, t] = 5.0  # the prefill harvest learns the prompt's successors
    sizer.begin(goose)
    goose.begin(prompt, logits)
    tree = sized_step(sizer, goose, prompt)
    assert len(tree) == 3 and tree.sources.count(SPINE) == 2 and goose.route == "spine_tree"
    before = goose.ema.value
    outcome = VerifyOutcome(
        logits=torch.zeros(3, 16),
        predictions=[tree.tokens[1], tree.tokens[2], 0],
        accepted_nodes=[0, 1, 2],
        new_tokens=[tree.tokens[1], tree.tokens[2], 0],
    )
    goose.observe(tree, outcome)
    sizer.observe(tree, outcome, StepTiming(0.0, 1.0))
    assert goose.ema.value == pytest.approx(goose.cfg.ema_alpha * 1.0 + (1 - goose.cfg.ema_alpha) * before)


def _trap_replay(decay: float) -> list[int]:
    """A chain source that fails 30 times in a row and then recovers (every node accepted), under a
    latency curve where the first node breaks even at r = 0.1: the b chosen at each step."""
    lat = LatencyTable(sizes=[1, 2, 8], seconds=[1.0, 1.1, 1.7])
    drafter = FixedDrafter(DraftTree.chain(1, [10, 11, 12, 13], SPINE))
    sizer = AutoBudget(lat, decay=decay)
    sizer.begin(drafter)
    drafter.begin([1], torch.zeros(1, 4))
    chosen = []
    for step in range(400):
        tree = sized_step(sizer, drafter, [1])
        chosen.append(len(tree))
        accepted = list(range(len(tree))) if step >= 30 else [0]  # the source recovers at step 30
        outcome = VerifyOutcome(torch.zeros(len(tree), 4), [0] * len(tree), accepted, [1])
        drafter.observe(tree, outcome)
        sizer.observe(tree, outcome, StepTiming(0.0, 1.0))
    return chosen


def test_a_source_cut_to_the_anchor_is_re_estimated_after_it_recovers():
    """Without forgetting the cut is absorbing: once the rate falls below break-even the node is
    never verified again, so the recovery at step 30 is never seen (decay=1 shows the failure)."""
    frozen = _trap_replay(decay=1.0)
    assert frozen[0] > 1 and frozen[29] == 1
    assert all(b == 1 for b in frozen[30:])  # the trap this test guards against
    forgetting = _trap_replay(decay=0.99)
    assert forgetting[29] == 1  # it did cut the failing source
    reopened = next(i for i, b in enumerate(forgetting) if i >= 30 and b > 1)
    assert reopened < 30 + 120  # within about one and a half half-lives
    assert all(b == 5 for b in forgetting[reopened + 20 :])  # and keeps the recovered chain


def test_forgetting_pulls_an_unobserved_cell_back_to_its_prior():
    model = AcceptanceModel(prior_strength=2.0, decay=0.9)
    tree = DraftTree.chain(1, [10], SPINE)
    keys = model.keys(tree)
    prior = model.rates(keys)[0]
    for _ in range(20):
        model.update(tree, keys, [0])
    low = model.rates(keys)[0]
    for _ in range(100):
        model.age()
    assert low < 0.1 and model.rates(keys)[0] == pytest.approx(prior, abs=1e-3)
    with pytest.raises(ValueError, match="decay"):
        AcceptanceModel(decay=0.0)


def test_a_cut_keeps_every_node_past_accept_limit_and_prices_them():
    """budget=auto on a Lookahead-style tree: only acceptable nodes are cut; the window nodes (past
    accept_limit, hanging off the anchor) stay, re-indexed, and b is chosen with t(b + window)."""
    from goose.engine.budget.auto_budget import prefix_tree
    from goose.engine.core.tree import LOOKAHEAD

    tree = DraftTree.chain(9, [1, 2, 3], BRANCH)  # acceptable: nodes 0..3
    w0 = tree.add(7, 0, LOOKAHEAD)
    tree.add(8, w0, LOOKAHEAD)
    tree.accept_limit = 4
    cut = prefix_tree(tree, 2)
    assert cut.tokens == [9, 1, 7, 8] and cut.parents == [-1, 0, 0, 2] and cut.accept_limit == 2
    cut.validate()
    assert prefix_tree(tree, 4) is tree
    hanging = DraftTree.chain(9, [1, 2], BRANCH)
    hanging.add(7, 2, LOOKAHEAD)  # under an acceptable node that a cut to b = 2 removes: no cut
    hanging.accept_limit = 3
    assert prefix_tree(hanging, 2) is hanging


def test_a_kv_aware_table_sizes_each_step_at_its_cache_length():
    # t(n) = 1 + 0.02 (n - 1) at KV 8 (a long tree pays), 1 + 2 (n - 1) at KV 64 (only the anchor pays)
    table = LatencyTable(sizes=[1, 128], seconds=[1.0, 3.54], kv_len=8, kv_seconds={64: [1.0, 255.0]})
    tree = spine_tree()
    sizes = {}
    for cache in (8, 64):
        drafter, sizer = FixedDrafter(tree), AutoBudget(table)
        sizer.begin(drafter)
        drafter.begin(list(range(cache)), torch.zeros(1, 4))
        committed = list(range(cache + 1))  # the cache: all but the anchor
        sizes[cache] = len(sized_step(sizer, drafter, committed))
    assert sizes[8] > 7 and sizes[64] == 1  # the whole spine and more at KV 8; at KV 64 the anchor alone
    drafter, flat = FixedDrafter(tree), AutoBudget(LatencyTable(sizes=[1, 128], seconds=[1.0, 3.54]))
    flat.begin(drafter)
    drafter.begin([1], torch.zeros(1, 4))
    assert len(sized_step(flat, drafter, list(range(65)))) == sizes[8]  # one curve: the cache plays no part
