"""How a step's expansion is chosen (arXiv 2602.16994 §5): each action's expected accepted length Ê(a | x)
from the root features x, then the action of the best expected tokens per unit of cost,
(1 + Ê(a | x)) / t(nodes(a)), with t the step's latency curve (budget=auto) or, without one, per step
(the most accepted). Two estimators:

- `OnlineSelector` (training-free): decayed means of the exact E of every action contained in each verified
  tree (goose: `action_values`), per bin of the anchor's top proposal probability; an action never seen
  in a bin is not chosen, so the drafter explores on a fixed schedule (`StandSelectDrafter`).
- `TrainedSelector`: a small network trained offline on logged features and exact values
  (experiments.selector_data, experiments.train_selector), read from its JSON file (`model.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from baselines.stand_select.actions import Action
from baselines.stand_select.features import FEATURE_NAMES

TOP_BINS = (0.3, 0.6, 0.85)  # bins of q_root's top probability (the draft's confidence at the anchor)


def choose(estimates: dict[Action, float], latency: Callable[[int], float] | None, default: Action) -> Action:
    """The action of the best (1 + Ê) / t(nodes) (grid order breaks ties); `default` without estimates."""
    best, best_rate = default, -1.0
    for a, e in sorted(estimates.items()):
        rate = (1.0 + e) / (latency(a.nodes) if latency is not None else 1.0)
        if rate > best_rate:
            best, best_rate = a, rate
    return best


class OnlineSelector:
    """Ê(a | x): per bin of x's q_root top probability, decayed means of the exact values observed."""

    def __init__(self, actions: Sequence[Action], decay: float = 0.98) -> None:
        self.actions = tuple(actions)
        self.decay = decay
        self._sums = np.zeros((len(TOP_BINS) + 2, len(self.actions)))  # bin 0: the context unknown
        self._weights = np.zeros_like(self._sums)
        self._index = {a: i for i, a in enumerate(self.actions)}

    @staticmethod
    def bin_of(features: Sequence[float]) -> int:
        known, top = features[0], features[1]
        return 0 if not known else 1 + sum(top >= edge for edge in TOP_BINS)  # type: ignore[return-value]

    def estimates(self, features: Sequence[float]) -> dict[Action, float]:
        b = self.bin_of(features)
        seen = self._weights[b] > 0
        return {
            a: float(self._sums[b, i] / self._weights[b, i]) for i, a in enumerate(self.actions) if seen[i]
        }

    def learn(self, features: Sequence[float], values: dict[Action, float]) -> None:
        b = self.bin_of(features)
        self._sums[b] *= self.decay
        self._weights[b] *= self.decay
        for a, v in values.items():
            i = self._index[a]
            self._sums[b, i] += v
            self._weights[b, i] += 1.0


class TrainedSelector:
    """Ê(a | x) from a two-layer network (standardised x → GELU hidden → one output per action)."""

    def __init__(
        self,
        actions: Sequence[Action],
        mean: np.ndarray,
        std: np.ndarray,
        w1: np.ndarray,
        b1: np.ndarray,
        w2: np.ndarray,
        b2: np.ndarray,
    ) -> None:
        if w1.shape[1] != len(FEATURE_NAMES) or w2.shape[0] != len(actions):
            raise ValueError(
                f"selector weights of shape {w1.shape} -> {w2.shape} do not match {len(FEATURE_NAMES)} features "
                f"and {len(actions)} actions"
            )
        self.actions = tuple(actions)
        self.mean, self.std, self.w1, self.b1, self.w2, self.b2 = mean, std, w1, b1, w2, b2

    def predict(self, features: Sequence[float]) -> np.ndarray:
        x = (np.asarray(features, dtype=np.float64) - self.mean) / self.std
        h = self.w1 @ x + self.b1
        h = 0.5 * h * (1.0 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))  # GELU (tanh form)
        return self.w2 @ h + self.b2

    def estimates(self, features: Sequence[float]) -> dict[Action, float]:
        return {a: max(float(e), 0.0) for a, e in zip(self.actions, self.predict(features), strict=True)}

    def learn(self, features: Sequence[float], values: dict[Action, float]) -> None:
        """Trained offline: nothing learnt in the run."""
