"""budget=auto's in-run cost correction (goose.engine.budget.in_run_cost): each size's correction is the
decayed mean of its measured forwards against the calibrated t(n), shrunk toward the run's drift; a size
that only looked cheap at start-up stops being chosen once it and its neighbours have been measured; the
decode loop reports every step's cost to the sizer."""

from __future__ import annotations

import pytest
import torch

from goose.engine.budget.auto_budget import AutoBudget, AutoBudgetSettings
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.budget.in_run_cost import InRunCost
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.sizing import TreeSizer
from goose.engine.core.tree import SPINE, DraftTree
from goose.engine.forward.choose import verification_engine
from tests.engine.test_auto_budget import STEEP, FixedDrafter, sized_step
from tests.tiny_models import tiny_model


def test_with_nothing_measured_the_curve_stands():
    cost = InRunCost(prior_weight=5.0)
    assert cost.corrections(6).tolist() == [0.0] * 6 and cost.drift() == 0.0


def test_a_size_moves_by_its_own_steps_and_the_others_by_the_runs_drift():
    cost = InRunCost(prior_weight=5.0, clip=1.0)
    for _ in range(4):
        cost.observe(3, 1.5, 1.0)  # 50 % over the curve, four times
    drift = 4 * 0.5 / (4 + 5)
    assert cost.drift() == pytest.approx(drift)
    assert cost.corrections(3)[2] == pytest.approx((4 * 0.5 + 5 * drift) / (4 + 5))
    assert cost.corrections(6)[[0, 1, 3, 4, 5]] == pytest.approx([drift] * 5)  # unmeasured: the drift
    cost.observe(3, 100.0, 1.0)  # a stalled step counts as at most clip x t(n) over
    assert cost.drift() == pytest.approx((4 * 0.5 + 1.0) / (5 + 5))
    cost.observe(2, 0.5, 1.0)  # and a fast one as measured
    assert cost.drift() == pytest.approx((4 * 0.5 + 1.0 - 0.5) / (6 + 5))


def test_decay_returns_an_unmeasured_size_to_the_drift():
    cost = InRunCost(prior_weight=1.0, decay=0.5)
    cost.observe(2, 3.0, 1.0)
    assert cost.corrections(2)[1] == pytest.approx((1.0 + 1.0 * 0.5) / 2.0)  # e clipped to 1, drift 1/2
    for _ in range(20):
        cost.observe(1, 1.0, 1.0)
    assert abs(cost.corrections(2)[1]) < 1e-5 and abs(cost.drift()) < 1e-5
    assert cost.steps_seen(2)[0] == pytest.approx(2.0, rel=1e-5)  # 1 + 1/2 + 1/4 + ... after 20 steps


@pytest.mark.parametrize(
    "kwargs", [{"prior_weight": 0.0}, {"decay": 0.0}, {"decay": 1.5}, {"clip": -1.0}], ids=str
)
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        InRunCost(**kwargs)
    with pytest.raises(ValueError, match="t\\(3\\) must be positive"):
        InRunCost().observe(3, 1.0, 0.0)


def _dip_at_12() -> LatencyTable:
    """t(n) = 1 + 0.02 (n - 1), except a calibration that caught size 12 at 0.9 s."""
    sizes = list(range(1, 17))
    seconds = [1.0 + 0.02 * (n - 1) for n in sizes]
    seconds[11] = 0.9
    return LatencyTable(sizes=sizes, seconds=seconds)


def test_a_size_that_only_looked_cheap_stops_being_chosen():
    tree = DraftTree.chain(1, list(range(10, 25)), SPINE)  # 16 nodes
    plain = AutoBudget(_dip_at_12(), decay=1.0)
    learning = AutoBudget(_dip_at_12(), decay=1.0, settings=AutoBudgetSettings(in_run_cost=True))
    keys = plain.acceptance.keys(tree)
    assert plain.choose(tree, keys) == learning.choose(tree, keys) == 12  # the dip wins at first
    for _ in range(50):  # sizes 1, 6 and 11 cost what the curve says; 12 what its neighbours do, 1.22 s
        for n, seconds in ((1, 1.0), (6, 1.1), (11, 1.2), (12, 1.22)):
            plain.observe_cost(n, seconds)
            learning.observe_cost(n, seconds)
    assert plain.choose(tree, keys) == 12  # without the correction nothing moves
    own = 50 * (1.22 / 0.9 - 1.0)
    drift = own / (200 + 5)
    assert learning.in_run_cost.drift() == pytest.approx(drift)
    assert learning._latencies(16)[11] == pytest.approx(0.9 * (1 + (own + 5 * drift) / (50 + 5)))
    assert learning._latencies(16)[1] == pytest.approx(1.02 * (1 + drift))  # unmeasured: the drift
    assert learning.choose(tree, keys) != 12
    assert learning.config()["auto_in_run_cost"] is True and "auto_in_run_cost" not in plain.config()


def test_the_correction_is_carried_across_prompts_and_recorded():
    tree = DraftTree.chain(1, list(range(10, 25)), SPINE)
    sizer = AutoBudget(_dip_at_12(), decay=1.0, settings=AutoBudgetSettings(in_run_cost=True))
    sizer.begin(FixedDrafter(tree))
    sizer.observe_cost(12, 1.17)
    stats = sizer.end()
    e = 1.17 / 0.9 - 1.0
    assert stats["auto_cost_drift"] == pytest.approx(e / 6, abs=1e-4)
    assert stats["auto_cost_correction"] == {"12": pytest.approx((e + 5 * e / 6) / 6, abs=1e-4)}
    state = sizer.run_state()
    fresh = AutoBudget(_dip_at_12(), decay=1.0, settings=AutoBudgetSettings(in_run_cost=True))
    fresh.restore_run_state(state)
    assert fresh._latencies(16).tolist() == sizer._latencies(16).tolist()


class CostRecorder(TreeSizer):
    def __init__(self) -> None:
        self.costs: list[tuple[int, float]] = []

    def observe(self, tree, outcome, timing) -> None:
        self.costs.append((len(tree), timing.verify_s))


def test_the_loop_reports_every_steps_size_and_time_to_the_sizer():
    engine = verification_engine(tiny_model("llama", seed=3), eos_token_ids=())
    sizer = CostRecorder()
    gen = generate(engine, ARDrafter(), [3, 4, 5, 6], 9, sizer=sizer)
    assert [n for n, _ in sizer.costs] == [1] * (gen.forward_calls - 1)  # every step but the prefill
    assert all(s > 0 for _, s in sizer.costs)
    assert not Drafter.sizes_itself and Drafter().use_latency(lambda n: 1.0) is None  # declared defaults


class SelfSizing(FixedDrafter):
    """A drafter that sizes its own tree (as hw_tree and STAND do): records what the latency says."""

    sizes_itself = True

    def __init__(self, tree: DraftTree) -> None:
        super().__init__(tree)
        self.seen: list[list[float]] = []

    def use_latency(self, latency) -> None:
        self.latency = latency

    def propose(self, committed: list[int]) -> DraftTree:
        self.seen.append([self.latency(n) for n in range(1, 17)])
        return super().propose(committed)


def test_a_self_sizing_drafter_sees_each_steps_corrected_curve_computed_once(monkeypatch):
    tree = DraftTree.chain(1, list(range(10, 15)), SPINE)
    inner = SelfSizing(tree)
    auto = AutoBudget(_dip_at_12(), decay=1.0, settings=AutoBudgetSettings(in_run_cost=True))
    calls = []
    latencies = auto._latencies
    monkeypatch.setattr(auto, "_latencies", lambda n: calls.append(n) or latencies(n))
    auto.begin(inner)
    inner.begin([1], torch.zeros(1, 32))
    sized_step(auto, inner, [1])
    assert inner.seen[0] == pytest.approx(latencies(16).tolist()) and len(calls) == 1  # once a step
    auto.observe_cost(12, 1.8)  # size 12 took twice its calibrated 0.9 s
    assert inner.seen[0][11] == pytest.approx(0.9)  # a step's curve stays what it was sized on
    sized_step(auto, inner, [1])
    assert inner.seen[1][11] > 0.9 and inner.seen[1] == pytest.approx(latencies(16).tolist())


def test_a_drafter_that_sizes_itself_is_never_cut():
    tree = DraftTree.chain(1, list(range(10, 15)), SPINE)
    # t(n) = n: only b = 1 pays, so a tree the sizer may cut is cut to the anchor
    for drafter, size in ((SelfSizing(tree), len(tree)), (FixedDrafter(tree), 1)):
        sizer = AutoBudget(STEEP)
        sizer.begin(drafter)
        drafter.begin([1], torch.zeros(1, 32))
        assert len(sized_step(sizer, drafter, [1])) == size
