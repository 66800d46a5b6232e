"""Calibrated acceptance priors in the drafters that value nodes by their own estimates: hw_tree's two-level
estimator (baselines/hw_tree/acceptance.py) and OPT-Tree (baselines/opt_tree.py): what a prior does to their
rates before and after evidence, and what their configs record."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from baselines.hw_tree.acceptance import AcceptanceEstimator, source_priors
from baselines.hw_tree.drafter import HwTreeDrafter
from baselines.hw_tree.pool import ADJ, CONF_BINS, CTX, SUF
from baselines.opt_tree import OptTreeDrafter
from goose.engine.core.acceptance import AcceptanceModel
from goose.engine.core.acceptance_prior import (
    HAND,
    POOLED,
    PROVENANCE_FIELDS,
    PriorTable,
    calibrate,
    prior_document,
    table_document,
    write_prior,
)
from goose.engine.core.tree import BRANCH, SPINE

PRIOR = source_priors(0.3, 0.8, 0.9, 0.8, 0.5)
CAP = 20.0


def hw_counts() -> tuple[np.ndarray, np.ndarray]:
    """Calibration counts in two cells of one coarse cell (ADJ-only, depth 1) and one of another."""
    reached, accepted = np.zeros(AcceptanceEstimator.SHAPE), np.zeros(AcceptanceEstimator.SHAPE)
    for (mask, depth, bin_), (r, a) in {
        (1 << ADJ, 1, 0): (40, 30),
        (1 << ADJ, 1, 4): (10, 2),
        (1 << CTX, 2, 3): (3, 3),
    }.items():
        reached[mask, depth, bin_], accepted[mask, depth, bin_] = r, a
    return reached, accepted


def hw_table(strength: float = 2.0) -> PriorTable:
    hand = AcceptanceEstimator(PRIOR, strength, chain_gain=0.7)
    reached, accepted = hw_counts()
    mean, s = calibrate(reached, accepted, *hand.cell_prior(), cap=CAP)
    return PriorTable("toy", "hw_tree", mean, s, reached, accepted, CAP)


def test_hw_estimator_starts_at_the_calibrated_means_and_keeps_the_hand_ordering_elsewhere():
    hand = AcceptanceEstimator(PRIOR, 2.0, chain_gain=0.7)
    est = AcceptanceEstimator(PRIOR, 2.0, chain_gain=0.7, calibrated=hw_table())
    assert (hand.prior_name, est.prior_name) == (HAND, "toy")
    table, hand_table = est.table(), hand.table()
    cal = hw_table()
    adj = 1 << ADJ
    for bin_ in (0, 4):  # calibrated cells: their calibrated means
        assert table[est.cell(adj, 1, bin_)] == pytest.approx(cal.mean[adj, 1, bin_], rel=1e-12)
    # an uncalibrated bin of a calibrated coarse cell: the calibrated coarse mean times the hand ratio
    reach_c, acc_c = cal.reached[adj, 1].sum(), cal.accepted[adj, 1].sum()
    coarse = (acc_c + 2.0 * hand.coarse_prior[adj, 1]) / (reach_c + 2.0)
    ratio = hand.fine_prior[adj, 1, 2] / hand.coarse_prior[adj, 1]
    assert table[est.cell(adj, 1, 2)] == pytest.approx(coarse * ratio, rel=1e-12)
    # a cell of an uncalibrated coarse cell: the hand rate
    for mask, depth, bin_ in itertools.product((1 << SUF, adj | 1 << CTX), (1, 3), range(CONF_BINS)):
        c = est.cell(mask, depth, bin_)
        assert table[c] == hand_table[c]


def test_hw_estimator_shrinks_evidence_toward_the_calibrated_prior_with_its_strength():
    est = AcceptanceEstimator(PRIOR, 2.0, decay=1.0, chain_gain=0.7, calibrated=hw_table())
    cal = hw_table()
    adj = 1 << ADJ
    cell = est.cell(adj, 1, 0)
    for hit in (False, False, True):
        est.update([cell], [True], [hit])
    s_c = min(50 + 2.0, CAP)  # the coarse cell's calibration: 50 reached, capped
    coarse_mean = (32 + 2.0 * AcceptanceEstimator(PRIOR, 2.0, chain_gain=0.7).coarse_prior[adj, 1]) / 52
    coarse = (1 + s_c * coarse_mean) / (3 + s_c)
    anchor = coarse * cal.mean[adj, 1, 0] / coarse_mean
    s_f = cal.strength[adj, 1, 0]
    assert s_f == CAP
    assert est.table()[cell] == pytest.approx((1 + s_f * anchor) / (3 + s_f), rel=1e-12)


def test_hw_estimator_without_a_prior_is_the_hand_estimator():
    est = AcceptanceEstimator(PRIOR, 2.0, chain_gain=0.7)
    assert est.fine_strength == est.coarse_strength == 2.0
    assert np.array_equal(est.ratio_base[..., 0], est.coarse_prior)


def prior_file(tmp_path):
    """A prior file with an OPT-Tree and an hw_tree table."""
    hand = AcceptanceModel()
    reached, accepted = np.zeros(AcceptanceModel.SHAPE), np.zeros(AcceptanceModel.SHAPE)
    reached[SPINE, 1, 0], accepted[SPINE, 1, 0] = 30, 27
    reached[BRANCH, 1, 1], accepted[BRANCH, 1, 1] = 30, 3
    opt = table_document(
        ("source", "depth", "rank"), {}, {POOLED: (reached, accepted)}, *hand.cell_prior(), CAP
    )
    hw_hand = AcceptanceEstimator(
        source_priors(0.3, 0.8, 0.9, 0.8, 0.5), 2.0, chain_gain=0.7
    )  # HwTreeConfig's defaults
    hw = table_document(
        ("mask", "depth_bucket", "conf_bin"), {}, {POOLED: hw_counts()}, *hw_hand.cell_prior(), CAP
    )
    doc = prior_document(
        "toy-1m-bf16", "toy-1m", CAP, {k: "x" for k in PROVENANCE_FIELDS}, {"opt_tree": opt, "hw_tree": hw}
    )
    return write_prior(tmp_path / "toy.json", doc)


def test_opt_tree_starts_from_a_calibrated_prior_and_records_it(tmp_path):
    path = str(prior_file(tmp_path))
    hand, cal = OptTreeDrafter(), OptTreeDrafter(acceptance_prior=path)
    assert "acceptance_prior" not in hand.config()  # the default: earlier rows' config hashes unchanged
    assert cal.config()["acceptance_prior"] == "toy-1m-bf16"
    assert hand.rate(SPINE, 1, 0) == pytest.approx(0.6)
    assert cal.rate(SPINE, 1, 0) == pytest.approx(round((27 + 1.2) / 32, 5))
    assert cal.rate(BRANCH, 1, 1) == pytest.approx(round((3 + 2 * 0.175) / 32, 5))
    assert cal.rate(SPINE, 3, 0) == hand.rate(SPINE, 3, 0)  # not calibrated: the hand prior
    unknown = OptTreeDrafter(acceptance_prior="nobody-7b")
    assert unknown.config()["acceptance_prior"] == HAND and unknown.rate(SPINE, 1, 0) == pytest.approx(0.6)


def test_hw_tree_starts_from_a_calibrated_prior_and_records_it(tmp_path):
    path = str(prior_file(tmp_path))
    hand, cal = HwTreeDrafter(), HwTreeDrafter(acceptance_prior=path)
    assert "acceptance_prior" not in hand.config()
    assert cal.config()["acceptance_prior"] == "toy-1m-bf16" and cal.estimator.prior_name == "toy-1m-bf16"
    cell = AcceptanceEstimator.cell(1 << ADJ, 1, 0)
    assert cal.estimator.table()[cell] != hand.estimator.table()[cell]
    assert HwTreeDrafter(acceptance_prior="nobody-7b").config()["acceptance_prior"] == HAND


@pytest.mark.parametrize("cls", [OptTreeDrafter, HwTreeDrafter])
def test_acceptance_prior_must_be_a_string(cls):
    with pytest.raises(ValueError, match=r"acceptance_prior = 3: must be a string"):
        cls(acceptance_prior=3)
