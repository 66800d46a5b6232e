"""budget=auto: cut any tree drafter's tree to the size this hardware pays for (a harness extension; the paper
fixes B). Builders insert the most valuable nodes first, so the `AutoBudget` sizer has the decode loop verify
the prefix of b* nodes maximising E[committed | b] / t(b), with E = 1 + Σ_{i<b} q_i and t(b) from
`goose.engine.budget.cost_model` (at the step's cache length where the table has several KV lengths).
q_i = Π r along the path, r = P(accepted | parent accepted) per cell (source, depth, sibling rank), which
is what acceptance depends on (p_s ≫ p_t): goose.engine.core.acceptance.AcceptanceModel, Beta prior 0.6 for
the spine, 0.35 / (rank + 1) otherwise. Counts persist across prompts and decay every step, so an unobserved
cell returns to its prior: otherwise a source that fails a few times is cut for good (discounted
Beta-Bernoulli, Garivier & Moulines 2011; tests/engine/test_auto_budget.py). With `in_run_cost`, t(b) is
the calibrated curve times (1 + r(b)), each size's correction from this run's measured steps
(goose.engine.budget.in_run_cost). A drafter that `sizes_itself` is never cut; it gets t(n) instead.

What a step costs beyond its forward is priced too (goose.engine.budget.draft_gate): with `price_bookkeeping`,
t(b) for b > 1 carries o, the run's measured bookkeeping of a verified tree beyond an anchor's; with a `gate`,
a step drafts only while the drafted steps' measured tokens per second beat an AR step's, else it is a plain
AR step (no drafting) until a probe pays again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from goose.engine.budget.calibration import engine_latency
from goose.engine.budget.cost_model import LatencyTable, at_kv
from goose.engine.budget.draft_gate import DraftGate, DraftGateConfig, StepCost, TreeBookkeeping
from goose.engine.budget.in_run_cost import InRunCost
from goose.engine.core.acceptance import AcceptanceModel, Keys
from goose.engine.core.acceptance_prior import HAND, load_prior
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.sizing import Speculator, StepTiming, TreeSizer
from goose.engine.core.tree import DraftTree
from goose.engine.core.verifier import VerificationEngine

AUTO_DECAY = 0.99  # per-step forgetting of the acceptance counts (module docstring, "Forgetting")
IN_RUN_PRIOR_STEPS = 5.0  # the calibrated t(n) weighs as this many measured steps (its timings per size)


def prefix_tree(tree: DraftTree, b: int) -> DraftTree:
    """The first b nodes of `tree` (ancestor-closed because parents come before children); for a tree with
    nodes past `accept_limit` (Lookahead's window, a fixed cost of the method), the first b acceptable nodes
    and every node past the limit, unless one of those hangs under a cut node (then the whole tree)."""
    limit = tree.acceptable
    if tree.accept_limit is None:
        return tree.prefix(b)
    scratch = range(limit, len(tree))
    if b >= limit:
        return tree
    if any(b <= tree.parents[i] < limit for i in scratch):
        return tree
    return tree.subset([*range(b), *scratch])


@dataclass(frozen=True)
class AutoBudgetSettings:
    """budget=auto's switches, the defaults of every run (conf/config.yaml names them budget_*): correct t(n)
    by the run's measured forwards (`in_run_cost`), price a tree's measured bookkeeping (`price_bookkeeping`),
    take plain AR steps while drafting does not pay (`gate`; None: always draft), start the acceptance rates
    from a prior calibrated offline (`acceptance_prior`: a model or family name, a prior's name or file;
    goose.engine.core.acceptance_prior; "hand": the hand prior)."""

    in_run_cost: bool = False
    price_bookkeeping: bool = True
    gate: DraftGateConfig | None = None  # off by default: results/studies/failed_step/README.md
    acceptance_prior: str = HAND


class AutoBudget(TreeSizer):
    """budget=auto's sizer: verifies the prefix of each tree with the most expected tokens/s, the drafter
    configured at its maximum budget. Adds stats auto_trees, auto_nodes_proposed / _verified, auto_cut_to_ar,
    with a gate gate_skipped / gate_probes / gate_probes_paid, with `price_bookkeeping` auto_bookkeeping_ms (o)
    and, with `in_run_cost`, auto_cost_drift (ē) and auto_cost_correction (size: r(n) for the sizes measured
    lately), as they stood when the prompt ended.
    """

    # Acceptance rates (and the in-run cost) are learnt over the whole run: always carried across prompts.
    carries_run_state = True

    def __init__(
        self,
        latency: LatencyTable,
        min_nodes: int = 1,
        max_nodes: int | None = None,
        prior_strength: float = 2.0,
        decay: float = AUTO_DECAY,
        settings: AutoBudgetSettings | None = None,
        method: str | None = None,
    ) -> None:
        if min_nodes < 1 or (max_nodes is not None and max_nodes < min_nodes):
            raise ValueError(f"need 1 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}")
        self.latency = latency
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.prior_strength = prior_strength
        settings = AutoBudgetSettings() if settings is None else settings
        self.settings = settings
        # `method`'s section of the calibrated prior (else its pooled one); None: the hand prior
        prior = load_prior(settings.acceptance_prior, "auto_budget", method)
        self.acceptance = AcceptanceModel(prior_strength, decay=decay, prior=prior)
        self.in_run_cost = InRunCost(IN_RUN_PRIOR_STEPS, decay) if settings.in_run_cost else None
        self._kvs, self._curves = latency.curves(128)
        self._lat = self._curves[0]  # t(n) at the step's cache length (`_at_cache`)
        gate = settings.gate
        self.gate = None if gate is None else DraftGate(float(self._lat[0]), gate)
        self.plain_learns = gate is None or gate.plain_learns
        self.bookkeeping = TreeBookkeeping((gate or DraftGateConfig()).decay)
        self.price_bookkeeping = settings.price_bookkeeping
        self._o = 0.0  # o for this step (0 unless price_bookkeeping)
        self._kv = 0.0
        self._keys: Keys | None = None
        self._own: dict[str, int] = {}
        self._step_lat: list[float] = []  # this step's t(1..), read by a drafter that sizes itself
        self._never_cut = False  # this prompt's drafter sizes itself

    def run_state(self) -> Any:
        return copy.deepcopy(
            {
                "acceptance": self.acceptance,
                "in_run_cost": self.in_run_cost,
                "gate": self.gate,
                "bookkeeping": self.bookkeeping,
            }
        )

    def restore_run_state(self, state: Any) -> None:
        state = copy.deepcopy(state)
        self.acceptance = state["acceptance"]
        if self.in_run_cost is not None and state.get("in_run_cost") is not None:
            self.in_run_cost = state["in_run_cost"]
        if self.gate is not None and state.get("gate") is not None:
            self.gate = state["gate"]
        if state.get("bookkeeping") is not None:
            self.bookkeeping = state["bookkeeping"]

    def config(self) -> dict[str, Any]:
        return {
            "budget_auto": True,
            "auto_min_nodes": self.min_nodes,
            "auto_max_nodes": self.max_nodes,
            "auto_prior_strength": self.prior_strength,
            "auto_decay": self.acceptance.decay,
            **({"auto_in_run_cost": True} if self.in_run_cost is not None else {}),
            **(
                {f"auto_gate_{k}": v for k, v in asdict(self.gate.config).items()}
                if self.gate is not None
                else {}
            ),
            **({"auto_price_bookkeeping": True} if self.price_bookkeeping else {}),
            **(
                {"auto_acceptance_prior": self.acceptance.prior_name}
                if self.settings.acceptance_prior != HAND
                else {}
            ),
        }

    def _latencies(self, n: int) -> np.ndarray:
        if n > self._lat.shape[0]:
            self._kvs, self._curves = self.latency.curves(max(n, 2 * self._lat.shape[0]))
            self._lat = at_kv(self._kvs, self._curves, self._kv)
        if self.in_run_cost is None:
            return self._lat[:n]
        return self._lat[:n] * (1.0 + self.in_run_cost.corrections(n))

    def _calibrated(self, n: int) -> float:
        """The calibrated t(n) at this step's cache length, without in-run corrections (the curve grown
        to n first if needed): what a measured step is compared with."""
        if n > self._lat.shape[0]:
            self._latencies(n)
        return float(self._lat[n - 1])

    def step_latency(self, n: int) -> float:
        """t(n) for this step, the curve (and its in-run corrections) evaluated once per step, plus o for
        n > 1: what a drafter that sizes itself gets (`Drafter.use_latency`)."""
        if n > len(self._step_lat):
            self._step_lat = self._latencies(max(n, self._lat.shape[0])).tolist()
        return self._step_lat[n - 1] + (self._o if n > 1 else 0.0)

    def _at_cache(self, committed: list[int]) -> None:
        """t(n) for this step: at the cache length (the committed tokens but the anchor) on a table
        measured at several KV lengths, else the table's one curve."""
        if self._curves.shape[0] > 1:
            self._kv = float(len(committed) - 1)
            self._lat = at_kv(self._kvs, self._curves, self._kv)

    def choose(self, tree: DraftTree, keys: Keys) -> int:
        """b* in [min_nodes, n] (see module docstring); ties go to the smaller tree."""
        n = tree.acceptable  # nodes past accept_limit are always verified: they only add to t(b)
        scratch = len(tree) - n
        hi = n if self.max_nodes is None else min(n, self.max_nodes)
        if hi <= self.min_nodes:
            return hi
        q = self.acceptance.path_probabilities(tree, keys)
        expected = np.cumsum(q)  # q_0 = 1 is the bonus token: expected tokens with b = 1..n nodes
        cost = self._latencies(hi + scratch)[scratch:].copy()
        if hi + scratch > 1:  # every size but the anchor alone carries the tree's bookkeeping o
            cost[max(1 - scratch, 0) :] += self._o
        rate = expected[:hi] / cost
        lo = self.min_nodes - 1
        return lo + int(np.argmax(rate[lo:])) + 1

    def expected_tokens(self, tree: DraftTree) -> np.ndarray:
        """E[committed | b] for b = 1 .. the tree's acceptable nodes (1 + Σ_{i<b} q_i): what a batch-level
        policy (goose.engine.batch.budget) weighs this request's nodes by."""
        if len(tree) == 1:
            return np.ones(1)
        return np.cumsum(self.acceptance.path_probabilities(tree, self.acceptance.keys(tree)))

    def begin(self, drafter: Drafter) -> None:
        self._own = {"auto_trees": 0, "auto_nodes_proposed": 0, "auto_nodes_verified": 0, "auto_cut_to_ar": 0}
        if self.gate is not None:
            self.gate.begin()
        self._never_cut = drafter.sizes_itself
        if drafter.sizes_itself:
            drafter.use_latency(self.step_latency)

    def start_step(self, committed: list[int]) -> None:
        self._at_cache(committed)
        self._step_lat = []  # the cache length or the in-run corrections may have moved since
        self._o = self.bookkeeping.seconds() if self.price_bookkeeping else 0.0

    def drafts(self) -> bool:
        return True if self.gate is None else self.gate.drafts()

    def size(self, tree: DraftTree) -> DraftTree:
        n = len(tree)
        if n == 1:
            self._keys = None
            return tree
        keys = self.acceptance.keys(tree)
        b = n if self._never_cut else self.choose(tree, keys)
        if b < tree.acceptable:
            cut = prefix_tree(tree, b)
            keys = tuple(k[: b - 1] for k in keys) if cut.accept_limit is None else self.acceptance.keys(cut)
            tree = cut
            if len(tree) == 1:
                self._own["auto_cut_to_ar"] += 1
        self._own["auto_trees"] += 1
        self._own["auto_nodes_proposed"] += n
        self._own["auto_nodes_verified"] += len(tree)
        self._keys = keys
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome, timing: StepTiming) -> None:
        n = len(tree)
        if not timing.drafted:
            self._keys = None
        if self._keys is not None and n > 1:
            keys = self._keys if len(self._keys[0]) == n - 1 else self.acceptance.keys(tree)
            self.acceptance.update(tree, keys, outcome.accepted_nodes)
        self.acceptance.age()  # every step, the ones cut to the anchor and the gate's AR steps included
        self.bookkeeping.observe(n, timing.update_s + timing.sizer_s)
        if self.gate is not None:
            cost = StepCost(
                tokens=len(outcome.new_tokens),
                seconds=timing.total_s,
                verify_seconds=timing.verify_s,
                predicted_verify=self._calibrated(n),
                nodes=n,
                drafted=timing.drafted,
            )
            self.gate.observe(cost)
        self.observe_cost(n, timing.verify_s)

    def observe_cost(self, nodes: int, seconds: float) -> None:
        """A verification of `nodes` nodes took `seconds`: evidence for the in-run correction (if on)."""
        if self.in_run_cost is not None:
            self.in_run_cost.observe(nodes, seconds, self._calibrated(nodes))

    def end(self) -> dict[str, Any]:
        stats: dict[str, Any] = dict(self._own)
        if self.gate is not None:
            stats.update(self.gate.stats)
        if self.price_bookkeeping:
            stats["auto_bookkeeping_ms"] = round(1e3 * self.bookkeeping.seconds(), 4)
        if self.in_run_cost is not None:
            cost = self.in_run_cost
            seen = cost.steps_seen(cost.weight.shape[0])
            correction = cost.corrections(seen.shape[0])
            stats["auto_cost_drift"] = round(cost.drift(), 4)
            stats["auto_cost_correction"] = {
                str(n + 1): round(float(correction[n]), 4) for n in np.flatnonzero(seen > 0.5)
            }
        return stats


def calibrated(engine: VerificationEngine, latency: LatencyTable | str | Path | None = None) -> LatencyTable:
    """The engine's t(n): `latency` itself, a table saved at that path, or calibrated now (None)."""
    if latency is None:
        return engine_latency(engine)
    if isinstance(latency, LatencyTable):
        return latency
    return LatencyTable.load(latency)


def with_auto_budget(
    drafter: Drafter,
    engine: VerificationEngine,
    latency: LatencyTable | str | Path | None = None,
    **kwargs: Any,
) -> Speculator:
    """budget=auto for any drafter: the drafter with an `AutoBudget` sizer on the engine's latency curve
    (`calibrated`); `kwargs` are AutoBudget's."""
    return Speculator(drafter, AutoBudget(calibrated(engine, latency), method=drafter.name, **kwargs))


def auto_budget_factory(
    make_drafter: Callable[[], Drafter], engine: VerificationEngine, **kwargs: Any
) -> Callable[[], Speculator]:
    """budget=auto for a drafter factory: the curve calibrated once (or `latency=` given), a fresh drafter
    and a fresh sizer per call."""
    table = calibrated(engine, kwargs.pop("latency", None))

    def make() -> Speculator:
        return with_auto_budget(make_drafter(), engine, latency=table, **kwargs)

    return make
