"""Whether a step drafts at all (budget=auto, a harness extension): a drafted step or a plain AR step.

A drafted step costs everything it does beyond AR's step: the drafting, a wider verification forward, the
walk, the drafter's and the sizer's bookkeeping. Its gain is the tokens it commits. The gate keeps, over the
drafted steps (probes included), sums of tokens committed G and of wall seconds C (the whole step, as the
decode loop measured it) that forget slowly (`window`, ~1 / (1 - window) steps: acceptance comes in bursts,
and a short memory stops drafting inside them), started at `prior_steps` break-even steps and kept across
the run's prompts; and c_ar, the
seconds of an AR step: the decayed mean over the steps it skipped (whole step) and over drafted steps that
verified the anchor alone (their verification only); until one is measured, the calibrated t(1) times the
run's measured / calibrated ratio of verification seconds. Drafting pays while G · c_ar ≥ C.

A drafted step that neither pays on its own (tokens · c_ar < seconds) nor leaves G · c_ar ≥ C is followed by
k plain AR steps: no `propose`, no `observe`, AR's step exactly (no top-K of the logits; the drafter hears of
the committed tokens through `Drafter.observe_plain`, of the logits too with `plain_learns`; without it a
draft cut to the anchor alone is taken the same way, `TreeSizer.plain_step`);
then one probe, a drafted step judged the same way. k is 1 after a step that paid (a burst may be
starting or ending), doubled after each failed probe up to `max_skip`. A prompt starts drafting (its context
is new). Where drafts keep failing, trying costs one probe per max_skip + 1 steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goose.validation import check_float, check_int


def decayed_add(pair: list[float], value: float, decay: float, weight: float = 1.0) -> None:
    """pair = [Σ value, Σ weight], each multiplied by `decay` before this observation is added."""
    pair[0] = pair[0] * decay + value
    pair[1] = pair[1] * decay + weight


@dataclass(frozen=True)
class DraftGateConfig:
    """The gate's settings: `decay` of c_ar and of the measured / calibrated forward ratio per step observed;
    `window`, the per-step forgetting of G and C; `prior_steps`, the break-even steps G and C start the run
    with; skips of 1, 2, 4, ... `max_skip` steps; `plain_learns`: a plain step also takes the anchor's
    top-K for the drafter to learn from (an adjacency table's row), or (False) is AR's step exactly, the
    drafter hearing only of the committed tokens (`Drafter.observe_plain`'s `learn_logits`), and so is a
    draft the size rule cut to the anchor alone (an empty proposal still learns the anchor's row)."""

    decay: float = 0.8
    window: float = 0.95
    prior_steps: float = 4.0
    max_skip: int = 8
    plain_learns: bool = False

    def __post_init__(self) -> None:
        for name, value, why in (
            ("budget_gate_decay", self.decay, "the per-step forgetting of an AR step's seconds"),
            ("budget_gate_window", self.window, "the per-step forgetting of the drafted steps' G and C"),
        ):
            check_float(name, value, 0.0, 1.0, why=why)
            if value == 0.0:
                raise ValueError(f"{name} = 0.0: must be in (0, 1] ({why})")
        check_float(
            "budget_gate_prior_steps", self.prior_steps, 0.0, 1e6, why="break-even steps G and C start with"
        )
        check_int(
            "budget_gate_max_skip", self.max_skip, 1, 4096, why="the longest run of AR steps between probes"
        )
        if not isinstance(self.plain_learns, bool):
            raise ValueError(f"budget_gate_plain_learns = {self.plain_learns!r}: must be true or false")


@dataclass(frozen=True)
class StepCost:
    """One step as the gate sees it: tokens committed, the whole step's seconds, its verification's seconds and
    the calibrated t(nodes) of that verification, the verified tree's size, and whether the step drafted."""

    tokens: int
    seconds: float
    verify_seconds: float
    predicted_verify: float
    nodes: int
    drafted: bool


class DraftGate:
    """Draft or take a plain AR step (module docstring): `drafts()` before each step, `observe` after it."""

    def __init__(self, t1: float, config: DraftGateConfig | None = None) -> None:
        if not t1 > 0:
            raise ValueError(f"t1 = {t1!r}: the calibrated seconds of an anchor-only step must be > 0")
        self.config = config or DraftGateConfig()
        self.t1 = t1
        self._ar = [0.0, 0.0]  # decayed seconds and count of measured AR steps
        self._ratio = [0.0, 0.0]  # decayed measured and calibrated verification seconds
        self.gain = self.config.prior_steps  # G: the run starts at `prior_steps` break-even steps,
        self.cost = self.config.prior_steps * t1  # C: one token each at t(1)
        self.skip_left = 0  # AR steps before the next probe
        self.skip_len = 0  # k, the length of the last skip (0: drafting)
        self.probing = False  # the step under way is a probe
        self.stats: dict[str, Any] = {}
        self.begin()

    def begin(self) -> None:
        """A prompt starts: draft from its first step (its context is new); the window G, C and c_ar go on
        (how drafting paid on the run's last prompts is the best guess for this one)."""
        self.skip_left = self.skip_len = 0
        self.probing = False
        self.stats = {"gate_skipped": 0, "gate_probes": 0, "gate_probes_paid": 0}

    def ar_seconds(self) -> float:
        """c_ar: measured AR steps, else the calibrated t(1) scaled by the run's measured / calibrated ratio."""
        if self._ar[1] > 0:
            return self._ar[0] / self._ar[1]
        return self.t1 * (self._ratio[0] / self._ratio[1] if self._ratio[1] > 0 else 1.0)

    def drafts(self) -> bool:
        """Whether this step drafts (a skipped step is counted here)."""
        if self.skip_left > 0:
            self.skip_left -= 1
            self.stats["gate_skipped"] += 1
            return False
        self.probing = self.skip_len > 0
        self.stats["gate_probes"] += int(self.probing)
        return True

    def observe(self, step: StepCost) -> None:
        """A step ended: learn c_ar and the forward ratio; G and C from drafted steps; decide what follows."""
        decayed_add(self._ratio, step.verify_seconds, self.config.decay, step.predicted_verify)
        if not step.drafted:
            decayed_add(self._ar, step.seconds, self.config.decay)
            return
        if step.nodes == 1:
            decayed_add(self._ar, step.verify_seconds, self.config.decay)
        c_ar = self.ar_seconds()
        self.gain = self.gain * self.config.window + step.tokens
        self.cost = self.cost * self.config.window + step.seconds
        paid = step.tokens * c_ar >= step.seconds
        probe, self.probing = self.probing, False
        self.stats["gate_probes_paid"] += int(probe and paid)
        if paid or self.gain * c_ar >= self.cost:
            self.skip_len = 0  # drafting
        else:
            self.skip_len = min(2 * self.skip_len, self.config.max_skip) if probe else 1
            self.skip_left = self.skip_len


class TreeBookkeeping:
    """o: the seconds a step that verified a tree (n > 1) spends after its verification (the drafter's
    `observe`, the sizer's own) beyond what a step that verified the anchor alone spends, as decayed means
    measured in the run, floored at 0. budget=auto's size rule adds it to t(b) for b > 1: a node less is
    not worth the tree's bookkeeping when it would leave the anchor alone."""

    def __init__(self, decay: float) -> None:
        self.decay = decay
        self._tree = [0.0, 0.0]
        self._anchor = [0.0, 0.0]

    def observe(self, nodes: int, seconds: float) -> None:
        decayed_add(self._tree if nodes > 1 else self._anchor, seconds, self.decay)

    def seconds(self) -> float:
        if self._tree[1] == 0.0:
            return 0.0
        anchor = self._anchor[0] / self._anchor[1] if self._anchor[1] > 0 else 0.0
        return max(self._tree[0] / self._tree[1] - anchor, 0.0)
