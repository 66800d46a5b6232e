"""Online estimates of what verification accepts, shared by budget=auto's size rule and the drafters that
value nodes by it (OPT-Tree, hw_tree).

r = P(node accepted | parent accepted) per cell, learnt from verified trees: a node whose parent was on the
accepted path was reached; reached and accepted counts are Beta-smoothed toward a prior. Counts may decay
every step (discounted Beta-Bernoulli, Garivier & Moulines 2011), so a cell that stops being seen returns to
its prior instead of keeping a few early failures for good (tests/engine/test_auto_budget.py).
`DecayedCounts` is the counting and forgetting; `AcceptanceModel` the cells (source, depth, sibling rank) and
prior of budget=auto and OPT-Tree; hw_tree keeps its own cells and two-level prior on the same counts. The
prior is set by hand unless a calibrated one is given (goose.engine.core.acceptance_prior: made offline on
prompts the protocol does not use, so that a fresh process's first prompt is sized as a learnt run's).
"""

from __future__ import annotations

import numpy as np

from goose.engine.core.acceptance_prior import HAND, PriorTable
from goose.engine.core.tree import SPINE, DraftTree

MAX_DEPTH_BUCKET = 16
MAX_RANK_BUCKET = 8
NUM_SOURCES = 8  # source labels are small ints (ROOT, SPINE, BRANCH, baselines' own)

Keys = tuple[np.ndarray, np.ndarray, np.ndarray]  # (source, depth bucket, rank bucket) per drafted node


class DecayedCounts:
    """Per cell of an array of `shape`: nodes reached (parent accepted) and nodes accepted, both multiplied by
    `decay` at each `age` (1.0: never forgotten)."""

    def __init__(self, shape: tuple[int, ...], decay: float = 1.0) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay = {decay}: must be in (0, 1]")
        self.decay = decay
        self.reached = np.zeros(shape)
        self.accepted = np.zeros(shape)
        self.total_reached: np.ndarray | None = None  # see `keep_totals`
        self.total_accepted: np.ndarray | None = None

    def keep_totals(self) -> None:
        """From now on also count every observation into `total_reached` / `total_accepted`, never decayed nor
        halved: the evidence a calibration run writes into a prior file (experiments/calibrate_priors.py;
        decayed counts at a run's end hold mostly its last prompt)."""
        self.total_reached = np.zeros_like(self.reached)
        self.total_accepted = np.zeros_like(self.accepted)

    def age(self) -> None:
        """One step passes: every count is multiplied by `decay`."""
        if self.decay < 1.0:
            self.reached *= self.decay
            self.accepted *= self.decay

    def add(self, reached: tuple[np.ndarray, ...], accepted: tuple[np.ndarray, ...]) -> None:
        """One count per listed cell (index arrays, a cell listed twice counts twice), in order."""
        np.add.at(self.reached, reached, 1.0)
        np.add.at(self.accepted, accepted, 1.0)
        if self.total_reached is not None and self.total_accepted is not None:
            np.add.at(self.total_reached, reached, 1.0)
            np.add.at(self.total_accepted, accepted, 1.0)


class AcceptanceModel(DecayedCounts):
    """r(key) = P(node accepted | parent accepted) per (source, depth, sibling rank), Beta-smoothed: by hand,
    prior `spine_prior` for the spine, `branch_prior` / (rank + 1) otherwise, worth `prior_strength`
    observations; with a calibrated `prior` (goose.engine.core.acceptance_prior.load_prior(model,
    "auto_budget" or "opt_tree", method)) its mean and strength where it has them, the hand prior elsewhere;
    `prior_name` says which ran ("hand" or the prior's name). A cell reached more than `cap` times has both
    counts halved."""

    SHAPE = (NUM_SOURCES, MAX_DEPTH_BUCKET + 1, MAX_RANK_BUCKET + 1)

    def __init__(
        self,
        prior_strength: float = 2.0,
        spine_prior: float = 0.6,
        branch_prior: float = 0.35,
        cap: float = 256.0,
        decay: float = 1.0,
        prior: PriorTable | None = None,
    ):
        if prior_strength <= 0 or cap <= 0:
            raise ValueError("prior_strength and cap must be positive")
        super().__init__(self.SHAPE, decay)
        mean: np.ndarray = self.hand_prior(spine_prior, branch_prior)
        strength: np.ndarray | float = prior_strength
        self.prior_name = HAND
        if prior is not None:
            mean, strength = prior.over(mean, prior_strength)
            self.prior_name = prior.name
        self.prior_alpha = mean * strength
        self.prior_beta = (1.0 - mean) * strength
        self.cap = cap

    @classmethod
    def hand_prior(cls, spine_prior: float = 0.6, branch_prior: float = 0.35) -> np.ndarray:
        """The hand prior's mean per cell: `spine_prior` for the spine, `branch_prior` / (rank + 1) otherwise."""
        ranks = np.arange(MAX_RANK_BUCKET + 1, dtype=np.float64)
        prior = np.broadcast_to(branch_prior / (ranks + 1.0), cls.SHAPE).copy()
        prior[SPINE] = spine_prior
        return prior

    def cell_prior(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, strength) per cell of the prior the counts are smoothed toward."""
        strength = self.prior_alpha + self.prior_beta
        return self.prior_alpha / strength, strength

    def keys(self, tree: DraftTree) -> Keys:
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
    def bucket_keys(sources: list[int], depths: list[int], ranks: list[int]) -> Keys:
        """Cell keys from given sources, depths and sibling ranks, for a drafter that ranks siblings its own
        way (baselines.opt_tree).
        """
        src = np.minimum(np.asarray(sources, dtype=np.int64), NUM_SOURCES - 1)
        depth = np.minimum(np.asarray(depths, dtype=np.int64), MAX_DEPTH_BUCKET)
        rk = np.minimum(np.asarray(ranks, dtype=np.int64), MAX_RANK_BUCKET)
        return src, depth, rk

    def rates(self, keys: Keys) -> np.ndarray:
        a = self.accepted[keys] + self.prior_alpha[keys]
        return a / (self.reached[keys] + self.prior_alpha[keys] + self.prior_beta[keys])

    def rate_table(self) -> np.ndarray:
        """r of every cell as one array, for a drafter that looks rates up while it builds a tree."""
        return (self.accepted + self.prior_alpha) / (self.reached + self.prior_alpha + self.prior_beta)

    def path_probabilities(self, tree: DraftTree, keys: Keys) -> list[float]:
        """q_i for i = 0..n-1 (q_0 = 1): product of r along the path."""
        r = self.rates(keys).tolist()
        q = [1.0] * len(tree)
        parents = tree.parents
        for i in range(1, len(tree)):
            q[i] = q[parents[i]] * r[i - 1]
        return q

    def update(self, tree: DraftTree, keys: Keys, accepted_nodes: list[int]) -> None:
        """Count one verified tree (`keys` of its nodes 1..n-1, its accepted path root first)."""
        on_path = np.zeros(len(tree), dtype=bool)
        on_path[accepted_nodes] = True
        reached = on_path[np.asarray(tree.parents[1:], dtype=np.int64)]
        hit = on_path[1:]
        self.add(tuple(k[reached] for k in keys), tuple(k[hit] for k in keys))
        full = self.reached > self.cap
        if full.any():
            self.reached[full] *= 0.5
            self.accepted[full] *= 0.5
