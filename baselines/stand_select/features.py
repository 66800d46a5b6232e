"""What a selector sees before drafting a step (arXiv 2602.16994 §5 uses the root level only, since the
expansion is chosen before any draw): the draft's proposal at the anchor q_root (known to the n-gram table or
not, its top probability, its entropy, its support), what the last verification said at the node its walk
stopped at (p's mass on q's support, the overlap Σ min(p, q) = one draw's acceptance probability), the last
step's accepted length and a decayed mean of it, and the sampling settings. Nothing here reads the step's
own draws: a choice made from it keeps every verifier exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from goose.engine.core.verify.view import SampledTree

FEATURE_NAMES = (
    "q_root_known",
    "q_root_top",
    "q_root_entropy",
    "q_root_support",
    "p_last_on_q",
    "overlap_last",
    "accepted_last",
    "accepted_mean",
    "temperature",
    "top_p",
)


@dataclass
class LastStep:
    """What the last verified step left: p's mass on q's support and the overlap at the node its walk stopped
    at (0 where that node drew nothing), its accepted length, a decayed mean of accepted lengths."""

    p_on_q: float = 0.0
    overlap: float = 0.0
    accepted: float = 0.0
    accepted_mean: float = 0.0

    def observe(self, view: SampledTree | None, path: Sequence[int], decay: float) -> None:
        accepted = len(path) - 1
        self.accepted = float(accepted)
        self.accepted_mean = decay * self.accepted_mean + (1.0 - decay) * accepted
        self.p_on_q = self.overlap = 0.0
        if view is None:
            return
        u = path[-1]
        q = view.q(u) if view.proposals[u] is not None else {}
        if not q:
            return
        dist = view.target[u]
        total = dist.total()
        self.p_on_q = sum(dist.prob(x, total) for x in q)
        self.overlap = sum(min(dist.prob(x, total), qx) for x, qx in q.items())


def root_features(
    q_root: Sequence[float] | None, last: LastStep, temperature: float, top_p: float
) -> list[float]:
    """The feature vector (FEATURE_NAMES' order) of a step whose anchor's proposal is `q_root` (None: the
    table does not know the context)."""
    if q_root is None:
        known, top, entropy, support = 0.0, 0.0, 0.0, 0.0
    else:
        positive = [x for x in q_root if x > 0.0]
        known, top = 1.0, max(positive)
        entropy = -sum(x * math.log(x) for x in positive)
        support = math.log1p(len(positive))
    return [
        known,
        top,
        entropy,
        support,
        last.p_on_q,
        last.overlap,
        last.accepted,
        last.accepted_mean,
        temperature,
        top_p,
    ]
