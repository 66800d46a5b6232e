"""Online acceptance estimates for the hardware-aware tree (Sequoia, arXiv 2402.12374, §3.1: a node's value is
the product of per-edge acceptance rates along its path), and their calibration counts.

r = P(node accepted | parent accepted) per cell (source mask, depth bucket, confidence bin of the lead source;
baselines.hw_tree.pool). Two levels of Beta smoothing: a coarse cell (mask, depth) shrinks to the prior
of its lead source, a fine cell shrinks to the coarse rate scaled by its bin's prior relative to the
coarse prior, so an unseen bin keeps the prior's ordering at the learnt level. The prior is set by hand
(`source_priors`) unless a calibrated one is given (goose.engine.core.acceptance_prior). The counts are the shared
`DecayedCounts` (goose.engine.core.acceptance), decayed every step as budget=auto's, so a cell that stops
being seen returns to its prior.
`Calibration` counts, per bin of the predicted P(path accepted), the verified nodes and the accepted ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from baselines.hw_tree.pool import (
    ADJ,
    ALT,
    CONF_BINS,
    CTX,
    LEAD_ORDER,
    NUM_MASKS,
    RUN,
    SOURCE_BITS,
    SUF,
    CandidatePool,
)
from goose.engine.core.acceptance import DecayedCounts
from goose.engine.core.acceptance_prior import HAND, PriorTable, calibrate

DEPTH_BUCKETS = 12  # 1..8 each, 9-12, 13-20, 21+ (index 0 unused: the anchor)
BUCKET_DEPTH = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 16, 24)  # a representative depth per bucket
# Sources that copy a run of text: given its parent, a deeper edge is likelier to be accepted.
CHAIN_SOURCES = (CTX, ALT, SUF)
CALIBRATION_BINS = 10


def depth_bucket(depth: int) -> int:
    if depth <= 8:
        return depth
    return 9 if depth <= 12 else 10 if depth <= 20 else 11


def node_cell(pool: CandidatePool, node: int) -> int:
    """`AcceptanceEstimator.cell` of a pool node: its source mask, depth and lead source's bin
    (`CandidatePool.lead_bin`), the key the drafter rates it and labels it by."""
    return AcceptanceEstimator.cell(pool.masks[node], pool.depths[node], pool.lead_bin(node))


def _lead_source(mask: int) -> int:
    for s in LEAD_ORDER:
        if mask >> s & 1:
            return s
    return CTX


def source_priors(ctx: float, alt: float, suf: float, adj: float, run: float) -> np.ndarray:
    """Prior r per (source, confidence bin): the context chain's by matched n-gram length (bin = n − 1),
    starting at `ctx` for a 1-gram and rising by 0.1 a bin; the others the bin's midpoint times their
    scale (`alt`, `suf`, `adj`, `run`); clipped to [0.02, 0.95]."""
    mid = (np.arange(CONF_BINS) + 0.5) / CONF_BINS
    out = np.empty((len(SOURCE_BITS), CONF_BINS))
    out[CTX] = ctx + 0.1 * np.arange(CONF_BINS)
    out[ALT], out[SUF], out[ADJ], out[RUN] = alt * mid, suf * mid, adj * mid, run * mid
    return np.clip(out, 0.02, 0.95)


class AcceptanceEstimator(DecayedCounts):
    """r per cell, learnt online from labelled pool nodes; `prior` is [source, bin] (`source_priors`) at
    depth 1; deeper, a copying source's prior keeps `chain_gain` of the rejection rate per level (r_d = 1 −
    (1 − r_1)·chain_gain^(d−1): once a copied run is accepted, its next token usually is too);
    `prior_strength` pseudo-observations per level, `decay` the per-step forgetting factor. A `calibrated`
    prior (load_prior(model, "hw_tree", method)) replaces that hand prior where it has evidence
    (`_calibrate`); `prior_name` says which ran ("hand" or the prior's name)."""

    SHAPE = (NUM_MASKS, DEPTH_BUCKETS, CONF_BINS)

    def __init__(
        self,
        prior: np.ndarray,
        prior_strength: float = 2.0,
        decay: float = 0.99,
        chain_gain: float = 1.0,
        calibrated: PriorTable | None = None,
    ) -> None:
        if prior_strength <= 0:
            raise ValueError(f"prior_strength = {prior_strength}: must be > 0")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay = {decay}: must be in (0, 1]")
        if not 0.0 < chain_gain <= 1.0:
            raise ValueError(f"chain_gain = {chain_gain}: must be in (0, 1]")
        super().__init__(self.SHAPE, float(decay))
        self.strength = float(prior_strength)
        # per mask: its lead source's prior per bin, at least the mean prior of any other source it carries
        gain = np.asarray(chain_gain, dtype=float) ** (np.asarray(BUCKET_DEPTH) - 1.0).clip(min=0)
        by_depth = np.repeat(prior[:, None, :], DEPTH_BUCKETS, axis=1)  # [source, depth, bin]
        for s in CHAIN_SOURCES:
            by_depth[s] = 1.0 - (1.0 - prior[s])[None, :] * gain[:, None]
        by_depth = np.clip(by_depth, 0.02, 0.98)
        fine_prior = np.zeros((NUM_MASKS, DEPTH_BUCKETS, CONF_BINS))
        fine_prior[0] = by_depth[CTX]
        for mask in range(1, NUM_MASKS):
            lead = _lead_source(mask)
            others = [
                by_depth[s].mean(axis=1) for s in range(len(SOURCE_BITS)) if mask >> s & 1 and s != lead
            ]
            floor = np.max(others, axis=0)[:, None] if others else 0.0
            fine_prior[mask] = np.maximum(by_depth[lead], floor)
        self.fine_prior = fine_prior
        self.coarse_prior = fine_prior.mean(axis=2)
        # The hand prior: one strength for both levels; a fine cell's anchor scales the coarse rate by its
        # prior over the coarse prior (`ratio_base`).
        self.fine_strength: np.ndarray | float = self.strength
        self.coarse_strength: np.ndarray | float = self.strength
        self.ratio_base = self.coarse_prior[..., None]
        self.prior_name = HAND
        if calibrated is not None:
            self._calibrate(calibrated)
        self._memo: dict[int, float] = {}  # rate(cell) since the last update
        self._flat_prior: tuple[list[float], ...] | None = None  # `_prepare`

    def _calibrate(self, table: PriorTable) -> None:
        """The calibrated prior in place of the hand one: a fine cell's mean and strength from `table` where
        it has them; a coarse cell's from the calibration's counts summed over its bins (the same Beta update
        of the hand coarse prior, capped alike). A calibrated fine cell's anchor ratio is its mean over its
        calibrated coarse mean (so that with no evidence its rate is its calibrated mean); an uncalibrated
        one keeps the hand prior's ratio (the hand ordering at the calibrated level)."""
        hand_fine, hand_coarse, s = self.fine_prior, self.coarse_prior, self.strength
        fine_mean, fine_strength = table.over(hand_fine, s)
        mean_c, strength_c = calibrate(
            table.reached.sum(axis=2), table.accepted.sum(axis=2), hand_coarse, s, table.cap
        )
        seen_c = strength_c > 0
        coarse_mean = np.where(seen_c, mean_c, hand_coarse)
        seen = table.strength > 0
        self.fine_prior, self.fine_strength = fine_mean, fine_strength
        self.coarse_prior, self.coarse_strength = coarse_mean, np.where(seen_c, strength_c, s)
        self.ratio_base = np.where(seen, coarse_mean[..., None], hand_coarse[..., None])
        self.prior_name = table.name
        self._flat_prior = None

    def cell_prior(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, strength) per fine cell of the prior it starts from (its rate before any evidence)."""
        shape = self.fine_prior.shape
        return self.fine_prior.copy(), np.broadcast_to(
            np.asarray(self.fine_strength, dtype=float), shape
        ).copy()

    @staticmethod
    def cell(mask: int, depth: int, bin_: int) -> int:
        """The flat index of a cell."""
        return (mask * DEPTH_BUCKETS + depth_bucket(depth)) * CONF_BINS + bin_

    def table(self) -> list[float]:
        """r of every cell, flat (`cell` indexes it; `rate` computes one cell alike, the drafter's path): coarse = (Σ_bin accepted +
        s·coarse prior) / (Σ_bin reached + s), anchor = coarse · fine prior / coarse prior clipped to [1e-4, 1],
        r = (accepted + s·anchor) / (reached + s) (calibrated: s per cell and level, the anchor's ratio
        `ratio_base`, `_calibrate`)."""
        s_c, s_f = self.coarse_strength, self.fine_strength
        reach_c, acc_c = self.reached.sum(axis=2), self.accepted.sum(axis=2)
        coarse = (acc_c + s_c * self.coarse_prior) / (reach_c + s_c)
        anchor = np.clip(coarse[..., None] * self.fine_prior / self.ratio_base, 1e-4, 1.0)
        fine = (self.accepted + s_f * anchor) / (self.reached + s_f)
        return np.clip(fine, 0.0, 1.0).reshape(-1).tolist()

    def _prepare(self) -> tuple[list[float], ...]:
        """The prior's per-cell terms as flat lists (fine prior, anchor ratio, fine strength; coarse prior and
        strength per (mask, depth)), for `rate`."""
        if self._flat_prior is None:
            shape = self.fine_prior.shape
            self._flat_prior = (
                self.fine_prior.reshape(-1).tolist(),
                np.broadcast_to(self.ratio_base, shape).reshape(-1).tolist(),
                np.broadcast_to(np.asarray(self.fine_strength, dtype=float), shape).reshape(-1).tolist(),
                self.coarse_prior.reshape(-1).tolist(),
                np.broadcast_to(np.asarray(self.coarse_strength, dtype=float), shape[:2])
                .reshape(-1)
                .tolist(),
            )
        return self._flat_prior

    def rate(self, cell: int) -> float:
        """`table()[cell]`, the same arithmetic on one cell, kept until the next update: a step's tree reads a
        few dozen cells, so it never pays for the whole table."""
        r = self._memo.get(cell)
        if r is not None:
            return r
        fine_prior, ratio, s_f, coarse_prior, s_c = self._prepare()
        reached, accepted = self.reached.reshape(-1), self.accepted.reshape(-1)
        c = cell // CONF_BINS
        lo = c * CONF_BINS
        reach_c = acc_c = 0.0
        for i in range(lo, lo + CONF_BINS):
            reach_c += reached.item(i)
            acc_c += accepted.item(i)
        coarse = (acc_c + s_c[c] * coarse_prior[c]) / (reach_c + s_c[c])
        anchor = min(max(coarse * fine_prior[cell] / ratio[cell], 1e-4), 1.0)
        r = (accepted.item(cell) + s_f[cell] * anchor) / (reached.item(cell) + s_f[cell])
        r = self._memo[cell] = min(max(r, 0.0), 1.0)
        return r

    def update(self, cells: list[int], reached: list[bool], hit: list[bool]) -> None:
        """One verified tree: per drafted node its cell, whether its parent was accepted, whether it was;
        the counts age one step first."""
        self.age()
        counts = [self.reached.reshape(-1), self.accepted.reshape(-1)]
        totals = None
        if self.total_reached is not None and self.total_accepted is not None:
            totals = [self.total_reached.reshape(-1), self.total_accepted.reshape(-1)]
        for c, r, h in zip(cells, reached, hit, strict=True):
            if r:
                counts[0][c] += 1.0
                if h:
                    counts[1][c] += 1.0
                if totals is not None:
                    totals[0][c] += 1.0
                    totals[1][c] += float(h)
        self._memo.clear()

    def state(self) -> dict[str, np.ndarray]:
        return {"reached": self.reached.copy(), "accepted": self.accepted.copy()}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.reached, self.accepted = state["reached"].copy(), state["accepted"].copy()
        self._memo.clear()


def calibration_bin(p: float) -> int:
    return min(CALIBRATION_BINS - 1, max(0, int(p * CALIBRATION_BINS)))


class Calibration:
    """Per bin of the predicted P(path accepted): verified nodes, accepted ones, and the predictions' sum."""

    def __init__(self) -> None:
        self.nodes = [0] * CALIBRATION_BINS
        self.accepted = [0] * CALIBRATION_BINS
        self.predicted = [0.0] * CALIBRATION_BINS

    def add(self, predicted: float, accepted: bool) -> None:
        b = calibration_bin(predicted)
        self.nodes[b] += 1
        self.accepted[b] += int(accepted)
        self.predicted[b] += predicted

    def as_stats(self) -> dict[str, list]:
        return {
            "hw_calib_nodes": list(self.nodes),
            "hw_calib_accepted": list(self.accepted),
            "hw_calib_predicted": [round(p, 6) for p in self.predicted],
        }


class RowValue:
    """What a new adjacency-table row is worth beyond its step, learnt online: g = tokens accepted later from
    successors the table offered only because a verified but rejected node wrote its token's row, per such
    row written (Beta-style smoothing: `prior` tokens over `prior_rows` pseudo-rows; counts decay per step
    by `decay`, as the acceptance estimates). Verifying a node whose token has no row is worth g more than
    its own P(path accepted): the table is filled only from the logits of the nodes verified."""

    def __init__(self, prior: float, prior_rows: float, decay: float = 1.0) -> None:
        if prior < 0 or prior_rows <= 0 or not 0.0 < decay <= 1.0:
            raise ValueError(
                f"RowValue(prior={prior}, prior_rows={prior_rows}, decay={decay}): need prior >= 0, "
                "prior_rows > 0, decay in (0, 1]"
            )
        self.prior, self.prior_rows, self.decay = prior, prior_rows, decay
        self.credit = 0.0  # tokens accepted from rows that only exploration wrote
        self.rows = 0.0  # rows exploration wrote

    def gain(self) -> float:
        return (self.credit + self.prior * self.prior_rows) / (self.rows + self.prior_rows)

    def update(self, rows: int, credit: int) -> None:
        """One step: `rows` rows written by rejected nodes, `credit` accepted nodes drafted from such rows."""
        self.credit = self.credit * self.decay + credit
        self.rows = self.rows * self.decay + rows

    def state(self) -> dict[str, float]:
        return {"credit": self.credit, "rows": self.rows}

    def restore(self, state: dict[str, float]) -> None:
        self.credit, self.rows = float(state["credit"]), float(state["rows"])


# Upper bounds of the tree-size buckets `SizeOutcomes` counts steps in (the anchor included; past the last: the last).
SIZE_BUCKETS = (1, 4, 8, 12, 16, 24, 32, 64)


def size_bucket(size: int) -> int:
    for i, top in enumerate(SIZE_BUCKETS):
        if size <= top:
            return i
    return len(SIZE_BUCKETS) - 1


def prefix_accepted(accepted_nodes: list[int], k: int) -> int:
    """Drafted nodes the first k nodes of a best-first tree accept, greedy, given the whole tree's accepted
    path (root first): a path's nodes come in increasing order, so the prefix accepts the path's leading
    nodes below k."""
    n = 0
    for node in accepted_nodes[1:]:
        if node >= k:
            break
        n += 1
    return n


class SizeOutcomes:
    """The size rule's decisions against their outcomes (Sequoia §3.3's b* = argmax E[committed | b] / t(b)),
    per bucket of the verified size b: steps, Σ b, Σ predicted E[accepted | b] (P(path accepted) of the
    drafted nodes), Σ the row gains it added, Σ accepted, and the same for the tree's first half, the
    ⌈b/2⌉ nodes a smaller tree would have kept (accepted read off the greedy walk); with a cost curve Σ t(b)
    and Σ t(⌈b/2⌉). Larger trees are chosen where the estimates look high, so an estimate that is right on
    average can still overrate the steps it grows: this shows whether the second half paid for itself."""

    FIELDS = (
        "steps",
        "nodes",
        "predicted",
        "gains",
        "accepted",
        "half_nodes",
        "half_predicted",
        "half_accepted",
        "cost",
        "half_cost",
    )

    def __init__(self) -> None:
        self.sums = {f: [0.0] * len(SIZE_BUCKETS) for f in self.FIELDS}

    def add(
        self,
        values: list[float],
        gains: list[float],
        accepted_nodes: list[int],
        latency: Callable[[int], float] | None = None,
    ) -> None:
        """One verified tree: per node (anchor first) its predicted P(path accepted) and its row gain, in the
        tree's best-first order, and the accepted path (root first)."""
        b = len(values)
        half = (b + 1) // 2
        i = size_bucket(b)
        step = {
            "steps": 1,
            "nodes": b,
            "predicted": sum(values[1:]),
            "gains": sum(gains[1:]),
            "accepted": len(accepted_nodes) - 1,
            "half_nodes": half,
            "half_predicted": sum(values[1:half]),
            "half_accepted": prefix_accepted(accepted_nodes, half),
            "cost": latency(b) if latency is not None else 0.0,
            "half_cost": latency(half) if latency is not None else 0.0,
        }
        for f, v in step.items():
            self.sums[f][i] += v

    def as_stats(self) -> dict[str, list[float]]:
        out = {f"hw_size_{f}": [round(v, 6) for v in vals] for f, vals in self.sums.items()}
        return {"hw_size_buckets": list(SIZE_BUCKETS), **out}  # each bucket's largest size
