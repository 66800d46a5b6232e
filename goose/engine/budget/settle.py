"""Robust timings: when a size's samples are enough, and what t(n) is made of them (`SettleRule`).

Two fresh processes on one machine do not time a step alike: a burst of
other work (another process, a page-cache flush) slows a few steps several-fold, and the first timed round
after the warm-up is sometimes still slow. Each size's samples farther than k·σ̂ from their median
(σ̂ = 1.4826·MAD, the normal-consistent MAD, floored at `floor` of the median so that sub-percent jitter is
never an outlier) are dropped and t(n) is the median of the rest (`inliers`); a size keeps being timed in
extra rounds (round robin over the unsettled sizes only) until it has `repeats` inliers and its median's
relative standard error (1.2533·σ̂/√m, `median_error`) is at most `target`, bounded by `max_rounds` rounds
and by extra time of at most `extra_time` × the first `repeats` rounds' steps; a size whose error could
not reach the target within `max_rounds` samples (`hopeless`: the machine is busy) is not retimed. Why
this rule: the median of 5 already outvotes two bad rounds, but an outlier still shifts it by one rank,
and a size whose timings are somewhat broad is where the curves of two processes part; more samples of
that size (not of every size) fix it, and dropping outliers before the median keeps a burst from moving
it. On a quiet machine most sizes settle in their first `repeats` rounds and the rest within a few more,
so the start-up cost stays about the same; on a busy one the broad sizes are given up (marked
`unsettled`) instead of doubling the start-up. What no rule within one process removes is a shift of the
whole curve between processes (a few per cent on a 2-core CPU: memory placement, the machine's load over
the whole calibration), nor the slowness of a calibration on a machine that other work keeps busy:
budget=auto therefore reuses one settled curve per machine (`goose.engine.budget.latency_cache`).
`experiments/calibration_spread.py` measures the spread under both rules.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MAD_TO_SIGMA = 1.4826  # σ of a normal distribution per unit of its median absolute deviation
MEDIAN_SE = 1.2533  # the standard error of a normal sample's median per σ/√m (√(π/2))


def _mad(xs: Sequence[float], centre: float) -> float:
    return statistics.median(abs(x - centre) for x in xs)


def inliers(samples: Sequence[float], k: float = 3.0, floor: float = 0.01) -> list[float]:
    """`samples` without the outliers: those farther than k·σ̂ from their median, σ̂ = 1.4826·MAD but at
    least `floor` × the median (so that jitter below that is never an outlier; also when MAD = 0)."""
    if not samples:
        return []
    med = statistics.median(samples)
    scale = max(MAD_TO_SIGMA * _mad(samples, med), floor * abs(med))
    return [x for x in samples if abs(x - med) <= k * scale]


def median_error(samples: Sequence[float]) -> float:
    """The relative standard error of the median of `samples`: 1.2533·σ̂/√m / median, σ̂ = 1.4826·MAD
    (0 for one sample; inf for an empty list or a median of 0)."""
    if not samples:
        return math.inf
    med = statistics.median(samples)
    if med == 0:
        return math.inf
    return MEDIAN_SE * MAD_TO_SIGMA * _mad(samples, med) / math.sqrt(len(samples)) / abs(med)


@dataclass(frozen=True)
class SettleRule:
    """When a size's timings are enough, and what t(n) is made of them (module docstring): outliers beyond `k`·σ̂ of the median dropped (σ̂ floored at `floor` of the median); a size is
    settled once it has `repeats` inliers and its median's relative standard error is at most `target`;
    a size that could not settle within `max_rounds` rounds at its error (`hopeless`) is not timed again;
    extra rounds stop at `max_rounds` rounds per size or when they would exceed `extra_time` × the time of
    the first `repeats` rounds' steps."""

    k: float = 3.0
    floor: float = 0.01
    target: float = 0.015
    max_rounds: int = 15
    extra_time: float = 1.0

    def __post_init__(self) -> None:
        if not (self.k > 0 and self.floor >= 0 and self.target > 0 and self.max_rounds >= 1):
            raise ValueError(f"SettleRule needs k > 0, floor >= 0, target > 0, max_rounds >= 1: {self}")
        if self.extra_time < 0:
            raise ValueError(f"SettleRule.extra_time = {self.extra_time}: must be >= 0")

    def kept(self, samples: Sequence[float]) -> list[float]:
        return inliers(samples, self.k, self.floor)

    def estimate(self, samples: Sequence[float]) -> float:
        """t(n) from one size's samples: the median of the inliers."""
        return statistics.median(self.kept(samples))

    def settled(self, samples: Sequence[float], repeats: int) -> bool:
        kept = self.kept(samples)
        return len(kept) >= repeats and median_error(kept) <= self.target

    def hopeless(self, samples: Sequence[float]) -> bool:
        """Whether the median's error, falling as 1/√m, would reach `target` only past `max_rounds`
        samples (m·(error / target)² of them): timings that broad come from a busy machine, and more
        rounds would only lengthen the start-up."""
        kept = self.kept(samples)
        return len(kept) * (median_error(kept) / self.target) ** 2 > self.max_rounds


ROBUST = SettleRule()
