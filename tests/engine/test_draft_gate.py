"""budget=auto's gate (goose.engine.budget.draft_gate): when a step drafts at all, and what skipping costs.

- The gate's decisions on hand-fed steps, exact: G · c_ar ≥ C over a slow window started at break-even,
  probes counted in it; a step that pays on its own keeps drafting; skips of 1, 2, 4, ... max_skip while
  probes fail; c_ar from measured AR steps, else t(1) times the run's measured / calibrated ratio.
- The tree's bookkeeping o, exact, and the size rule it changes.
- The decode loop: a skipped step calls neither `propose` nor `observe`, verifies the anchor alone, and
  tells the drafter through `observe_plain`; every method's output under random skips is AR's; drafters that log
  committed tokens hold all of them after a gated prompt.
- The run config's budget_gate and budget_price_bookkeeping reach the sizer and change what it computes.
"""

from __future__ import annotations

import random
import time

import pytest
import torch

from goose.engine.budget.auto_budget import AutoBudget, AutoBudgetSettings
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.budget.draft_gate import DraftGate, DraftGateConfig, StepCost, TreeBookkeeping
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter, VerifyOutcome
from goose.engine.core.sizing import StepTiming, TreeSizer
from goose.engine.core.tree import SPINE, DraftTree
from goose.engine.forward.choose import verification_engine
from goose.harness.compose import auto_budget_settings
from tests.tiny_models import VOCAB, tiny_model
from tests.toy_harness import METHODS, drafter_of, one_thread  # noqa: F401


def drafted(tokens: int, seconds: float, nodes: int = 4) -> StepCost:
    """A drafted step whose forward took what the curve said (1 s): c_ar stays t1 = 1 s until measured."""
    return StepCost(tokens, seconds, 1.0, 1.0, nodes, drafted=True)


def skipped(seconds: float) -> StepCost:
    return StepCost(1, seconds, seconds, 1.0, 1, drafted=False)


def run_gate(gate: DraftGate, steps: list[StepCost | None]) -> list[bool]:
    """Feed `steps` (None: whatever the gate decided, a skipped step of 1 s) and return its decisions."""
    decisions = []
    for step in steps:
        d = gate.drafts()
        decisions.append(d)
        gate.observe(step if d else skipped(1.0))
    return decisions


def test_drafting_continues_while_the_windows_tokens_per_second_beat_an_ar_step():
    gate = DraftGate(t1=1.0, config=DraftGateConfig(window=0.5, prior_steps=0.0))
    assert run_gate(gate, [drafted(3, 1.5), drafted(1, 1.2)]) == [True, True]
    # the second step failed on its own (1 token < 1.2 s) but the window pays: G = 2.5 >= C = 1.95
    assert gate.gain == 2.5 and gate.cost == pytest.approx(1.95, abs=1e-12)
    assert gate.ar_seconds() == 1.0 and (gate.skip_left, gate.skip_len) == (0, 0)
    gate.drafts()
    gate.observe(drafted(1, 1.3))  # failed, and G = 2.25 < C = 2.275: the next step is a plain AR step
    assert gate.gain == 2.25 and gate.cost == pytest.approx(2.275, abs=1e-12)
    assert (gate.skip_left, gate.skip_len) == (1, 1)
    assert gate.drafts() is False and gate.drafts() is True and gate.probing


def test_a_step_that_pays_on_its_own_keeps_drafting_inside_a_losing_window():
    gate = DraftGate(t1=1.0, config=DraftGateConfig(window=0.5, prior_steps=0.0))
    assert run_gate(gate, [drafted(1, 4.0), None, drafted(2, 1.5)]) == [True, False, True]
    assert gate.gain == 2.5 and gate.cost == pytest.approx(3.5, abs=1e-12)  # the window still loses
    assert (gate.skip_left, gate.skip_len) == (0, 0) and gate.stats["gate_probes_paid"] == 1
    assert gate.drafts() and not gate.probing  # a burst may be starting: drafting, not probing


def test_failed_probes_double_the_skip_up_to_max_skip_and_a_paying_probe_returns_to_drafting():
    gate = DraftGate(t1=1.0, config=DraftGateConfig(window=0.5, prior_steps=0.0, max_skip=4))
    gate.observe(skipped(1.0))  # c_ar = 1.0 s, measured
    fail = drafted(1, 1.2)
    # 1 failing step -> skip 1, probe fails -> skip 2, -> 4, -> 4 (max_skip), then a paying probe
    plan = [fail, None, fail, None, None, fail, *[None] * 4, fail, *[None] * 4, drafted(2, 1.5), fail]
    decisions = run_gate(gate, plan)
    assert decisions == [True, False, True, False, False, True, *[False] * 4, True, *[False] * 4, True, True]
    assert gate.stats == {"gate_skipped": 11, "gate_probes": 4, "gate_probes_paid": 1}
    # the probes count into the window: G = 1.875 * .5 + 2 = 2.9375, C = 2.25 * .5 + 1.5 = 2.625 after the
    # paying probe; the last step fails and leaves G = 2.46875 < C = 2.5125: a skip of 1 (not a probe)
    assert gate.gain == 2.46875 and gate.cost == pytest.approx(2.5125, abs=1e-12)
    assert (gate.skip_left, gate.skip_len) == (1, 1)


def test_the_run_starts_at_break_even_and_a_prompt_starts_drafting_with_the_window_kept():
    gate = DraftGate(t1=1.0, config=DraftGateConfig(window=0.5, prior_steps=2.0, max_skip=4))
    assert (gate.gain, gate.cost) == (2.0, 2.0)  # 2 break-even steps: one token each at t(1)
    run_gate(gate, [drafted(1, 3.0), None])  # G = 2, C = 4: a skip, measured at 1 s
    gate.observe(skipped(0.5))
    assert gate.skip_left == 0 and gate.skip_len == 1
    gate.begin()
    assert gate.skip_len == 0 and gate.drafts() and not gate.probing
    assert gate.ar_seconds() == pytest.approx((1.0 * 0.8 + 0.5) / 1.8, abs=1e-12)
    assert (gate.gain, gate.cost) == (2.0, 4.0)  # the window goes on across prompts
    assert gate.stats == {"gate_skipped": 0, "gate_probes": 0, "gate_probes_paid": 0}


def test_c_ar_comes_from_ar_steps_else_t1_times_the_measured_ratio():
    gate = DraftGate(t1=2.0, config=DraftGateConfig(decay=0.5))
    assert gate.ar_seconds() == 2.0  # nothing measured: the calibrated t(1)
    gate.observe(StepCost(3, 5.0, 3.0, 2.0, 4, drafted=True))  # forwards run 1.5x the curve
    assert gate.ar_seconds() == 3.0
    gate.observe(StepCost(1, 9.0, 2.5, 2.0, 1, drafted=True))  # a drafted anchor-only step: its verification
    assert gate.ar_seconds() == 2.5
    gate.observe(StepCost(1, 1.5, 1.4, 2.0, 1, drafted=False))  # a skipped step: the whole step
    assert gate.ar_seconds() == pytest.approx((2.5 * 0.5 + 1.5) / 1.5, abs=1e-12)


def test_the_gate_config_names_the_field_and_range():
    with pytest.raises(ValueError, match=r"budget_gate_decay = 1.5: must be a number in \[0.0, 1.0\]"):
        DraftGateConfig(decay=1.5)
    with pytest.raises(ValueError, match=r"budget_gate_decay = 0.0"):
        DraftGateConfig(decay=0.0)
    with pytest.raises(ValueError, match=r"budget_gate_window = 0.0"):
        DraftGateConfig(window=0.0)
    with pytest.raises(ValueError, match=r"budget_gate_prior_steps = -1.0"):
        DraftGateConfig(prior_steps=-1.0)
    with pytest.raises(ValueError, match=r"budget_gate_max_skip = 0: must be an integer in \[1, 4096\]"):
        DraftGateConfig(max_skip=0)
    with pytest.raises(ValueError, match=r"budget_gate_plain_learns = 1: must be true or false"):
        DraftGateConfig(plain_learns=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="t1"):
        DraftGate(t1=0.0)


def test_bookkeeping_is_a_trees_measured_update_beyond_an_anchors():
    book = TreeBookkeeping(decay=0.5)
    assert book.seconds() == 0.0
    book.observe(5, 0.004)
    assert book.seconds() == 0.004  # no anchor-only step yet: all of it
    book.observe(1, 0.001)
    book.observe(3, 0.002)
    assert book.seconds() == pytest.approx((0.004 * 0.5 + 0.002) / 1.5 - 0.001, abs=1e-15)
    book.observe(1, 0.010)
    assert book.seconds() == 0.0  # floored: a tree never costs less than an anchor


SPINE4 = DraftTree.chain(0, [10, 11, 12, 13], SPINE)
LINEAR = LatencyTable(sizes=[1, 128], seconds=[1.0, 128.0 * 0.1 + 0.9])  # t(n) = 0.9 + 0.1 n


def test_priced_bookkeeping_changes_the_size_rule_exactly():
    """E(b) = 1, 1.6, 1.96, 2.176, 2.3056 (spine prior 0.6), t(b) = 1.0 .. 1.4. o = 0: the best rate is
    2.176 / 1.3 (b* = 4); o = 0.5 s: 2.3056 / 1.9 beats 2.176 / 1.8 (b* = 5); o = 2 s: the anchor alone
    (1 / 1.0) beats every tree (2.3056 / 3.4)."""
    chosen = {}
    for o in (0.0, 0.5, 2.0):
        sizer = AutoBudget(LINEAR, settings=AutoBudgetSettings(gate=None, price_bookkeeping=True))
        sizer.bookkeeping.observe(5, o)
        sizer.start_step([1, 2, 3])
        chosen[o] = sizer.choose(SPINE4, sizer.acceptance.keys(SPINE4))
    assert chosen == {0.0: 4, 0.5: 5, 2.0: 1}
    off = AutoBudget(LINEAR, settings=AutoBudgetSettings(gate=None, price_bookkeeping=False))
    off.bookkeeping.observe(5, 2.0)  # measured, not priced
    off.start_step([1, 2, 3])
    assert off.choose(SPINE4, off.acceptance.keys(SPINE4)) == 4
    assert sizer.step_latency(1) == 1.0 and sizer.step_latency(3) == pytest.approx(1.2 + 2.0, abs=1e-12)


class Counting(Drafter):
    """Proposes a chain of `token` (not one the tiny model predicts here), taking `draft_s` seconds to draft
    it; counts propose / observe / skip."""

    def __init__(self, draft_s: float = 0.0) -> None:
        super().__init__(name="counting")
        self.calls = {"propose": 0, "observe": 0, "skip": 0}
        self.draft_s = draft_s

    def propose(self, committed):
        self.calls["propose"] += 1
        time.sleep(self.draft_s)
        self.route = "chain"
        return DraftTree.chain(committed[-1], [VOCAB - 1] * 3, SPINE)

    def observe(self, tree, outcome):
        self.calls["observe"] += 1

    def observe_plain(self, committed, outcome, learn_logits=True):
        self.calls["skip"] += 1
        assert isinstance(outcome, VerifyOutcome) and outcome.logits.shape[0] == 1


class EveryOther(TreeSizer):
    """Drafts on even steps only."""

    def __init__(self) -> None:
        self.step = -1
        self.timings: list[StepTiming] = []

    def drafts(self) -> bool:
        self.step += 1
        return self.step % 2 == 0

    def observe(self, tree, outcome, timing):
        self.timings.append(timing)


@pytest.fixture(scope="module")
def engine():
    return verification_engine(tiny_model("llama", seed=3), eos_token_ids=(), context_length=256)


def test_a_skipped_step_verifies_the_anchor_and_tells_the_drafter(engine):
    drafter, sizer = Counting(), EveryOther()
    gen = generate(engine, drafter, list(range(5, 15)), 9, sizer=sizer)
    assert gen.output_ids == generate(engine, ARDrafter(), list(range(5, 15)), 9).output_ids
    steps = len(gen.steps)
    assert drafter.calls == {"propose": (steps + 1) // 2, "observe": (steps + 1) // 2, "skip": steps // 2}
    assert [t.drafted for t in sizer.timings] == [i % 2 == 0 for i in range(steps)]
    assert [s.tree_size for s in gen.steps[1::2]] == [1] * (steps // 2)
    assert {s.route for s in gen.steps[1::2]} == {"ar"}
    assert all(t.verify_s > 0 and t.draft_s >= 0 for t in sizer.timings)
    assert sizer.timings[0].sizer_s == 0.0  # the first step has no sizer observe before it


def test_the_gate_stops_drafting_when_drafts_fail(engine):
    """A drafter whose chains are never accepted and cost 5 ms to draft: 39 steps (40 tokens) draft at steps
    0, 2, 5, 10, 19, 28 and 37 (skips of 1, 2, 4, 8, 8, 8 after failed probes: max_skip 8) and are plain AR
    steps otherwise."""
    prompt = list(range(5, 15))
    assert VOCAB - 1 not in generate(engine, ARDrafter(), prompt, 40).output_ids  # the chains always fail
    table = LatencyTable(sizes=[1, 128], seconds=[1e-3, 1e-3])  # flat: the size rule keeps the whole chain
    runs = {}
    for gate in (None, DraftGateConfig()):
        drafter = Counting(draft_s=5e-3)
        sizer = AutoBudget(table, settings=AutoBudgetSettings(gate=gate, price_bookkeeping=False))
        gen = generate(engine, drafter, prompt, 40, sizer=sizer)
        assert len(gen.steps) == 39
        runs[gate is not None] = (drafter.calls, {k: v for k, v in gen.drafter_stats.items() if "gate" in k})
    assert runs[False] == ({"propose": 39, "observe": 39, "skip": 0}, {})
    assert runs[True] == (
        {"propose": 7, "observe": 7, "skip": 32},
        {"gate_skipped": 32, "gate_probes": 6, "gate_probes_paid": 0},
    )


class RandomGate(TreeSizer):
    def __init__(self, seed: int, plain_learns: bool = True) -> None:
        self.rng = random.Random(seed)
        self.plain_learns = plain_learns

    def drafts(self) -> bool:
        return self.rng.random() < 0.5


@pytest.mark.parametrize("method", METHODS)
def test_every_method_under_random_skips_gives_ar_output(engine, method):
    """With the plain steps learning from the anchor's logits (seed 0) and as AR's step exactly (seed 1)."""
    gen = torch.Generator().manual_seed(7)
    base = torch.randint(0, VOCAB - 1, (8,), generator=gen).tolist()
    prompt = base * 3  # repetitive: drafts get accepted between the skips
    expected = generate(engine, ARDrafter(), prompt, 32).output_ids
    for seed, learns in ((0, True), (1, False)):
        out = generate(engine, drafter_of(method), prompt, 32, sizer=RandomGate(seed, learns))
        assert out.output_ids == expected, (method, seed)
        assert 0 < sum(s.route == "ar" for s in out.steps)


class TopRecording(Counting):
    """Counting, with a table's K = 4: records per step whether the engine handed over the top-K, and what
    `observe_plain` was told."""

    logits_topk = 4

    def __init__(self) -> None:
        super().__init__()
        self.tops: list[tuple[str, bool, bool | None]] = []

    def observe(self, tree, outcome):
        super().observe(tree, outcome)
        self.tops.append(("drafted", outcome.top is not None, None))

    def observe_plain(self, committed, outcome, learn_logits=True):
        super().observe_plain(committed, outcome, learn_logits)
        self.tops.append(("plain", outcome.top is not None, learn_logits))


class EveryOtherPlain(EveryOther):
    def __init__(self, plain_learns: bool) -> None:
        super().__init__()
        self.plain_learns = plain_learns


def test_a_plain_step_is_ars_step_exactly_unless_the_plain_steps_learn(engine):
    """plain_learns False: a plain step takes no top-K and tells the drafter not to learn from its logits;
    True: the top-K as on a drafted step, learn_logits True; drafted steps carry the top-K either way."""
    for learns in (False, True):
        drafter = TopRecording()
        generate(engine, drafter, list(range(5, 15)), 7, sizer=EveryOtherPlain(learns))
        assert drafter.tops == [
            ("drafted", True, None),
            ("plain", learns, learns),
            ("drafted", True, None),
            ("plain", learns, learns),
            ("drafted", True, None),
            ("plain", learns, learns),
        ]


class EveryOtherEmpty(TreeSizer):
    """Drafts every step and cuts every other step's tree to the anchor alone (an empty draft)."""

    def __init__(self, plain_learns: bool) -> None:
        self.plain_learns = plain_learns
        self.step = -1

    def size(self, tree: DraftTree) -> DraftTree:
        self.step += 1
        return tree if self.step % 2 == 0 else DraftTree.single(tree.tokens[0])


def test_an_empty_draft_is_a_plain_step_unless_the_plain_steps_learn(engine):
    """plain_learns False: a drafted tree of the anchor alone is verified as AR's step (no top-K) and heard of
    through observe_plain after its propose; True: it is a drafted step like any other."""
    prompt = list(range(5, 15))
    expected = generate(engine, ARDrafter(), prompt, 7).output_ids
    for learns in (False, True):
        drafter = TopRecording()
        gen = generate(engine, drafter, prompt, 7, sizer=EveryOtherEmpty(learns))
        assert gen.output_ids == expected
        empty = ("drafted", True, None) if learns else ("plain", False, False)
        assert drafter.tops == [("drafted", True, None), empty] * 3
        assert drafter.calls == {"propose": 6, "observe": 3 + 3 * learns, "skip": 3 * (not learns)}
        assert [s.drafted for s in gen.steps] == [True] * 6
        assert [s.tree_size for s in gen.steps[1::2]] == [1, 1, 1]
        assert [s.cut_to_anchor for s in gen.steps] == [False, True] * 3


@pytest.mark.parametrize("method", METHODS)
def test_every_method_under_random_empty_drafts_gives_ar_output(engine, method):
    """Every method's output is AR's when random drafts are cut to the anchor alone and heard of as plain
    steps (observe_plain after propose)."""
    gen = torch.Generator().manual_seed(7)
    base = torch.randint(0, VOCAB - 1, (8,), generator=gen).tolist()
    prompt = base * 3
    expected = generate(engine, ARDrafter(), prompt, 32).output_ids
    sizer = RandomEmpty(2)
    out = generate(engine, drafter_of(method), prompt, 32, sizer=sizer)
    assert out.output_ids == expected, method
    assert sizer.cut > 0 or method == "ar", method  # AR never proposes more than the anchor


class EmptyEveryOther(TopRecording):
    """TopRecording that proposes the anchor alone on every other step (it found nothing)."""

    def propose(self, committed):
        tree = super().propose(committed)
        return tree if self.calls["propose"] % 2 else DraftTree.single(committed[-1])


class AllDrafted(TreeSizer):
    """Drafts every step, verifies every proposal whole."""

    def __init__(self, plain_learns: bool) -> None:
        self.plain_learns = plain_learns


def test_an_empty_proposal_stays_a_drafted_step_that_learns(engine):
    """Without plain_learns an empty proposal is not cut (nothing was proposed): the engine hands over the
    top-K and the drafter observes it, as it must for a table that only verified logits fill."""
    drafter = EmptyEveryOther()
    gen = generate(engine, drafter, list(range(5, 15)), 7, sizer=AllDrafted(False))
    assert [s.tree_size for s in gen.steps[1::2]] == [1, 1, 1]
    assert [s.cut_to_anchor for s in gen.steps] == [False] * 6
    assert drafter.tops == [("drafted", True, None)] * 6


def recording_hw_tree() -> tuple[Drafter, list[tuple]]:
    """hw_tree, recording per step whether it was observed or heard of as plain, and `kept_anchor_alone`."""
    drafter, calls = drafter_of("hw_tree"), []
    observe, observe_plain = drafter.observe, drafter.observe_plain

    def observed(tree, outcome):
        calls.append(("observe", drafter.kept_anchor_alone))
        observe(tree, outcome)

    def plain(committed, outcome, learn_logits=True):
        calls.append(("plain", drafter.kept_anchor_alone, learn_logits))
        observe_plain(committed, outcome, learn_logits)

    drafter.observe, drafter.observe_plain = observed, plain
    return drafter, calls


def test_hw_tree_keeping_the_anchor_alone_is_a_cut(engine):
    """hw_tree sizes itself: a step cost that grows with n^3 keeps the anchor alone every step, whether its
    pool held candidates or none (`kept_anchor_alone`), so without plain_learns every step is plain; with
    it, every step is observed."""
    prompt = list(range(5, 15)) * 2
    expected = generate(engine, ARDrafter(), prompt, 12).output_ids
    for learns in (False, True):
        drafter, calls = recording_hw_tree()
        drafter.use_latency(lambda n: float(n) ** 3)
        gen = generate(engine, drafter, prompt, 12, sizer=AllDrafted(learns))
        assert gen.output_ids == expected
        assert [s.tree_size for s in gen.steps] == [1] * 11
        assert calls == [("observe", True) if learns else ("plain", True, False)] * 11, learns
        assert [s.cut_to_anchor for s in gen.steps] == [True] * 11


class RandomEmpty(TreeSizer):
    """Cuts half the proposals, at random, to the anchor alone; plain_learns False (the gate's default)."""

    plain_learns = False

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.cut = 0

    def size(self, tree: DraftTree) -> DraftTree:
        if len(tree) > 1 and self.rng.random() < 0.5:
            self.cut += 1
            return DraftTree.single(tree.tokens[0])
        return tree


def test_the_gate_config_decides_whether_plain_steps_learn():
    table = LatencyTable(sizes=[1, 128], seconds=[1e-3, 1e-3])
    assert AutoBudget(table, settings=AutoBudgetSettings(gate=None)).plain_learns is True
    assert AutoBudget(table, settings=AutoBudgetSettings(gate=DraftGateConfig())).plain_learns is False
    learning = AutoBudgetSettings(gate=DraftGateConfig(plain_learns=True))
    assert AutoBudget(table, settings=learning).plain_learns is True


@pytest.mark.parametrize("method", ["goose", "tr", "hw_tree", "sam", "source_select"])
def test_a_plain_step_writes_the_anchors_table_row_only_when_it_learns(engine, method):
    """The anchor is not in the prompt, so no prefill harvest wrote its row."""
    prompt = list(range(10, 20))
    engine.prefill(prompt, max_new_tokens=4)
    assert engine.first_token not in prompt
    for learns in (False, True):
        drafter = drafter_of(method)
        engine.topk_width = drafter.logits_topk if learns else 0
        drafter.begin(prompt, engine.prefill(prompt, max_new_tokens=4, all_logits=True))
        anchor = engine.first_token
        outcome = engine.verify(DraftTree.single(anchor), budget=4)
        table = {"sam": lambda d: d.tr.table, "source_select": lambda d: d.drafters["tr"].table}.get(
            method, lambda d: d.table
        )(drafter)
        assert not table.has_row(anchor)
        drafter.observe_plain([*prompt, anchor], outcome, learns)
        assert table.has_row(anchor) is learns, (method, learns)
    engine.topk_width = 0


def test_logitspec_reads_a_lean_plain_steps_logit_at_its_next_propose(engine):
    """LogitSpec's guesses come from the last verified logit: after a plain step without learn_logits they
    are the same at the next propose as after one that learnt, read only then."""
    prompt = list(range(5, 15))
    trees = []
    for learns in (True, False):
        drafter = drafter_of("logitspec")
        logits = engine.prefill(prompt, max_new_tokens=4, all_logits=True)
        drafter.begin(prompt, logits)
        anchor = engine.first_token
        outcome = engine.verify(DraftTree.single(anchor), budget=4)
        before = list(drafter._guesses)
        drafter.observe_plain([*prompt, anchor], outcome, learns)
        if not learns:
            assert drafter._guesses == before and drafter._unread is not None  # not read yet
        trees.append(drafter.propose([*prompt, anchor, *outcome.new_tokens]).tokens)
    assert trees[0] == trees[1]


@pytest.mark.parametrize("method", ["suffix", "suffix_global", "hw_tree"])
def test_a_drafter_that_logs_committed_tokens_holds_all_of_them_after_skips(engine, method):
    drafter = drafter_of(method)
    prompt = list(range(5, 15)) * 2
    gen = generate(engine, drafter, prompt, 24, sizer=RandomGate(3))
    suffix = drafter if method.startswith("suffix") else drafter.suffix_source
    assert suffix._synced == len(prompt) + len(gen.output_ids)


def test_the_run_config_switches_reach_the_sizer():
    from omegaconf import OmegaConf

    default = auto_budget_settings(OmegaConf.create({}))
    assert default == AutoBudgetSettings() and default.gate is None and default.price_bookkeeping
    on = auto_budget_settings(OmegaConf.create({"budget_gate": True}))
    assert on.gate == DraftGateConfig()
    off = auto_budget_settings(OmegaConf.create({"budget_gate": False, "budget_price_bookkeeping": False}))
    assert off.gate is None and not off.price_bookkeeping
    sizer = AutoBudget(LINEAR, settings=off)
    assert sizer.gate is None and all(sizer.drafts() for _ in range(5))
    assert "auto_gate_decay" not in sizer.config() and "auto_price_bookkeeping" not in sizer.config()
    on = AutoBudget(LINEAR, settings=on)
    assert (
        on.config()["auto_gate_max_skip"] == 8
        and on.config()["auto_gate_window"] == 0.95
        and on.config()["auto_price_bookkeeping"] is True
    )


def test_the_gate_and_bookkeeping_are_checkpointed_with_the_sizer():
    gated = AutoBudgetSettings(gate=DraftGateConfig())
    sizer = AutoBudget(LINEAR, settings=gated)
    sizer.gate.observe(skipped(0.25))
    sizer.gate.skip_len = 4
    sizer.bookkeeping.observe(5, 0.003)
    fresh = AutoBudget(LINEAR, settings=gated)
    fresh.restore_run_state(sizer.run_state())
    assert fresh.gate.ar_seconds() == 0.25 and fresh.gate.skip_len == 4
    assert fresh.bookkeeping.seconds() == 0.003 and fresh.gate is not sizer.gate


def test_the_calibrated_prior_starts_the_sizers_rates_and_is_recorded():
    from omegaconf import OmegaConf

    from goose.engine.core.acceptance_prior import load_prior

    hand = AutoBudget(LINEAR)
    calibrated = AutoBudget(
        LINEAR, settings=AutoBudgetSettings(acceptance_prior="smollm2-135m"), method="goose"
    )
    keys = hand.acceptance.keys(SPINE4)
    assert hand.acceptance.rates(keys).tolist() == [0.6] * 4
    table = load_prior("smollm2-135m", "auto_budget", "goose")
    assert table is not None
    expected = calibrated.acceptance.prior_alpha[keys] / (
        calibrated.acceptance.prior_alpha[keys] + calibrated.acceptance.prior_beta[keys]
    )
    assert calibrated.acceptance.rates(keys).tolist() == expected.tolist() != [0.6] * 4
    assert "auto_acceptance_prior" not in hand.config()
    assert calibrated.config()["auto_acceptance_prior"] == calibrated.acceptance.prior_name != "hand"
    cfg = OmegaConf.create({"model": {"name": "smollm2-135m"}, "budget_acceptance_prior": "auto"})
    assert auto_budget_settings(cfg).acceptance_prior == "smollm2-135m"  # auto (the run default): the model's
    cfg = OmegaConf.create({"model": {"name": "smollm2-135m"}, "budget_acceptance_prior": "hand"})
    assert auto_budget_settings(cfg).acceptance_prior == "hand"
