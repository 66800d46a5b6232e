"""hw_tree's request calibration c (baselines.hw_tree.request_scale, off by default): its arithmetic, the
selection and the size rule weighing values by min(1, c·q) (the early stop under c: test_hw_tree.py), and the
drafter learning c within a request, resetting it per request, and not using it with `request_scale` off."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from baselines.hw_tree.drafter import HwTreeDrafter
from baselines.hw_tree.pool import (
    CTX,
    CandidatePool,
    expected_committed,
    scaled,
    select_best_first,
)
from baselines.hw_tree.request_scale import CLIP, RequestScale
from tests.baselines.test_hw_tree import fake_begin, outcome_for, rate_from
from tests.conftest import method_config


def test_request_scale_is_accepted_over_predicted_with_pseudo_nodes_decay_and_clip():
    s = RequestScale(prior_nodes=2.0, decay=0.5)
    assert s.scale() == 1.0
    s.observe(2.0, 1)  # A = 1, P = 2
    assert s.scale() == (1 + 2) / (2 + 2)
    s.observe(1.0, 3)  # A = 0.5 + 3, P = 1 + 1
    assert s.scale() == (3.5 + 2) / (2.0 + 2)
    s.observe(100.0, 0)
    assert s.scale() == 1 / CLIP  # (1.75 + 2) / (101 + 2) < 1/4
    s.begin()
    assert s.scale() == 1.0 and s.accepted == s.predicted == 0.0
    for _ in range(10):
        s.observe(0.0, 9)
    assert s.scale() == CLIP


@pytest.mark.parametrize("prior_nodes, decay", [(0.0, 0.9), (-1.0, 0.9), (2.0, 0.0), (2.0, 1.5)])
def test_request_scale_rejects_bad_settings(prior_nodes, decay):
    with pytest.raises(ValueError, match="RequestScale"):
        RequestScale(prior_nodes, decay)
    with pytest.raises(ValueError, match="must be >= 0"):
        RequestScale(2.0, 0.9).observe(-0.5, 1)


def test_scaled_values_order_the_selection_and_set_the_expected_tokens():
    # node 1 (value 0.6, no gain) against node 2 (value 0.3, gain 0.25): at c = 1 keys 0.6 and 0.55, node 1
    # first; at c = 0.5 keys 0.3 and 0.4, node 2 first; at c = 2 node 1's key is capped at 1 (a probability)
    pool = CandidatePool.rooted(0)
    pool.add(0, 11, CTX, 0)
    pool.add(0, 12, CTX, 0)
    rates, gains = {1: 0.6, 2: 0.3}, {1: 0.0, 2: 0.25}

    def gain(p, node):
        return gains[node]

    plain = select_best_first(pool, rate_from(rates), 3, gain=gain, max_gain=0.25)
    assert plain.order == [0, 1, 2] and plain.scale == 1.0
    assert plain.expected_committed() == pytest.approx([1.0, 1.6, 2.15])
    low = select_best_first(pool, rate_from(rates), 3, gain=gain, max_gain=0.25, scale=0.5)
    assert low.order == [0, 2, 1] and low.values == [1.0, 0.3, 0.6]  # values stay the estimator's
    assert low.expected_committed() == pytest.approx([1.0, 1.4, 1.7])
    high = select_best_first(pool, rate_from(rates), 3, gain=gain, max_gain=0.25, scale=2.0)
    assert high.order == [0, 1, 2]
    assert high.expected_committed() == pytest.approx([1.0, 2.0, 2.85])  # min(1, 1.2), then 0.6 + 0.25
    assert scaled(0.8, 2.0) == 1.0 and scaled(0.3, 0.5) == 0.15
    assert expected_committed([1.0, 0.5], scale=3.0) == [1.0, 2.0]  # the anchor is never scaled
    with pytest.raises(ValueError, match="scale = 0"):
        select_best_first(pool, rate_from(rates), 3, scale=0.0)


PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3]


def _drafter(**kw) -> HwTreeDrafter:
    d = HwTreeDrafter(prefill_harvest=False, adj_width=0, suffix=False, alt_matches=0, **kw)
    d.use_latency(lambda n: 1.0 + 0.1 * (n - 1))
    fake_begin(d, PROMPT)
    return d


def test_the_drafter_learns_c_within_a_request_and_sizes_smaller_trees_when_drafts_fail():
    d = _drafter(request_scale=True)
    first = d.propose(PROMPT)
    predicted = sum(d.last_selection.values[1 : len(first)])
    d.observe(first, outcome_for(first, [0, 1, 2]))  # two drafted nodes accepted of ~8.6 predicted
    c = (2 + 2.0) / (predicted + 2.0)
    assert d.scale_model.scale() == pytest.approx(c) and c < 1
    committed = [*PROMPT, 4, 5, 1]
    second = d.propose(committed)
    assert d.last_selection.scale == pytest.approx(c)
    assert d.stats["hw_scale_sum"] == pytest.approx(1.0 + c)
    # the same step unscaled: a larger tree
    off = _drafter(request_scale=False)
    off.observe(off.propose(PROMPT), outcome_for(first, [0, 1, 2]))
    assert len(off.propose(committed)) > len(second) and off.last_selection.scale == 1.0
    assert off.scale_model.scale() == pytest.approx(c)  # learnt but not used
    fake_begin(d, PROMPT)  # a new request starts at c = 1
    d.propose(PROMPT)
    assert d.last_selection.scale == 1.0


def test_off_by_default_and_the_variant_config_turns_it_on_and_nothing_else():
    assert HwTreeDrafter().cfg.request_scale is False
    variant = method_config("hw_tree_request_scale")
    assert variant.name == "hw_tree_request_scale"
    drafter = instantiate(variant.drafter, _convert_="all")
    assert drafter.config() == {**HwTreeDrafter().config(), "request_scale": True}
