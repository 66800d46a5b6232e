"""What every sampled-draft verifier reads from the step's one host sync, and the two random primitives they
share (VERIFY.md §8.2). At node u: the candidates C_u (u's children, then the rest of supp q_u), the warped
target p_u and the Gumbel noise g_u on C_u, and the best log p_u + g_u outside C_u. Outside C_u every
residual the verifiers form stays proportional to p_u, since q_u is zero there, so one scale per node says
all about it: a `Dist` is (mass on C_u, the outside mass of p_u, that scale).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass
class RejectionInputs:
    """Per node u, for the host walk: candidates C_u, p_u and g_u on them, and the best outside C_u."""

    candidates: list[list[int]]
    p: list[list[float]]
    g: list[list[float]]
    outside_token: list[int]
    outside_value: list[float]  # max over x not in C_u of log p_u(x) + g_u(x)


def candidate_sets(children_tokens: Sequence[Sequence[int]], proposals: Sequence[object]) -> list[list[int]]:
    """C_u = the tokens of u's children, then the rest of its proposal's support (no repeats)."""
    out: list[list[int]] = []
    for kids, proposal in zip(children_tokens, proposals, strict=True):
        seen = dict.fromkeys(kids)
        if proposal is not None:
            seen.update(dict.fromkeys(proposal[0]))
        out.append(list(seen))
    return out


def rejection_tensors(
    scores: torch.Tensor, noise: torch.Tensor, candidates: list[list[int]]
) -> tuple[torch.Tensor, int]:
    """Device side of `RejectionInputs`, one flat float64 tensor (K = max |C_u|) and K."""
    n, vocab = scores.shape
    k = max(1, max(len(c) for c in candidates))
    padded = [c + [vocab] * (k - len(c)) for c in candidates]  # column V: a -inf dummy
    cand = torch.tensor(padded, dtype=torch.long, device=scores.device)
    logp = torch.log_softmax(scores, dim=-1)
    minus_inf = torch.full((n, 1), float("-inf"), device=scores.device)
    logp_x = torch.cat([logp, minus_inf], dim=1)
    noise_x = torch.cat([noise, torch.zeros((n, 1), device=scores.device)], dim=1)
    p_c = logp_x.gather(1, cand).exp()
    g_c = noise_x.gather(1, cand)
    outside = (logp_x + noise_x).scatter(1, cand, float("-inf"))[:, :vocab]
    best = outside.argmax(dim=-1)
    best_value = outside.gather(1, best[:, None])[:, 0]
    flat = torch.cat([p_c.flatten(), g_c.flatten(), best.double(), best_value.double()]).double()
    return flat, k


def unpack_rejection(values: list[float], candidates: list[list[int]], k: int) -> RejectionInputs:
    n = len(candidates)
    p_all, g_all = values[: n * k], values[n * k : 2 * n * k]
    best, best_value = values[2 * n * k : 2 * n * k + n], values[2 * n * k + n : 2 * n * k + 2 * n]
    return RejectionInputs(
        candidates=candidates,
        p=[p_all[i * k : i * k + len(c)] for i, c in enumerate(candidates)],
        g=[g_all[i * k : i * k + len(c)] for i, c in enumerate(candidates)],
        outside_token=[int(t) for t in best],
        outside_value=list(best_value),
    )


@dataclass
class Dist:
    """An unnormalised distribution at one node: `inside` on C_u; outside C_u, p_u times `scale`
    (`base_outside` = p_u's mass there)."""

    inside: dict[int, float]
    base_outside: float
    scale: float = 1.0

    @classmethod
    def target(cls, candidates: Sequence[int], p: Sequence[float]) -> Dist:
        inside = dict(zip(candidates, p, strict=True))
        return cls(inside, max(0.0, 1.0 - sum(inside.values())))

    @property
    def outside(self) -> float:
        return self.base_outside * self.scale

    def total(self) -> float:
        return sum(self.inside.values()) + self.outside

    def prob(self, x: int, total: float | None = None) -> float:
        """The normalised probability of candidate x (0 for a token outside C_u)."""
        t = self.total() if total is None else total
        return self.inside.get(x, 0.0) / t if t > 0.0 else 0.0

    def residual(self, q: dict[int, float], w: float = 1.0) -> Dist:
        """(w·P − Q)+ with P = this distribution normalised and Q a normalised proposal on C_u."""
        total = self.total()
        if total <= 0.0:
            return Dist({x: 0.0 for x in self.inside}, self.base_outside, 0.0)
        inside = {x: max(w * v / total - q.get(x, 0.0), 0.0) for x, v in self.inside.items()}
        return Dist(inside, self.base_outside, self.scale * w / total)


def normalised(q: dict[int, float]) -> dict[int, float]:
    """q / Σq without its zero entries ({} if empty)."""
    total = sum(q.values())
    return {x: v / total for x, v in q.items() if v > 0.0} if total > 0.0 else {}


class Decisions(Protocol):
    """The verifiers' randomness: `accept(num, den, node, rank)` is U·den < num for a fresh uniform U
    (probability min(1, num/den)); `draw(node, dist)` samples a token from `dist` at `node`. The exact
    enumeration test replaces both with branching over every outcome."""

    def accept(self, num: float, den: float, node: int, rank: int) -> bool: ...

    def draw(self, node: int, dist: Dist) -> int: ...


class NoiseDecisions:
    """Decisions from the target's noise: Gumbel-max over the step's position-keyed rows for `draw`; for
    `accept`, u(P_step + depth(node), rank) (`keyed="position"`: rejection sampling, which only tests nodes on
    the accepted path) or u(P_step, j) for the step's j-th test (`keyed="step"`: Block, Traversal and GBV test
    nodes beyond the accepted one, whose positions a later step reuses; VERIFY.md "Randomness")."""

    def __init__(
        self,
        inputs: RejectionInputs,
        uniform: Callable[[int, int], float],
        first_position: int,
        depths: Sequence[int],
        keyed: str = "position",
        step_uniform: Callable[[int, int], float] | None = None,
    ) -> None:
        if keyed not in ("position", "step") or (keyed == "step" and step_uniform is None):
            raise ValueError(f"keyed = {keyed!r}: must be position, or step with a step_uniform")
        self.inputs, self.uniform, self.first, self.depths = inputs, uniform, first_position, depths
        self.keyed, self.step_uniform, self.tests = keyed, step_uniform, 0

    def accept(self, num: float, den: float, node: int, rank: int) -> bool:
        if self.keyed == "position":
            u = self.uniform(self.first + self.depths[node], rank)
        else:
            u = self.step_uniform(self.first, self.tests)
            self.tests += 1
        return u * den < num

    def draw(self, node: int, dist: Dist) -> int:
        return gumbel_draw(self.inputs, node, dist)


def gumbel_draw(inputs: RejectionInputs, u: int, dist: Dist) -> int:
    """Gumbel-max over `dist` at node u: its mass on C_u, p_u · scale elsewhere."""
    best_token, best_value = -1, -math.inf
    if dist.outside > 0.0 and inputs.outside_value[u] > -math.inf:
        best_token, best_value = inputs.outside_token[u], inputs.outside_value[u] + math.log(dist.scale)
    for x, g in zip(inputs.candidates[u], inputs.g[u], strict=True):
        mass = dist.inside.get(x, 0.0)
        if mass > 0.0 and math.log(mass) + g > best_value:
            best_token, best_value = x, math.log(mass) + g
    if best_token < 0:  # numerically empty residual: fall back to the most likely candidate
        best_token = max(inputs.candidates[u], key=lambda x: dist.inside.get(x, 0.0))
    return best_token
