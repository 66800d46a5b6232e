"""budget=auto: cut any tree drafter's tree to the size this hardware pays for (a harness extension; the paper
fixes B). Builders insert the most valuable nodes first, so the wrapper verifies the prefix of b* nodes
maximising E[committed | b] / latency(b), with E = 1 + Σ_{i<b} q_i and latency from
`goose.engine.budget.cost_model` (at the step's cache length where the table has several KV lengths).
q_i = Π r along the path, r = P(accepted | parent accepted) per cell (source, depth, sibling rank), which
is what acceptance depends on (p_s ≫ p_t); Beta prior (0.6 for the spine, 0.35 / (rank + 1) otherwise).
Counts persist across prompts and decay every step, so an unobserved cell returns to its prior: otherwise a
source that fails a few times is cut for good (discounted Beta-Bernoulli, Garivier & Moulines 2011;
tests/engine/test_auto_budget.py). With `in_run_cost`, latency(b) is the calibrated curve times (1 + r(b)), each size's
correction from this run's measured steps (goose.engine.budget.in_run_cost).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch

from goose.engine.budget.cost_model import LatencyTable, at_kv, engine_latency
from goose.engine.budget.in_run_cost import InRunCost
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import SPINE, DraftTree
from goose.engine.core.verifier import VerificationEngine

MAX_DEPTH_BUCKET = 16
MAX_RANK_BUCKET = 8
AUTO_DECAY = 0.99  # per-step forgetting of the acceptance counts (module docstring, "Forgetting")
NUM_SOURCES = 8  # source labels are small ints (ROOT, SPINE, BRANCH, baselines' own)
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


class AcceptanceModel:
    """r(key) = P(node accepted | parent accepted) per (source, depth, sibling rank), Beta-smoothed."""

    def __init__(
        self,
        prior_strength: float = 2.0,
        spine_prior: float = 0.6,
        branch_prior: float = 0.35,
        cap: float = 256.0,
        decay: float = 1.0,
    ):
        if prior_strength <= 0 or cap <= 0:
            raise ValueError("prior_strength and cap must be positive")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.decay = decay
        shape = (NUM_SOURCES, MAX_DEPTH_BUCKET + 1, MAX_RANK_BUCKET + 1)
        ranks = np.arange(MAX_RANK_BUCKET + 1, dtype=np.float64)
        prior = np.broadcast_to(branch_prior / (ranks + 1.0), shape).copy()
        prior[SPINE] = spine_prior
        self.prior_alpha = prior * prior_strength
        self.prior_beta = (1.0 - prior) * prior_strength
        self.cap = cap
        self.reached = np.zeros(shape)
        self.accepted = np.zeros(shape)

    def keys(self, tree: DraftTree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, depth bucket, rank bucket) of nodes 1..n-1, rank = insertion order among
        siblings."""
        n = len(tree)
        rank = [0] * n
        seen = [0] * n
        parents = tree.parents
        for i in range(1, n):
            p = parents[i]
            rank[i] = seen[p]
            seen[p] += 1
        return self.bucket_keys(tree.sources[1:], tree.depths[1:], rank[1:])

    @staticmethod
    def bucket_keys(
        sources: list[int], depths: list[int], ranks: list[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cell keys from given sources, depths and sibling ranks, for a drafter that ranks siblings its own
        way (baselines.opt_tree).
        """
        src = np.minimum(np.asarray(sources, dtype=np.int64), NUM_SOURCES - 1)
        depth = np.minimum(np.asarray(depths, dtype=np.int64), MAX_DEPTH_BUCKET)
        rk = np.minimum(np.asarray(ranks, dtype=np.int64), MAX_RANK_BUCKET)
        return src, depth, rk

    def rates(self, keys: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
        a = self.accepted[keys] + self.prior_alpha[keys]
        return a / (self.reached[keys] + self.prior_alpha[keys] + self.prior_beta[keys])

    def rate_table(self) -> np.ndarray:
        """r of every cell as one array, for a drafter that looks rates up while it builds a tree."""
        return (self.accepted + self.prior_alpha) / (self.reached + self.prior_alpha + self.prior_beta)

    def path_probabilities(
        self, tree: DraftTree, keys: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> list[float]:
        """q_i for i = 0..n-1 (q_0 = 1): product of r along the path."""
        r = self.rates(keys).tolist()
        q = [1.0] * len(tree)
        parents = tree.parents
        for i in range(1, len(tree)):
            q[i] = q[parents[i]] * r[i - 1]
        return q

    def age(self) -> None:
        if self.decay < 1.0:
            self.reached *= self.decay
            self.accepted *= self.decay

    def update(
        self, tree: DraftTree, keys: tuple[np.ndarray, np.ndarray, np.ndarray], accepted_nodes: list[int]
    ) -> None:
        on_path = np.zeros(len(tree), dtype=bool)
        on_path[accepted_nodes] = True
        reached = on_path[np.asarray(tree.parents[1:], dtype=np.int64)]
        hit = on_path[1:]
        np.add.at(self.reached, tuple(k[reached] for k in keys), 1.0)
        np.add.at(self.accepted, tuple(k[hit] for k in keys), 1.0)
        full = self.reached > self.cap
        if full.any():
            self.reached[full] *= 0.5
            self.accepted[full] *= 0.5


class AutoBudgetDrafter(Drafter):
    """Wraps a tree drafter configured at its maximum budget and verifies the prefix of its tree with the most
    expected tokens/s. Adds stats auto_trees, auto_nodes_proposed / _verified, auto_cut_to_ar and, with
    `in_run_cost`, auto_cost_drift (ē) and auto_cost_correction (size: r(n) for the sizes measured lately),
    as they stood when the prompt ended.
    """

    def __init__(
        self,
        inner: Drafter,
        latency: LatencyTable,
        min_nodes: int = 1,
        max_nodes: int | None = None,
        prior_strength: float = 2.0,
        decay: float = AUTO_DECAY,
        in_run_cost: bool = False,
    ) -> None:
        super().__init__(name=inner.name)
        if min_nodes < 1 or (max_nodes is not None and max_nodes < min_nodes):
            raise ValueError(f"need 1 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}")
        self.inner = inner
        self.latency = latency
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.prior_strength = prior_strength
        self.acceptance = AcceptanceModel(prior_strength, decay=decay)
        self.in_run_cost = InRunCost(IN_RUN_PRIOR_STEPS, decay) if in_run_cost else None
        self._kvs, self._curves = latency.curves(128)
        self._lat = self._curves[0]  # t(n) at the step's cache length (`_at_cache`)
        self._kv = 0.0
        self._keys: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._own: dict[str, int] = {}
        self._step_lat: list[float] = []  # this step's t(1..), read by a drafter that sizes itself
        # A sampling drafter (STAND) sizes its own tree: cutting after the draws would bias rejection
        # sampling.
        sizer = getattr(inner, "use_latency", None)
        self._inner_sizes_itself = callable(sizer)
        if self._inner_sizes_itself:
            sizer(self._step_latency)

    @property
    def needs_prefill_logits(self) -> bool:
        return self.inner.needs_prefill_logits

    @property
    def samples_drafts(self) -> bool:  # type: ignore[override]
        return self.inner.samples_drafts

    @property
    def needs_draft_forward(self) -> bool:
        return getattr(self.inner, "needs_draft_forward", False)

    def use_draft_forward(self, draft_forward: Any) -> None:
        self.inner.use_draft_forward(draft_forward)

    # Acceptance rates are learnt over the whole run, so this wrapper always carries state across prompts.
    carries_run_state = True

    def run_state(self) -> Any:
        return {
            "acceptance": copy.deepcopy(self.acceptance),
            "in_run_cost": copy.deepcopy(self.in_run_cost),
            "inner": self.inner.run_state(),
        }

    def restore_run_state(self, state: Any) -> None:
        self.acceptance = copy.deepcopy(state["acceptance"])
        if self.in_run_cost is not None and state.get("in_run_cost") is not None:
            self.in_run_cost = copy.deepcopy(state["in_run_cost"])
        if state["inner"] is not None:
            self.inner.restore_run_state(state["inner"])

    def config(self) -> dict[str, Any]:
        return {
            **self.inner.config(),
            "budget_auto": True,
            "auto_min_nodes": self.min_nodes,
            "auto_max_nodes": self.max_nodes,
            "auto_prior_strength": self.prior_strength,
            "auto_decay": self.acceptance.decay,
            **({"auto_in_run_cost": True} if self.in_run_cost is not None else {}),
        }

    def _latencies(self, n: int) -> np.ndarray:
        if n > self._lat.shape[0]:
            self._kvs, self._curves = self.latency.curves(max(n, 2 * self._lat.shape[0]))
            self._lat = at_kv(self._kvs, self._curves, self._kv)
        if self.in_run_cost is None:
            return self._lat[:n]
        return self._lat[:n] * (1.0 + self.in_run_cost.corrections(n))

    def _step_latency(self, n: int) -> float:
        """t(n) for this step, the curve (and its in-run corrections) evaluated once per step."""
        if n > len(self._step_lat):
            self._step_lat = self._latencies(max(n, self._lat.shape[0])).tolist()
        return self._step_lat[n - 1]

    def _at_cache(self, committed: list[int]) -> None:
        """t(n) for this step: at the cache length (the committed tokens but the anchor) on a table
        measured at several KV lengths, else the table's one curve."""
        if self._curves.shape[0] > 1:
            self._kv = float(len(committed) - 1)
            self._lat = at_kv(self._kvs, self._curves, self._kv)

    def choose(self, tree: DraftTree, keys: tuple[np.ndarray, np.ndarray, np.ndarray]) -> int:
        """b* in [min_nodes, n] (see module docstring); ties go to the smaller tree."""
        n = tree.acceptable  # nodes past accept_limit are always verified: they only add to t(b)
        scratch = len(tree) - n
        hi = n if self.max_nodes is None else min(n, self.max_nodes)
        if hi <= self.min_nodes:
            return hi
        q = self.acceptance.path_probabilities(tree, keys)
        expected = np.cumsum(q)  # q_0 = 1 is the bonus token: expected tokens with b = 1..n nodes
        rate = expected[:hi] / self._latencies(hi + scratch)[scratch:]
        lo = self.min_nodes - 1
        return lo + int(np.argmax(rate[lo:])) + 1

    def set_sampling(self, sampling: SamplingParams, seed: int) -> None:
        super().set_sampling(sampling, seed)
        self.inner.set_sampling(sampling, seed)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self._own = {"auto_trees": 0, "auto_nodes_proposed": 0, "auto_nodes_verified": 0, "auto_cut_to_ar": 0}
        self.inner.begin(prompt_ids, prefill_logits)

    def propose(self, committed: list[int]) -> DraftTree:
        self._at_cache(committed)
        self._step_lat = []  # the cache length or the in-run corrections may have moved since
        tree = self.inner.propose(committed)
        self.route = self.inner.route
        n = len(tree)
        if n == 1:
            self._keys = None
            return tree
        keys = self.acceptance.keys(tree)
        b = n if self._inner_sizes_itself else self.choose(tree, keys)
        if b < tree.acceptable:
            cut = prefix_tree(tree, b)
            keys = tuple(k[: b - 1] for k in keys) if cut.accept_limit is None else self.acceptance.keys(cut)
            tree = cut
            if len(tree) == 1:
                self._own["auto_cut_to_ar"] += 1
                self.route = "ar"
        self._own["auto_trees"] += 1
        self._own["auto_nodes_proposed"] += n
        self._own["auto_nodes_verified"] += len(tree)
        self._keys = keys
        return tree

    def observe_cost(self, nodes: int, seconds: float) -> None:
        if self.in_run_cost is not None:
            if nodes > self._lat.shape[0]:
                self._latencies(nodes)
            self.in_run_cost.observe(nodes, seconds, float(self._lat[nodes - 1]))

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        if self._keys is not None and len(tree) > 1:
            keys = self._keys if len(self._keys[0]) == len(tree) - 1 else self.acceptance.keys(tree)
            self.acceptance.update(tree, keys, outcome.accepted_nodes)
        self.acceptance.age()  # every step, the ones cut to the anchor included
        self.inner.observe(tree, outcome)

    def end(self) -> None:
        self.inner.end()
        self.stats = {**self.inner.stats, **self._own}
        if self.in_run_cost is not None:
            cost = self.in_run_cost
            seen = cost.steps_seen(cost.weight.shape[0])
            correction = cost.corrections(seen.shape[0])
            self.stats["auto_cost_drift"] = round(cost.drift(), 4)
            self.stats["auto_cost_correction"] = {
                str(n + 1): round(float(correction[n]), 4) for n in np.flatnonzero(seen > 0.5)
            }


def wrap_auto_budget(
    drafter: Drafter,
    engine: VerificationEngine,
    latency: LatencyTable | str | Path | None = None,
    **kwargs: Any,
) -> Drafter:
    """budget=auto for any drafter: calibrate the engine's latency curve once (or load a saved one) and wrap
    `drafter`.
    """
    if latency is None:
        table = engine_latency(engine)
    elif isinstance(latency, LatencyTable):
        table = latency
    else:
        table = LatencyTable.load(latency)
    return AutoBudgetDrafter(drafter, table, **kwargs)


def auto_budget_factory(make_drafter, engine: VerificationEngine, **kwargs: Any):
    table = kwargs.pop("latency", None)
    table = engine_latency(engine) if table is None else table

    def make() -> Drafter:
        return wrap_auto_budget(make_drafter(), engine, latency=table, **kwargs)

    return make
