"""budget=auto's cost curve corrected by the run's own steps (`budget_in_run_cost`, a harness extension).

The start-up calibration times each tree size a few times, back to back, after a synthetic 256-token cache;
a size rule that maximises E[committed | b] / t(b) over that curve favours the sizes whose few timings came
out low (the maximum of noisy estimates is biased toward their errors), and a real step also pays for a
longer cache and for the drafting between forwards. Here every measured forward gives a relative residual
e = t_obs / t(n) − 1 (at most `clip` either way). The run's drift ē is their decayed mean, counting the
calibration as w₀ steps of e = 0; each size's own correction r(n) = (Σ_n w e + w₀ ē) / (Σ_n w + w₀) shrinks
toward that drift, so a size not verified lately moves with the machine as the measured ones do, and the
size rule sees t(n) (1 + r(n)). Observations decay per step, as the acceptance counts do.
"""

from __future__ import annotations

import numpy as np


class InRunCost:
    """Relative corrections r(n) of the calibrated t(n) from the measured forwards."""

    def __init__(self, prior_weight: float = 5.0, decay: float = 1.0, clip: float = 1.0) -> None:
        if prior_weight <= 0:
            raise ValueError(f"prior_weight must be positive, got {prior_weight}")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        if clip <= 0:
            raise ValueError(f"clip must be positive, got {clip}")
        self.prior_weight = prior_weight
        self.decay = decay
        self.clip = clip  # one step counts at most `clip` × t(n) off the curve: a stalled step is not a price
        self.weight = np.zeros(0)
        self.total = np.zeros(0)

    def _grow(self, n: int) -> None:
        if n > self.weight.shape[0]:
            more = n - self.weight.shape[0]
            self.weight = np.concatenate([self.weight, np.zeros(more)])
            self.total = np.concatenate([self.total, np.zeros(more)])

    def observe(self, n: int, seconds: float, predicted: float) -> None:
        """A forward of n nodes took `seconds` where the curve said `predicted`; every size ages one step."""
        if n < 1:
            raise ValueError(f"a step verifies at least one node, got {n}")
        if predicted <= 0:
            raise ValueError(f"the curve's t({n}) must be positive, got {predicted}")
        self._grow(n)
        self.weight *= self.decay
        self.total *= self.decay
        self.weight[n - 1] += 1.0
        self.total[n - 1] += min(max(seconds / predicted - 1.0, -self.clip), self.clip)

    def drift(self) -> float:
        """ē: the decayed mean relative residual over every size, shrunk toward 0 by w₀."""
        return float(self.total.sum() / (self.weight.sum() + self.prior_weight))

    def corrections(self, n: int) -> np.ndarray:
        """r(1..n): t(n) is multiplied by 1 + r(n)."""
        self._grow(n)
        w0 = self.prior_weight
        return (self.total[:n] + w0 * self.drift()) / (self.weight[:n] + w0)

    def steps_seen(self, n: int) -> np.ndarray:
        """Decayed counts of measured forwards per size 1..n (how much each r(n) is its own)."""
        self._grow(n)
        return self.weight[:n].copy()
