"""hw_tree: best-first selection against brute force over every ancestor-closed subtree of small pools, the
size choice under hand-set latency functions, the pool's merging of sources, the estimator and the
calibration counts, the mapping of depth-cut trees, config and validation, identity with AR on tiny models."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from baselines.hw_tree.acceptance import (
    CALIBRATION_BINS,
    SIZE_BUCKETS,
    AcceptanceEstimator,
    Calibration,
    RowValue,
    SizeOutcomes,
    node_cell,
    prefix_accepted,
    size_bucket,
    source_priors,
)
from baselines.hw_tree.drafter import HwTreeDrafter
from baselines.hw_tree.pool import (
    ADJ,
    ALT,
    CTX,
    RUN,
    SIBLING_MASS,
    SUF,
    CandidatePool,
    best_size,
    conf_bin,
    expected_committed,
    occurrence_bins,
    select_best_first,
)
from goose.engine.core.acceptance_prior import load_prior
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import BRANCH, ROOT, SPINE
from tests.conftest import method_config


# ------------------------------------------------------------------ hand-built pools
def hand_pool(edges: list[tuple[int, int]]) -> CandidatePool:
    """A pool whose node i (1-based, in the order given) is edges[i-1] = (parent, token), source CTX."""
    pool = CandidatePool.rooted(0)
    for parent, token in edges:
        pool.add(parent, token, CTX, 0)
    return pool


def rate_from(rates: dict[int, float]):
    return lambda pool, node: rates[node]


#        0
#      / | \
#     1  2  3          r: 1 .6, 2 .3, 3 .05
#    / \    |
#   4   5   6          r: 4 .8 (.48), 5 .1 (.06), 6 .9 (.045)
#   |
#   7                  r: .5 (.24)
HAND_EDGES = [(0, 11), (0, 12), (0, 13), (1, 14), (1, 15), (3, 16), (4, 17)]
HAND_RATES = {1: 0.6, 2: 0.3, 3: 0.05, 4: 0.8, 5: 0.1, 6: 0.9, 7: 0.5}


def test_selection_order_on_a_hand_built_pool():
    sel = select_best_first(hand_pool(HAND_EDGES), rate_from(HAND_RATES), 100)
    # values: 1 .6, 4 .48, 2 .3, 7 .24, 5 .06, 3 .05, 6 .045
    assert sel.order == [0, 1, 4, 2, 7, 5, 3, 6]
    assert sel.values == pytest.approx([1.0, 0.6, 0.48, 0.3, 0.24, 0.06, 0.05, 0.045])
    assert sel.parents == [-1, 0, 1, 0, 2, 1, 0, 6]  # parents as places in the order
    assert sel.expected_committed()[3] == pytest.approx(1 + 0.6 + 0.48 + 0.3)
    assert select_best_first(hand_pool(HAND_EDGES), rate_from(HAND_RATES), 3).order == [0, 1, 4]


def test_siblings_share_at_most_the_sibling_mass():
    """Siblings are distinct tokens, so at most one is accepted: rates that add up to more than
    SIBLING_MASS are scaled down together, keeping their order."""
    pool = hand_pool([(0, 11), (0, 12), (0, 13), (1, 14)])
    sel = select_best_first(pool, rate_from({1: 0.9, 2: 0.6, 3: 0.3, 4: 1.0}), 10)
    scale = SIBLING_MASS / 1.8
    assert sel.order == [0, 1, 4, 2, 3]  # node 4, an only child with r = 1, keeps its parent's value
    assert sel.values == pytest.approx([1.0, 0.9 * scale, 0.9 * scale, 0.6 * scale, 0.3 * scale])
    assert sum(sel.values[i] for i in (1, 3, 4)) == pytest.approx(SIBLING_MASS)


def ancestor_closed_subsets(parents: list[int], size: int):
    """Every set of `size` nodes that holds node 0 and the parent of each of its nodes (brute force)."""
    for rest in itertools.combinations(range(1, len(parents)), size - 1):
        chosen = {0, *rest}
        if all(parents[i] in chosen for i in rest):
            yield chosen


@pytest.mark.parametrize("seed", range(12))
def test_every_prefix_is_the_best_subtree_of_its_size_by_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(4, 10)
    edges = [(rng.randrange(i), 100 + i) for i in range(1, n)]  # node i's parent among 0..i-1
    pool = hand_pool(edges)
    rates = {i: rng.choice([rng.random(), 1.0, 0.5]) for i in range(1, n)}  # ties and r = 1 included
    mass = [sum(rates[c] for c in pool.kids[i].values()) for i in range(n)]
    value = [1.0] * n
    for i in range(1, n):
        p = pool.parents[i]
        value[i] = value[p] * rates[i] * min(1.0, SIBLING_MASS / mass[p])
    sel = select_best_first(pool, rate_from(rates), n)
    assert sorted(sel.order) == list(range(n))
    for b in range(1, n + 1):
        prefix = sel.order[:b]
        assert all(pool.parents[i] in prefix[:k] for k, i in enumerate(prefix) if i)  # parents first
        best = max(sum(value[i] for i in s) for s in ancestor_closed_subsets(pool.parents, b))
        assert sum(sel.values[:b]) == pytest.approx(best)
        assert sel.expected_committed()[b - 1] == pytest.approx(best)


def test_rates_outside_the_unit_interval_are_rejected():
    with pytest.raises(ValueError, match="outside"):
        select_best_first(hand_pool(HAND_EDGES), lambda pool, node: 1.5, 4)
    with pytest.raises(ValueError, match="budget"):
        select_best_first(hand_pool(HAND_EDGES), rate_from(HAND_RATES), 0)


def test_lazy_children_join_the_pool_when_their_parent_is_opened():
    pool = hand_pool([(0, 11)])
    opened = []

    def expand(p, node):
        opened.append(node)
        p.add(node, 11 if node == 0 else 50 + node, ADJ, 4)  # under the anchor: the CTX token again

    sel = select_best_first(pool, lambda p, node: 0.5, 4, expand)
    assert pool.masks[1] == (1 << CTX) | (1 << ADJ) and pool.bins[1][ADJ] == 4  # merged, not duplicated
    assert sel.order == [0, 1, 2, 3] and opened == [0, 1, 2]  # the last node is never opened


def test_a_gain_ranks_a_node_ahead_without_changing_values():
    # HAND: best-first 0, 1, 4, 2, 7, ... ; a gain of .5 on node 3 (value .05) puts it right after node 1
    gains = {3: 0.5}
    sel = select_best_first(
        hand_pool(HAND_EDGES),
        rate_from(HAND_RATES),
        4,
        gain=lambda p, node: gains.get(node, 0.0),
        max_gain=0.5,
    )
    assert sel.order == [0, 1, 3, 4]
    assert sel.values == pytest.approx([1.0, 0.6, 0.05, 0.48])  # P(path accepted) still
    assert sel.gains == pytest.approx([0.0, 0.0, 0.5, 0.0])
    assert sel.expected_committed() == pytest.approx([1.0, 1.6, 2.15, 2.63])
    # the GPU-cost replay sizes recorded pools with the same sum (values and gains as recorded)
    assert expected_committed(sel.values, sel.gains) == sel.expected_committed()
    assert expected_committed([1.0, 0.5]) == pytest.approx([1.0, 1.5])
    with pytest.raises(ValueError, match="2 gains for 3 values"):
        expected_committed([1.0, 0.5, 0.2], [0.0, 0.1])


# ------------------------------------------------------------------ the size choice
def test_best_size_under_hand_set_latencies():
    expected = [1.0, 1.9, 2.6, 3.0, 3.2]
    # t(b) = 1 + 0.1 (b - 1): rates 1, 1.727, 2.167, 2.308, 2.286 -> b* = 4
    assert best_size(expected, lambda b: 1 + 0.1 * (b - 1)) == 4
    assert best_size(expected, lambda b: 1.0) == 5  # a flat curve: the whole pool
    assert best_size(expected, lambda b: float(b)) == 1  # every node costs a full step: AR
    assert best_size([1.0, 2.0], lambda b: float(b)) == 1  # a tie goes to the smaller tree
    assert best_size(expected, lambda b: float(b), min_size=3) == 3


def test_sequoia_profile_prefers_a_larger_tree_than_a_cpu_like_curve():
    expected = [1.0 + sum(0.8**d for d in range(1, b)) for b in range(1, 33)]
    sequoia = {1: 1.0, 8: 1.2, 16: 1.4, 32: 1.8}

    def gpu(b):
        xs = sorted(sequoia)
        for x0, x1 in zip(xs, xs[1:], strict=False):
            if b <= x1:
                return sequoia[x0] + (sequoia[x1] - sequoia[x0]) * (b - x0) / (x1 - x0)
        return sequoia[32]

    assert best_size(expected, gpu) > best_size(expected, lambda b: 1 + 0.25 * (b - 1))


# ------------------------------------------------------------------ sources, estimator, calibration
def test_occurrence_bins_are_shares_of_the_continuations():
    # 4 continuations in all: the primary (1, 2, 3) and three others
    bins = occurrence_bins([1, 2, 3], [[1, 2, 4], [1, 5], [6]])
    # (1,): 3 of 4 -> .75 (bin 3); (1,2): 2 of 3 -> bin 3; (1,2,4): 1 of 2 -> bin 2; (1,5): 1 of 3 -> bin 1
    assert bins == [[conf_bin(0.75), conf_bin(2 / 3), conf_bin(0.5)], [conf_bin(0.75), conf_bin(1 / 3)], [1]]


def test_estimator_learns_forgets_and_restores():
    prior = source_priors(0.3, 0.8, 0.9, 0.8, 0.5)
    est = AcceptanceEstimator(prior, prior_strength=2.0, decay=0.9)
    cell = AcceptanceEstimator.cell(1 << ADJ, 1, 0)
    other = AcceptanceEstimator.cell(1 << ADJ, 1, 4)
    before, other_before = est.table()[cell], est.table()[other]
    assert before < other_before  # the prior keeps the confidence order
    for _ in range(30):
        est.update([cell], [True], [True])
    learnt = est.table()[cell]
    assert learnt > 0.8 > 0.2 > before
    assert est.table()[other] > other_before  # the coarse level moves the unseen bin too
    saved = est.state()
    for _ in range(200):
        est.update([], [], [])
    assert est.table()[cell] == pytest.approx(before, abs=1e-6)  # forgotten: 0.9^200 of the counts left
    est.restore(saved)
    assert est.table()[cell] == pytest.approx(learnt)
    est.update([], [], [])
    aged = est.table().copy()
    est.restore(saved)
    est.update(
        [cell], [False], [True]
    )  # a node whose parent was rejected teaches nothing: the step only ages
    assert np.array_equal(est.table(), aged)
    est.restore(saved)
    est.update([cell], [True], [False])  # a reached node that was rejected does teach
    assert est.table()[cell] < aged[cell]
    with pytest.raises(ValueError, match="decay"):
        AcceptanceEstimator(prior, decay=0.0)


def test_estimator_rates_are_the_two_level_beta_smoothing_of_its_counts():
    # r per cell from the counts by the documented formula, cell by cell, after random updates
    prior = source_priors(0.3, 0.8, 0.9, 0.8, 0.5)
    est = AcceptanceEstimator(prior, prior_strength=2.0, decay=0.95, chain_gain=0.7)
    rng = random.Random(3)
    cells = list(range(est.reached.size))
    for _ in range(40):
        picked = [rng.choice(cells) for _ in range(30)]
        est.update(picked, [rng.random() < 0.8 for _ in picked], [rng.random() < 0.4 for _ in picked])
        table = est.table()
    s = est.strength
    for mask, depth, bin_ in itertools.product(range(16), range(1, 30, 3), range(5)):
        c = AcceptanceEstimator.cell(mask, depth, bin_)
        m, d = divmod(c // 5, 12)
        reach, acc = est.reached[m, d], est.accepted[m, d]
        coarse_prior = est.fine_prior[m, d].mean()
        coarse = (acc.sum() + s * coarse_prior) / (reach.sum() + s)
        anchor = min(1.0, max(1e-4, coarse * est.fine_prior[m, d, bin_] / coarse_prior))
        assert table[c] == pytest.approx((acc[bin_] + s * anchor) / (reach[bin_] + s), rel=1e-12)
        assert 0.0 <= table[c] <= 1.0


def test_row_value_starts_at_its_prior_learns_and_forgets():
    rv = RowValue(prior=0.1, prior_rows=20.0, decay=1.0)
    assert rv.gain() == pytest.approx(0.1)
    rv.update(rows=20, credit=6)  # (6 + 2) / (20 + 20)
    assert rv.gain() == pytest.approx(0.2)
    forgetting = RowValue(0.1, 20.0, decay=0.5)
    forgetting.update(rows=20, credit=6)
    forgetting.update(rows=0, credit=0)  # (3 + 2) / (10 + 20)
    assert forgetting.gain() == pytest.approx(5 / 30)
    again = RowValue(0.1, 20.0)
    again.restore(rv.state())
    assert again.gain() == pytest.approx(0.2)
    with pytest.raises(ValueError, match="prior_rows"):
        RowValue(0.1, 0.0)


def test_calibration_bins():
    cal = Calibration()
    for p, ok in [(0.05, False), (0.95, True), (0.99, False), (1.0, True), (0.5, True)]:
        cal.add(p, ok)
    stats = cal.as_stats()
    assert stats["hw_calib_nodes"] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 3]
    assert stats["hw_calib_accepted"] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert stats["hw_calib_predicted"][9] == pytest.approx(2.94)
    assert len(stats["hw_calib_nodes"]) == CALIBRATION_BINS


# ------------------------------------------------------------------ the drafter on a fake verification
def fake_begin(drafter: HwTreeDrafter, prompt: list[int], vocab: int = 64):
    import torch

    drafter.begin(prompt, torch.zeros(len(prompt), vocab))


def outcome_for(tree, accepted_nodes, vocab: int = 64):
    import torch

    from goose.engine.core.drafter import VerifyOutcome

    new = [tree.tokens[i] for i in accepted_nodes[1:]] + [1]  # the accepted path and a bonus token 1
    return VerifyOutcome(torch.zeros(len(tree), vocab), [0] * len(tree), accepted_nodes, new)


def test_the_prompt_logits_are_harvested_only_on_request():
    # off by default: the engine then computes the prefill's last logits only; on, every prompt position
    assert HwTreeDrafter().cfg.prefill_harvest is False
    assert not HwTreeDrafter().needs_prefill_logits
    assert HwTreeDrafter(prefill_harvest=True).needs_prefill_logits


def test_drafter_merges_the_context_chain_its_alternatives_and_the_suffix_tree():
    d = HwTreeDrafter(adj_width=0, prefill_harvest=False)
    prompt = [1, 2, 3, 4, 9, 1, 2, 3, 5, 7, 1, 2, 3]
    fake_begin(d, prompt)
    tree = d.propose(prompt)
    tree.validate()
    pool = d.last_pool
    # the earliest occurrence of (1, 2, 3) continues with 4 (CTX), the later one with 5 (ALT); the suffix
    # tree proposes both continuations by frequency (SUF)
    first = {pool.tokens[c]: c for c in pool.kids[0].values()}
    assert set(first) == {4, 5}
    assert pool.masks[first[4]] & (1 << CTX) and pool.masks[first[5]] & (1 << ALT)
    assert pool.masks[first[4]] & (1 << SUF) and pool.masks[first[5]] & (1 << SUF)
    assert tree.sources[0] == ROOT and set(tree.sources[1:]) == {SPINE}
    assert len(tree) == len(d.last_selection)  # no latency: the whole selection up to B


def test_drafter_sizes_its_own_tree_with_the_latency():
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3]
    flat, steep = HwTreeDrafter(prefill_harvest=False), HwTreeDrafter(prefill_harvest=False)
    flat.use_latency(lambda n: 1.0)
    steep.use_latency(lambda n: float(n))
    fake_begin(flat, prompt)
    fake_begin(steep, prompt)
    assert len(flat.propose(prompt)) == len(flat.last_selection) > 2
    assert len(steep.propose(prompt)) == 1 and steep.route == "ar"
    assert steep.stats["hw_pool_nodes"] > 1


def test_drafter_learns_in_hindsight_past_the_verified_cut_and_counts_calibration():
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3]
    d = HwTreeDrafter(prefill_harvest=False, adj_width=0, suffix=False, alt_matches=0)
    fake_begin(d, prompt)
    tree = d.propose(prompt)
    first_pool = d.last_pool
    assert tree.tokens[:4] == [3, 4, 5, 6] and max(tree.depths) > 3
    cut = tree.truncate_depth(3)  # verified: the chain's first 3 tokens
    assert cut.tokens == [3, 4, 5, 6]
    outcome = outcome_for(cut, [0, 1, 2, 3])
    outcome.new_tokens[-1] = 7  # the bonus token: the chain's 4th token, drafted but not verified
    d.observe(cut, outcome)
    d.end()  # the prompt's counts reach its stats when it ends
    assert sum(d.stats["hw_calib_nodes"]) == 3 and sum(d.stats["hw_calib_accepted"]) == 3  # verified only
    assert d.stats["hw_verified_nodes"] == 4 and d.stats["hw_src_accepted"][CTX] == 3
    # hindsight: depths 1-4 are labelled accepted, depth 4 included although the engine never verified it
    by_depth = d.estimator.accepted[1 << CTX].sum(axis=1)
    assert list(by_depth[1:6]) == pytest.approx([1.0, 1.0, 1.0, 1.0, 0.0])
    assert d.estimator.reached[1 << CTX].sum() == pytest.approx(4.0)
    # the pool stays pending: the next committed token (not 8) labels depth 5 as a miss, then it leaves
    assert [entry[0] for entry in d._pending] == [first_pool]
    committed = [*prompt, 4, 5, 6, 7]
    nxt = d.propose(committed)
    outcome = outcome_for(nxt, [0])
    outcome.new_tokens[-1] = 63
    d.observe(nxt, outcome)
    assert d.estimator.reached[1 << CTX, 5].sum() == pytest.approx(1.0)
    assert d.estimator.accepted[1 << CTX, 5].sum() == pytest.approx(0.0)
    assert d._pending == []  # both pools fell off the committed tokens (63, not 8)


def test_a_tree_the_drafter_did_not_propose_is_not_calibrated():
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3]
    d = HwTreeDrafter(prefill_harvest=False, adj_width=0)
    fake_begin(d, prompt)
    other = d.propose(prompt)
    other.tokens[1] = 63
    d.observe(other, outcome_for(other, [0]))
    d.end()
    assert sum(d.stats["hw_calib_nodes"]) == 0


def test_chain_sources_prior_rises_with_depth_and_adjacency_does_not():
    prior = source_priors(0.3, 0.8, 0.9, 0.8, 0.5)
    flat = AcceptanceEstimator(prior, chain_gain=1.0).fine_prior
    rising = AcceptanceEstimator(prior, chain_gain=0.5).fine_prior
    ctx, adj = 1 << CTX, 1 << ADJ
    assert flat[ctx, 1, 0] == pytest.approx(0.3) and flat[ctx, 4, 0] == pytest.approx(0.3)
    # r_d = 1 − (1 − r_1)·gain^(d−1): 0.3, 0.65, 0.825 at depths 1-3
    assert list(rising[ctx, 1:4, 0]) == pytest.approx([0.3, 0.65, 0.825])
    assert list(rising[adj, 1:4, 2]) == pytest.approx([prior[ADJ, 2]] * 3)
    with pytest.raises(ValueError, match="chain_gain"):
        AcceptanceEstimator(prior, chain_gain=0.0)


def test_rows_only_rejected_nodes_write_are_explored_and_credited_when_their_successors_are_accepted():
    import torch

    from goose.engine.core.drafter import VerifyOutcome
    from goose.engine.core.tree import DraftTree

    d = HwTreeDrafter(prefill_harvest=False, suffix=False, alt_matches=0, row_prior=0.25)
    prompt = [1, 2, 3]
    fake_begin(d, prompt)
    d.propose(prompt)  # no row, no match: the anchor alone
    # a verified tree 3 -> {40, 41}: 40 accepted, 41 rejected; 41's logits predict 50 after it
    tree = DraftTree([3, 40, 41], [-1, 0, 0], [ROOT, BRANCH, BRANCH])
    logits = torch.full((3, 64), -10.0)
    logits[0, 40] = logits[1, 41] = logits[2, 50] = 10.0
    d.last_selection = None  # a tree the drafter did not propose: learnt from, never credited
    d.observe(tree, VerifyOutcome(logits, [40, 41, 50], [0, 1], [40, 41]))
    assert d._explored == {41}  # 3 and 40 were accepted: their rows would exist anyway
    assert d.stats["hw_rows_explored"] == 1 and d.stats["hw_rows_credit"] == 0
    # the anchor is now 41 (the bonus token): its explored row offers 50, and 50 is ranked with the row gain
    committed = [*prompt, 40, 41]
    step = d.propose(committed)
    fifty = step.tokens.index(50)
    assert step.parents[fifty] == 0 and step.sources[fifty] == BRANCH
    place = d.last_selection.order.index(d.last_pool.kids[0][50])
    gain = d.row_value_model.gain()
    assert d.last_selection.gains[place] == pytest.approx(gain) and gain == pytest.approx(0.25 * 20 / 21)
    logits = torch.zeros(len(step), 64)
    d.observe(step, VerifyOutcome(logits, [0] * len(step), [0, fifty], [50, 7]))
    assert d.stats["hw_rows_credit"] == 1  # 50 came from a row only exploration wrote, and was accepted
    assert 41 not in d._explored and 50 not in d._explored


def test_a_token_new_to_the_prompt_takes_the_row_an_earlier_prompt_wrote():
    """run_table: prompt 1 verifies token 41, whose logits predict 50; in prompt 2, where 41 has no row and
    no earlier occurrence, the anchor 41 still drafts 50 (source RUN) instead of stalling on itself."""
    import torch

    from goose.engine.core.drafter import VerifyOutcome
    from goose.engine.core.tree import DraftTree

    def first_prompt(d: HwTreeDrafter) -> None:
        fake_begin(d, [1, 2, 3])
        d.propose([1, 2, 3])
        tree = DraftTree([3, 41], [-1, 0], [ROOT, BRANCH])
        logits = torch.full((2, 64), -10.0)
        logits[0, 41] = logits[1, 50] = 10.0
        d.observe(tree, VerifyOutcome(logits, [41, 50], [0, 1], [41, 50]))
        d.end()

    second = [7, 8, 9, 41]
    with_run, without = HwTreeDrafter(suffix=False), HwTreeDrafter(suffix=False, run_table=False)
    for d in (with_run, without):
        first_prompt(d)
        fake_begin(d, second)
        assert not d.table.has_row(41)  # this prompt's table starts empty
    tree = with_run.propose(second)
    assert tree.tokens[:2] == [41, 50] and tree.sources[1] == BRANCH
    assert with_run.last_pool.masks[with_run.last_pool.kids[0][50]] == 1 << RUN
    assert len(without.propose(second)) == 1 and without.route == "ar"
    # the run's rows are run state: a restored drafter drafts the same tree
    restored = HwTreeDrafter(suffix=False)
    restored.restore_run_state(with_run.run_state())
    fake_begin(restored, second)
    assert restored.propose(second).tokens == tree.tokens


def test_without_row_value_no_node_gains():
    d = HwTreeDrafter(prefill_harvest=False, row_value=False)
    prompt = [1, 2, 3, 4, 1, 2, 3]
    fake_begin(d, prompt)
    d.propose(prompt)
    assert set(d.last_selection.gains) == {0.0}


def test_learnt_rates_are_run_state_and_restore_the_same_trees():
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 9, 5, 6]
    a = HwTreeDrafter(prefill_harvest=False)
    fake_begin(a, prompt)
    t = a.propose(prompt)
    a.observe(t, outcome_for(t, [0, 1]))
    a.row_value_model.update(rows=3, credit=2)
    state = a.run_state()
    assert set(state) == {"rates", "rows", "run_table"} and state["rows"]["credit"] == pytest.approx(2.0)
    gain = a.row_value_model.gain()
    a = HwTreeDrafter(prefill_harvest=False)
    a.restore_run_state(state)
    assert a.row_value_model.gain() == pytest.approx(gain) != pytest.approx(HwTreeDrafter().row_prior)
    b = HwTreeDrafter(prefill_harvest=False)
    b.restore_run_state(state)
    fake_begin(a, prompt)
    fake_begin(b, prompt)
    assert a.propose(prompt).tokens == b.propose(prompt).tokens


# ------------------------------------------------------------------ config and validation
def test_method_config_instantiates_through_hydra():
    from hydra.utils import instantiate

    from goose.harness.compose import compose_config

    cfg = method_config("hw_tree")
    assert cfg.name == "hw_tree"
    drafter = instantiate(cfg.drafter, _convert_="all")
    assert isinstance(drafter, HwTreeDrafter) and drafter.config() == HwTreeDrafter().config()
    assert drafter.config()["ngram_lengths"] == [5, 4, 3, 2, 1]
    compose_config(["method=hw_tree", "method.drafter.adj_width=2"])  # validated like a run.py job
    ablation = method_config("hw_tree_no_row_value")  # the ablation changes row_value and nothing else
    assert ablation.name == "hw_tree_no_row_value"
    assert instantiate(ablation.drafter, _convert_="all").config() == {**drafter.config(), "row_value": False}


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("budget", 1, ">= 2"),
        ("max_depth", 0, ">= 1"),
        ("ngram_lengths", [3, 4], "longest first"),
        ("alt_matches", -1, ">= 0"),
        ("alt_chain", 0, ">= 1"),
        ("suffix", 1, "true or false"),
        ("suffix_max_depth", 1, ">= 2"),
        ("suffix_min_token_prob", 1.5, "in [0.0, 1.0]"),
        ("adj_width", -2, ">= 0"),
        ("prior_strength", 0.0, "> 0"),
        ("decay", 1.5, "in [0.0, 1.0]"),
        ("decay", 0, "in (0, 1]"),
        ("ctx_prior", -0.1, "in [0.0, 1.0]"),
        ("adj_prior", 2, "in [0.0, 1.0]"),
        ("chain_gain", 0, "in (0, 1]"),
        ("chain_gain", 1.5, "in [0.0, 1.0]"),
        ("extend_chain", "yes", "true or false"),
        ("row_value", "on", "true or false"),
        ("row_prior", -0.5, "in [0.0, 4.0]"),
        ("row_prior_rows", 0, "> 0"),
    ],
)
def test_bad_hyperparameters_name_field_value_and_range(field, value, allowed):
    with pytest.raises(ValueError) as err:
        HwTreeDrafter(**{field: value})
    assert f"HwTreeDrafter.{field} = {value!r}" in str(err.value) and allowed in str(err.value)


def test_bad_hyperparameters_are_rejected_when_the_config_is_composed():
    from goose.harness.compose import UserError, compose_config

    with pytest.raises(UserError, match=r"HwTreeDrafter.adj_width = -1: must be an integer >= 0"):
        compose_config(["method=hw_tree", "method.drafter.adj_width=-1"])


# ------------------------------------------------------------------ end to end on tiny models
@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3"])
def test_generation_is_identical_to_ar_on_tiny_models(arch):
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model(arch, seed=3)
    drafter = HwTreeDrafter()
    prompts = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 10, 11, 9, 10, 11, 9, 10]]
    for prompt in prompts:  # the learnt rates carry over to the second prompt
        ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
        gen = generate(verification_engine(model, eos_token_ids=()), drafter, prompt, max_new_tokens=40)
        assert gen.output_ids == ref.output_ids
        assert sum(v for r, v in gen.routes().items() if r != "ar") > 0
        assert gen.drafter_stats["hw_verified_nodes"] == sum(s.tree_size for s in gen.steps)
    assert drafter.estimator.reached.sum() > 0


def test_generation_under_budget_auto_is_identical_to_ar_and_sized_not_cut():
    from goose.engine.budget.auto_budget import AutoBudget
    from goose.engine.budget.cost_model import LatencyTable
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.core.sampling import SamplingParams
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("qwen3", seed=4)
    engine = verification_engine(model, eos_token_ids=())
    prompt = [3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 3, 4, 5]
    table = LatencyTable(sizes=[1, 8, 64], seconds=[1.0, 1.3, 4.0])
    for sampling in (None, SamplingParams(0.7)):
        ref = generate(engine, ARDrafter(), prompt, 32, sampling=sampling, seed=1).output_ids
        inner = HwTreeDrafter()
        got = generate(engine, inner, prompt, 32, sampling=sampling, seed=1, sizer=AutoBudget(table))
        assert got.output_ids == ref
        stats = got.drafter_stats
        assert inner._latency is not None  # budget=auto handed its latency over
        assert stats["auto_nodes_verified"] == stats["auto_nodes_proposed"]  # sized, never cut
        assert stats["hw_verified_nodes"] < stats["hw_pool_nodes"]  # the latency kept it small


def test_branch_label_for_adjacency_only_nodes():
    d = HwTreeDrafter(prefill_harvest=True, suffix=False, alt_matches=0)
    import torch

    prompt = [1, 2, 3]
    logits = torch.full((3, 64), -10.0)
    logits[2, 40] = 10.0  # after token 3 the target predicted 40
    d.begin(prompt, logits)
    tree = d.propose(prompt)
    assert tree.tokens[:2] == [3, 40] and tree.sources[1] == BRANCH


def test_stopping_early_bounds_by_the_cheapest_larger_size():
    # one likely child, four unlikely ones; 2 and 3 nodes cost 2.5, 4 to 6 cost 0.9 (a CPU's tiles of rows):
    # bounding the larger trees by t(3) alone would stop at 2 nodes, and 5 nodes pay best
    edges = [(0, 10 + i) for i in range(1, 6)]
    rates = {1: 0.9, 2: 0.02, 3: 0.02, 4: 0.02, 5: 0.02}
    t = {1: 1.0, 2: 2.5, 3: 2.5, 4: 0.9, 5: 0.9, 6: 0.9}.__getitem__
    sel = select_best_first(hand_pool(edges), rate_from(rates), 6, latency=t)
    assert len(sel) == 6 and best_size(sel.expected_committed(), t) == 6


def test_stopping_early_checks_every_larger_size_not_the_budget_at_its_cheapest():
    # 39 unlikely candidates under the anchor over an affine curve (each node 4 % of a step): every further
    # node adds at most 0.02 and the m-th larger size costs 4·m % more, so no larger tree pays and the
    # selection stops after the first candidate; bounding the 58 nodes left at 0.02 each by the cheapest
    # larger size, t(3), would open them all
    edges = [(0, 10 + i) for i in range(1, 40)]
    rates = dict.fromkeys(range(1, 40), 0.02)
    opened = []

    def expand(pool, node):
        opened.append(node)

    def t(b):
        return 1.0 + 0.04 * (b - 1)

    sel = select_best_first(hand_pool(edges), rate_from(rates), 60, expand, latency=t)
    assert best_size(sel.expected_committed(), t) == 1
    assert len(sel) == 2 and len(opened) == 2


@pytest.mark.parametrize("seed", range(20))
def test_stopping_early_under_a_latency_picks_the_same_size(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    edges = [(rng.randrange(i), 100 + i) for i in range(1, n)]
    rates = {i: rng.choice([rng.random(), rng.uniform(0.7, 1.0), 1.0]) for i in range(1, n)}
    slope, bump = rng.uniform(0.0, 0.4), rng.choice([0.0, 0.5])
    # not non-decreasing, as CPUs measure it: dear 2- and 3-node steps, cheaper 4 to 6 (kernel tiles of rows)
    peak, dip = rng.choice([(0.0, 0.0), (1.5, 0.5)])

    def t(b):
        return (
            1.0
            + slope * (b - 1)
            + (bump if b > 8 else 0.0)
            + (peak if b in (2, 3) else 0.0)
            - (dip if 4 <= b <= 6 else 0.0)
        )

    budget = rng.randint(2, n + 3)
    full = select_best_first(hand_pool(edges), rate_from(rates), budget)
    short = select_best_first(hand_pool(edges), rate_from(rates), budget, latency=t)
    assert short.order == full.order[: len(short)]
    assert best_size(short.expected_committed(), t) == best_size(full.expected_committed(), t)
    # with gains on some nodes (a child may now rank above its parent's value) the bound still holds
    g = {i: rng.choice([0.0, 0.0, rng.uniform(0.0, 0.3)]) for i in range(1, n)}
    top = max(g.values(), default=0.0)

    def gain(pool, node):
        return g[node]

    full = select_best_first(hand_pool(edges), rate_from(rates), budget, gain=gain, max_gain=top)
    short = select_best_first(hand_pool(edges), rate_from(rates), budget, None, t, gain, top)
    assert short.order == full.order[: len(short)]
    assert best_size(short.expected_committed(), t) == best_size(full.expected_committed(), t)
    # and with values weighed by a request's calibration c (baselines.hw_tree.request_scale)
    c = rng.choice([0.25, 0.6, 1.7, 4.0])
    full = select_best_first(hand_pool(edges), rate_from(rates), budget, gain=gain, max_gain=top, scale=c)
    short = select_best_first(hand_pool(edges), rate_from(rates), budget, None, t, gain, top, c)
    assert short.order == full.order[: len(short)] and short.scale == c
    assert best_size(short.expected_committed(), t) == best_size(full.expected_committed(), t)


# ------------------------------------------------------------------ the size rule against its outcomes
def test_prefix_accepts_the_leading_nodes_of_the_accepted_path_below_k():
    # a tree in best-first order whose accepted path is 0 -> 2 -> 5 -> 9
    assert prefix_accepted([0, 2, 5, 9], 10) == 3
    assert prefix_accepted([0, 2, 5, 9], 6) == 2  # node 9 is past the first 6 nodes
    assert prefix_accepted([0, 2, 5, 9], 3) == 1
    assert prefix_accepted([0, 2, 5, 9], 1) == 0 and prefix_accepted([0], 5) == 0


def test_size_outcomes_bucket_each_step_with_its_first_half_and_curve_cost():
    sizes = SizeOutcomes()
    sizes.add([1.0], [0.0], [0], lambda n: 0.010)  # an AR step
    # 6 nodes (anchor first), predicted 0.9 + 0.5 + 0.4 + 0.2 + 0.1, row gains on two; accepted 0 -> 1 -> 4
    values = [1.0, 0.9, 0.5, 0.4, 0.2, 0.1]
    sizes.add(values, [0.0, 0.0, 0.0, 0.1, 0.0, 0.1], [0, 1, 4], lambda n: 0.010 + 0.001 * n)
    stats = sizes.as_stats()
    assert stats["hw_size_buckets"] == list(SIZE_BUCKETS)
    one, six = size_bucket(1), size_bucket(6)
    assert one != six and size_bucket(10**6) == len(SIZE_BUCKETS) - 1
    assert stats["hw_size_steps"][one] == 1 and stats["hw_size_steps"][six] == 1
    assert stats["hw_size_predicted"][six] == pytest.approx(2.1)
    assert stats["hw_size_gains"][six] == pytest.approx(0.2)
    assert stats["hw_size_accepted"][six] == 2
    assert stats["hw_size_half_nodes"][six] == 3  # ⌈6/2⌉, the anchor included
    assert stats["hw_size_half_predicted"][six] == pytest.approx(1.4)
    assert stats["hw_size_half_accepted"][six] == 1  # node 4 lies past the first 3
    assert stats["hw_size_cost"][six] == pytest.approx(0.016)
    assert stats["hw_size_half_cost"][six] == pytest.approx(0.013)
    assert stats["hw_size_cost"][one] == pytest.approx(0.010)


def test_drafter_counts_its_size_outcomes_greedy_only():
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3]
    d = HwTreeDrafter(prefill_harvest=False, adj_width=0, suffix=False, alt_matches=0)
    d.use_latency(lambda n: 1.0)
    fake_begin(d, prompt)
    tree = d.propose(prompt)
    d.observe(tree, outcome_for(tree, [0, 1, 2]))
    d.end()
    i = size_bucket(len(tree))
    assert d.stats["hw_size_steps"][i] == 1 and d.stats["hw_size_accepted"][i] == 2
    assert d.stats["hw_size_nodes"][i] == len(tree) and d.stats["hw_size_cost"][i] == pytest.approx(1.0)
    assert d.stats["hw_size_predicted"][i] == pytest.approx(sum(d.last_selection.values[1 : len(tree)]))
    sampled = HwTreeDrafter(prefill_harvest=False, adj_width=0, suffix=False, alt_matches=0)
    sampled.set_sampling(SamplingParams(temperature=0.7), 0)
    fake_begin(sampled, prompt)
    tree = sampled.propose(prompt)
    sampled.observe(tree, outcome_for(tree, [0, 1]))
    sampled.end()
    assert sum(sampled.stats["hw_size_steps"]) == 0  # a smaller prefix's walk is not read off a sample


@pytest.mark.parametrize("decay, calibrated", [(1.0, False), (0.9, False), (0.99, True)])
def test_estimator_rate_is_the_table_cell_by_cell(decay, calibrated):
    """`rate(cell)`, computed on demand for the cells a tree reads, is `table()[cell]` to the bit, before and
    after updates (with forgetting) and a restore, with the hand prior and a shipped calibrated one; a memo
    that outlived an update would fail."""
    prior = source_priors(0.3, 0.8, 0.9, 0.8, 0.5)
    table = load_prior("smollm2-135m", "hw_tree", "hw_tree") if calibrated else None
    assert table is not None or not calibrated
    est = AcceptanceEstimator(prior, prior_strength=2.0, decay=decay, chain_gain=0.7, calibrated=table)
    n = len(est.table())
    rng = random.Random(3)
    assert [est.rate(c) for c in range(n)] == est.table()
    for _ in range(40):
        cells = [rng.randrange(n) for _ in range(25)]
        reached = [rng.random() < 0.8 for _ in cells]
        est.update(cells, reached, [r and rng.random() < 0.4 for r in reached])
        probe = rng.sample(range(n), 50)
        assert [est.rate(c) for c in probe] == [est.table()[c] for c in probe]
    saved = est.state()
    est.update(list(range(0, n, 7)), [True] * len(range(0, n, 7)), [True] * len(range(0, n, 7)))
    moved = est.rate(0)
    est.restore(saved)
    assert est.rate(0) != moved and [est.rate(c) for c in range(n)] == est.table()


def test_node_cell_is_the_estimators_cell_of_the_lead_bin():
    """The key the drafter rates and labels a pool node by is the estimator's cell of its mask, depth and lead
    bin, for every combination of sources (each with its own bin or none) and depths past the last bucket; a
    key read from another node's fields or another source's bin would fail."""
    rng = random.Random(5)
    pool = CandidatePool.rooted(0)
    parent = 0
    for depth in range(1, 41):
        parent = pool.add(parent, depth, CTX, rng.randrange(5))
    nodes = list(range(1, len(pool)))
    checked = 0
    for node in nodes:
        for mask in range(1, 32):
            pool.masks[node] = mask
            pool.bins[node] = [rng.randrange(5) if mask >> s & 1 else -1 for s in range(5)]
            assert node_cell(pool, node) == AcceptanceEstimator.cell(
                mask, pool.depths[node], pool.lead_bin(node)
            )
            checked += 1
    pool.bins[1] = [-1] * 5  # no source's bin: bin 0
    assert node_cell(pool, 1) == AcceptanceEstimator.cell(pool.masks[1], 1, 0)
    assert checked == 40 * 31


def _token_paths(pool: CandidatePool, order: list[int]) -> list[tuple[int, ...]]:
    out = []
    for node in order:
        path = []
        while node > 0:
            path.append(pool.tokens[node])
            node = pool.parents[node]
        out.append(tuple(reversed(path)))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_lazy_paths_select_and_label_what_eager_paths_do(seed):
    """Chains added lazily (`add_path(..., lazy=True)`: one node now, the rest as the selection opens them)
    give the selection the same nodes, masks, bins and values, in the same order, as chains added whole,
    with a tree source and an expansion mixed in; a node reached later has the same children either way. A
    lazy pool that left out a tail's next node, or lost another source's bit on a shared node, would fail."""
    rng = random.Random(seed)
    paths = []
    for _ in range(rng.randint(1, 6)):
        base = rng.choice([[], [1], [1, 2], [3]])
        tail = [rng.randrange(1, 6) for _ in range(rng.randint(1, 12))]
        paths.append(((base + tail)[:14], rng.choice([CTX, ALT]), rng.randrange(5)))
    suffix = [(rng.randrange(1, 6), -1)]
    for i in range(1, rng.randint(1, 8)):
        suffix.append((rng.randrange(1, 6), rng.randrange(-1, i)))
    rates = {}

    def rate(pool: CandidatePool, node: int) -> float:
        key = (pool.masks[node], pool.depths[node], pool.lead_bin(node))
        return rates.setdefault(key, rng.random())

    def expand(pool: CandidatePool, node: int) -> None:
        if pool.depths[node] < 3:
            pool.add(node, 7 + pool.depths[node], ADJ, 2)

    def build(lazy: bool) -> CandidatePool:
        pool = CandidatePool.rooted(0)
        for tokens, source, b in paths:
            pool.add_path(0, tokens, source, [b] * len(tokens), lazy=lazy)
        pool.add_tree([t for t, _ in suffix], [p for _, p in suffix], SUF, [3] * len(suffix))
        return pool

    eager, lazy = build(False), build(True)
    sels = [select_best_first(p, rate, 40, expand) for p in (eager, lazy)]
    assert _token_paths(eager, sels[0].order) == _token_paths(lazy, sels[1].order)
    assert sels[0].values == sels[1].values and sels[0].parents == sels[1].parents
    for a, b in zip(sels[0].order, sels[1].order, strict=True):
        assert (eager.masks[a], eager.bins[a]) == (lazy.masks[b], lazy.bins[b])
        assert sorted(eager.children(a)) == sorted(lazy.children(b))


def test_a_lazy_chain_costs_only_what_the_selection_reaches():
    pool = CandidatePool.rooted(0)
    pool.add_path(0, list(range(1, 31)), CTX, [4] * 30, lazy=True)
    assert len(pool) == 2  # the anchor and the chain's first node
    select_best_first(pool, lambda p, n: 0.9, 5)
    assert len(pool) == 5  # the anchor and the 4 nodes selected: the last is never opened
