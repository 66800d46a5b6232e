"""This request's calibration of hw_tree's acceptance estimates (Sequoia's size rule, arXiv 2402.12374 §3.3,
fed estimates that follow the prompt at hand).

The estimator's rates are learnt over the whole run (baselines.hw_tree.acceptance), so they carry the last
prompts' acceptance into a prompt of another kind: after a prompt that copies its input, a prose prompt's
trees are sized for acceptance it does not have, and the per-cell counts take most of a prompt to follow.
c = (A + m) / (P + m) rescales them within a few steps: A the drafted nodes verification accepted, P the
estimator's Σ P(path accepted) of the same nodes, both decayed by `decay` per verified tree and reset when a
request begins, m (`prior_nodes`) pseudo-nodes at c = 1, c clipped to [1 / CLIP, CLIP]. The size rule
weighs a node by min(1, c·q) (baselines.hw_tree.pool.scaled). c depends only on verified outcomes and
changes only which tree is drafted, so verification stays lossless as for any tree.
"""

from __future__ import annotations

CLIP = 4.0  # c stays within [1/4, 4]: a handful of steps cannot make a node free or worthless


class RequestScale:
    """c, this request's accepted over predicted drafted nodes (module docstring)."""

    def __init__(self, prior_nodes: float, decay: float) -> None:
        if not prior_nodes > 0:
            raise ValueError(f"RequestScale: prior_nodes = {prior_nodes}: must be > 0")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"RequestScale: decay = {decay}: must be in (0, 1]")
        self.prior_nodes, self.decay = float(prior_nodes), float(decay)
        self.accepted = 0.0
        self.predicted = 0.0

    def begin(self) -> None:
        """A new request: no evidence yet, c = 1."""
        self.accepted = self.predicted = 0.0

    def observe(self, predicted: float, accepted: int) -> None:
        """One verified tree: Σ P(path accepted) the estimator gave its drafted nodes, and how many of them
        verification accepted."""
        if predicted < 0 or accepted < 0:
            raise ValueError(f"RequestScale.observe({predicted}, {accepted}): both must be >= 0")
        self.accepted = self.accepted * self.decay + accepted
        self.predicted = self.predicted * self.decay + predicted

    def scale(self) -> float:
        m = self.prior_nodes
        c = (self.accepted + m) / (self.predicted + m)
        return min(max(c, 1.0 / CLIP), CLIP)
