"""budget=auto: a drafter wrapper that cuts any tree drafter's tree to the size this hardware pays for.

`AutoBudgetDrafter(inner, latency)` lets the inner drafter propose its tree at its configured
(maximum) budget, then keeps the first b nodes in insertion order. The builders insert parents
before children and the more valuable nodes first (spine, then root and spine alternatives, then
breadth-first branches; TR's template and EAGLE-2's value order likewise), so a prefix is
ancestor-closed (a valid tree) and holds the nodes the builder valued most. b maximises the
expected tokens per second of the step:

    b* = argmax_b  E[committed tokens | first b nodes] / latency(b)

with latency(b) from `goose.engine.budget.cost_model` (calibrated on this machine) and

    E[committed | b] = 1 + sum_{i < b, i >= 1} q_i,   q_i = P(node i is accepted),

exactly: a node's acceptance depends only on its own path, so dropping later nodes does not change
the acceptance of the kept ones, and a step commits its accepted nodes plus the bonus token.

Estimating q_i. q_i = prod over the path root -> i of r(node), r = P(node accepted | its parent
accepted). r is estimated per cell key = (source label, depth (capped at 16), rank among its
siblings in insertion order (capped at 8)), from every verified tree: a node whose parent was on
the accepted path was "reached", and counts as accepted if it is on the path. Why this and not a
rate per insertion index: the same index means different things from tree to tree (index 5 is a
spine node in one Goose tree and a root alternative in the next), whereas source, depth and
sibling rank are what acceptance actually depends on (spine tokens are accepted several times
as often as branch tokens, first-ranked successors more than later ones), and the conditional
form learns from every reached node rather than only from full paths. Prior: Beta with mean 0.6
for the spine and 0.35 / (rank + 1) for other sources, strength 2 pseudo-observations, so the
first steps of a run draft moderately sized trees and the data take over after a few steps.
Counts persist across the prompts of a run (they describe the model and the benchmark, not the
prompt) and are halved when a cell passes `cap` reached nodes, so the estimate keeps adapting.

Forgetting (the wrapper's `decay`, 0.99 per verification step: a half-life of ~69 steps). Every
step multiplies all counts by `decay`, whether or not the step reached a cell, so an unobserved
cell drifts back towards its prior (discounted Beta-Bernoulli estimates, as discounted UCB /
Thompson sampling do for non-stationary bandits; Garivier & Moulines 2011). Without it the cut is
an absorbing state: a source that fails a dozen times in a row (SAM-Decoding's chain copying the
wrong period of a repetitive output) falls below the first node's break-even rate, is cut to the
anchor from then on, is never reached again, and so is never re-estimated, for the rest of the
run (measured before the fix: `sam` with budget=auto on SmolLM2 fp32, after its chain's first
token was rejected 16 times on the periodic output of HumanEval/1, cut 193 of its next 209
chains to the anchor, and its τ fell to 1.14 over the 50 prompts of `make bench`;
tests/engine/test_auto_budget.py replays the trap). With decay the cell reopens after about one
half-life, costs a few rejected nodes (a fraction of a node per step), and is kept again if the
source has recovered. The paper is silent (budget=auto is this harness's); 0.99 keeps ~100 trees
of memory for cells reached every step, enough for a rate to within +-0.05.

Known bias: the EOS / max_new_tokens cut of a run's last step can make accepted nodes look
rejected (once per prompt; negligible).

The inner drafter observes the verified tree (the prefix; node indices are unchanged, so its
logits rows line up) and the outcome as is; Goose's spine-acceptance EMA counts its spine length
L on that observed tree, so it sees the spine nodes actually verified.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch

from goose.engine.budget.cost_model import LatencyTable, engine_latency
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import SPINE, DraftTree
from goose.engine.core.verifier import VerificationEngine

MAX_DEPTH_BUCKET = 16
MAX_RANK_BUCKET = 8
AUTO_DECAY = 0.99  # per-step forgetting of the acceptance counts (module docstring, "Forgetting")
NUM_SOURCES = 8  # source labels are small ints (ROOT, SPINE, BRANCH, baselines' own)


def prefix_tree(tree: DraftTree, b: int) -> DraftTree:
    """The first b nodes of `tree` (ancestor-closed because parents come before children)."""
    if b >= len(tree):
        return tree
    proposals = None if tree.proposals is None else tree.proposals[:b]
    return DraftTree(tree.tokens[:b], tree.parents[:b], tree.sources[:b], tree.depths[:b], proposals)


class AcceptanceModel:
    """r(key) = P(node accepted | parent accepted) per (source, depth bucket, sibling-rank bucket),
    Beta-smoothed (see the module docstring)."""

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
        """Cell keys of nodes given by their source, depth and sibling rank (clipped to the
        buckets), for a drafter that ranks siblings its own way (baselines.opt_tree)."""
        src = np.minimum(np.asarray(sources, dtype=np.int64), NUM_SOURCES - 1)
        depth = np.minimum(np.asarray(depths, dtype=np.int64), MAX_DEPTH_BUCKET)
        rk = np.minimum(np.asarray(ranks, dtype=np.int64), MAX_RANK_BUCKET)
        return src, depth, rk

    def rates(self, keys: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
        a = self.accepted[keys] + self.prior_alpha[keys]
        return a / (self.reached[keys] + self.prior_alpha[keys] + self.prior_beta[keys])

    def rate_table(self) -> np.ndarray:
        """r of every cell, [NUM_SOURCES, MAX_DEPTH_BUCKET + 1, MAX_RANK_BUCKET + 1] (the same
        estimate as `rates`, for a drafter that looks rates up while it builds a tree)."""
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
        """One verification step passed: every count is multiplied by `decay` (module docstring,
        "Forgetting"); a no-op at decay = 1."""
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
    """Wraps a tree drafter; verifies the prefix of its tree that maximises expected tokens/s.

    inner           any Drafter (configured at its maximum budget)
    latency         LatencyTable of this engine and machine (`goose.engine.budget.cost_model`)
    min_nodes       smallest tree to verify (1 = AR allowed)
    max_nodes       optional cap on the verified tree
    prior_strength  pseudo-observations of the acceptance prior (see module docstring)
    decay           per-step forgetting factor of the acceptance counts, in (0, 1] (see module
                    docstring, "Forgetting"; 1 = remember everything)

    stats (added to the inner drafter's): auto_trees (trees offered to the wrapper),
    auto_nodes_proposed / auto_nodes_verified (summed sizes before / after the cut),
    auto_cut_to_ar (trees cut to the anchor alone).
    """

    def __init__(
        self,
        inner: Drafter,
        latency: LatencyTable,
        min_nodes: int = 1,
        max_nodes: int | None = None,
        prior_strength: float = 2.0,
        decay: float = AUTO_DECAY,
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
        self._lat = np.asarray(latency.curve(128))
        self._keys: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._own: dict[str, int] = {}
        # A drafter that samples its drafts (STAND) sizes its tree itself with the same latency
        # table: cutting a sampled tree after the draws would make a node's presence depend on its
        # own draw and bias rejection sampling (baselines/stand.py).
        sizer = getattr(inner, "use_latency", None)
        self._inner_sizes_itself = callable(sizer)
        if self._inner_sizes_itself:
            sizer(lambda n: float(self._latencies(n)[n - 1]))

    @property
    def needs_prefill_logits(self) -> bool:
        return self.inner.needs_prefill_logits

    @property
    def samples_drafts(self) -> bool:  # type: ignore[override]
        return self.inner.samples_drafts

    # The acceptance rates are learnt over the whole run (they are not reset per prompt), so an
    # auto-budget drafter always carries state across prompts: the rates and the inner drafter's.
    carries_run_state = True

    def run_state(self) -> Any:
        return {"acceptance": copy.deepcopy(self.acceptance), "inner": self.inner.run_state()}

    def restore_run_state(self, state: Any) -> None:
        self.acceptance = copy.deepcopy(state["acceptance"])
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
        }

    def _latencies(self, n: int) -> np.ndarray:
        if n > self._lat.shape[0]:
            self._lat = np.asarray(self.latency.curve(max(n, 2 * self._lat.shape[0])))
        return self._lat[:n]

    def choose(self, tree: DraftTree, keys: tuple[np.ndarray, np.ndarray, np.ndarray]) -> int:
        """b* in [min_nodes, n] (see module docstring); ties go to the smaller tree."""
        n = len(tree)
        hi = n if self.max_nodes is None else min(n, self.max_nodes)
        if hi <= self.min_nodes:
            return hi
        q = self.acceptance.path_probabilities(tree, keys)
        expected = np.cumsum(q)  # q_0 = 1 is the bonus token: expected tokens with b = 1..n nodes
        rate = expected[:hi] / self._latencies(hi)
        lo = self.min_nodes - 1
        return lo + int(np.argmax(rate[lo:])) + 1

    # ------------------------------------------------------------------ drafter contract
    def set_sampling(self, sampling: SamplingParams, seed: int) -> None:
        super().set_sampling(sampling, seed)
        self.inner.set_sampling(sampling, seed)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self._own = {"auto_trees": 0, "auto_nodes_proposed": 0, "auto_nodes_verified": 0, "auto_cut_to_ar": 0}
        self.inner.begin(prompt_ids, prefill_logits)

    def propose(self, committed: list[int]) -> DraftTree:
        tree = self.inner.propose(committed)
        self.route = self.inner.route
        n = len(tree)
        if n == 1:
            self._keys = None
            return tree
        keys = self.acceptance.keys(tree)
        b = n if self._inner_sizes_itself else self.choose(tree, keys)
        self._own["auto_trees"] += 1
        self._own["auto_nodes_proposed"] += n
        self._own["auto_nodes_verified"] += b
        if b < n:
            tree = prefix_tree(tree, b)
            keys = tuple(k[: b - 1] for k in keys)
            if b == 1:
                self._own["auto_cut_to_ar"] += 1
                self.route = "ar"
        self._keys = keys
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        if self._keys is not None and len(tree) > 1:
            keys = self._keys if len(self._keys[0]) == len(tree) - 1 else self.acceptance.keys(tree)
            self.acceptance.update(tree, keys, outcome.accepted_nodes)
        self.acceptance.age()  # every step, the ones cut to the anchor included
        self.inner.observe(tree, outcome)

    def end(self) -> None:
        self.inner.end()
        self.stats = {**self.inner.stats, **self._own}


def wrap_auto_budget(
    drafter: Drafter,
    engine: VerificationEngine,
    latency: LatencyTable | str | Path | None = None,
    **kwargs: Any,
) -> Drafter:
    """budget=auto for any drafter: calibrate the engine's latency curve once (or load it from a
    JSON file written by `LatencyTable.save` / experiments/cost_curve.py) and wrap `drafter`."""
    if latency is None:
        table = engine_latency(engine)
    elif isinstance(latency, LatencyTable):
        table = latency
    else:
        table = LatencyTable.load(latency)
    return AutoBudgetDrafter(drafter, table, **kwargs)


def auto_budget_factory(make_drafter, engine: VerificationEngine, **kwargs: Any):
    """A drafter factory whose drafters are wrapped by `wrap_auto_budget` (one calibration)."""
    table = kwargs.pop("latency", None)
    table = engine_latency(engine) if table is None else table

    def make() -> Drafter:
        return wrap_auto_budget(make_drafter(), engine, latency=table, **kwargs)

    return make
