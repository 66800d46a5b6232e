"""Sampling (temperature > 0): the warp AR applies, the target's noise, and two tree verifiers that keep the
output distribution exactly the target's (the paper is greedy only; docs/paper.md).

Warp as `transformers`: logits / T, top-k, top-p; p is the result. The target's noise is Gumbel noise g_t
keyed by (seed, position t), so AR draws argmax(log p + g_t). Deterministic drafts use sample-and-match:
node i draws with the noise of the position it predicts and is accepted when it equals its parent's draw;
the accepted path sees the committed context, so the output equals AR's with the same seed, and P(reach v)
= p(path(v)), the most any lossless verifier gets. Sampled drafts (STAND) use multi-candidate recursive
rejection sampling (SpecTr / RSD) without replacement.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from goose.validation import check_float, check_int


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings (config group `sampling`): T = 0 is greedy; top_k = 0 and top_p = 1 disable those."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        check_float("sampling.temperature", self.temperature, low=0.0, why="0 = greedy decoding")
        check_float("sampling.top_p", self.top_p, low=0.0, high=1.0, why="nucleus mass; 1 = off")
        if self.top_p <= 0.0:
            raise ValueError(
                f"sampling.top_p = {self.top_p!r}: must be a number in (0, 1] (nucleus mass; 1 = off)"
            )
        check_int("sampling.top_k", self.top_k, low=0, why="0 = off")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {"temperature": float(self.temperature), "top_p": float(self.top_p), "top_k": int(self.top_k)}


GREEDY = SamplingParams()


def derive_seed(*parts: object) -> int:
    """A 63-bit seed hashed from any parts: unrelated streams for nearby inputs, stable across platforms."""
    blob = "\x1f".join(repr(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little") >> 1


def warp_scores(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """fp32 scores [n, V] whose softmax is p; -inf outside top-k / top-p, unnormalised."""
    scores = logits.float() / params.temperature
    vocab = scores.shape[-1]
    if 0 < params.top_k < vocab:
        kth = torch.topk(scores, params.top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        probs = sorted_scores.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # mass of the strictly more likely tokens
        drop_sorted = mass_before >= params.top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


class TargetNoise:
    """Position-keyed noise of one sequence: Gumbel rows g_t of (seed, t), and uniforms u(t, rank)."""

    def __init__(self, seed: int, vocab: int, device: torch.device | str) -> None:
        self.seed = int(seed)
        self.vocab = int(vocab)
        self.device = torch.device(device)
        self._rows: dict[int, torch.Tensor] = {}
        self._generator = torch.Generator(device=self.device)

    def row(self, position: int) -> torch.Tensor:
        cached = self._rows.get(position)
        if cached is None:
            self._generator.manual_seed(derive_seed(self.seed, "gumbel", position))
            u = torch.rand(self.vocab, generator=self._generator, device=self.device, dtype=torch.float32)
            cached = u.clamp_(min=torch.finfo(torch.float32).tiny).log_().neg_().log_().neg_()
            self._rows[position] = cached
        return cached

    def rows(self, first: int, count: int) -> torch.Tensor:
        """[count, V]: g_first … g_{first+count−1}; earlier rows are forgotten."""
        for old in [t for t in self._rows if t < first]:
            del self._rows[old]
        return torch.stack([self.row(first + j) for j in range(count)])

    def uniform(self, position: int, rank: int) -> float:
        """u(t, rank) in (0, 1): the acceptance uniform of the rank-th sibling at position t."""
        return (derive_seed(self.seed, "accept", position, rank) + 0.5) / float(1 << 63)


def sample_and_match(scores: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets, draws) per node: draws = argmax(scores + noise); a child is accepted if it equals its
    parent's draw. Separate so that a test can swap in a wrong verifier.
    """
    draws = (scores + noise).argmax(dim=-1)
    return draws, draws


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


def _normalised(q: dict[int, float]) -> dict[int, float]:
    total = sum(q.values())
    return {x: v / total for x, v in q.items() if v > 0.0} if total > 0.0 else {}


def rejection_walk(
    children: Sequence[Sequence[int]],
    tokens: Sequence[int],
    proposals: Sequence[object],
    inputs: RejectionInputs,
    uniform,
    first_position: int,
    depths: Sequence[int],
) -> tuple[list[int], int]:
    """Multi-candidate recursive rejection sampling down the tree: (accepted path, bonus token). proposals[u]
    is the q_u that u's children were drawn from, or None (q = δ).
    """
    u, path = 0, [0]
    while True:
        position = first_position + depths[u]
        cands = inputs.candidates[u]
        residual = dict(zip(cands, inputs.p[u], strict=True))  # p_i on C_u, unnormalised
        outside_mass = max(0.0, 1.0 - sum(residual.values()))
        outside_scale = 1.0  # p_i(x) = p_u(x) * outside_scale / total for x outside C_u
        total = sum(residual.values()) + outside_mass
        proposal = proposals[u]
        q = _normalised(dict(zip(proposal[0], proposal[1], strict=True))) if proposal is not None else None
        accepted = -1
        for rank, child in enumerate(children[u]):
            c = tokens[child]
            p_c = residual.get(c, 0.0) / total if total > 0.0 else 0.0
            q_c = 1.0 if q is None else q.get(c, 0.0)
            if q_c > 0.0 and uniform(position, rank) * q_c < p_c:
                accepted = child
                break
            if q is None:  # q = δ_c: the residual is p without c
                residual[c] = 0.0
            else:
                residual = {x: max(v / total - q.get(x, 0.0), 0.0) for x, v in residual.items()}
                outside_scale /= total
                q.pop(c, None)
                q = _normalised(q)
            total = sum(residual.values()) + outside_mass * outside_scale
        if accepted < 0:
            return path, _residual_draw(residual, inputs, u, outside_mass * outside_scale, outside_scale)
        path.append(accepted)
        u = accepted


def _residual_draw(
    residual: dict[int, float], inputs: RejectionInputs, u: int, outside_mass: float, outside_scale: float
) -> int:
    """Gumbel-max over the residual: reweighted on C_u, p_u · outside_scale elsewhere."""
    best_token, best_value = -1, -math.inf
    if outside_mass > 0.0 and inputs.outside_value[u] > -math.inf:
        best_token, best_value = inputs.outside_token[u], inputs.outside_value[u] + math.log(outside_scale)
    for x, g in zip(inputs.candidates[u], inputs.g[u], strict=True):
        mass = residual.get(x, 0.0)
        if mass > 0.0 and math.log(mass) + g > best_value:
            best_token, best_value = x, math.log(mass) + g
    if best_token < 0:  # numerically empty residual: fall back to the most likely candidate
        best_token = max(inputs.candidates[u], key=lambda x: residual.get(x, 0.0))
    return best_token
