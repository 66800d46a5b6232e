"""Sampling (temperature > 0): the warp AR applies, the target's noise, and two tree verifiers that keep the
output distribution exactly the target's (the paper is greedy only; docs/paper.md).

Warp as `transformers`: logits / T, top-k, top-p; p is the result. The target's noise is Gumbel noise g_t
keyed by (seed, position t), so AR draws argmax(log p + g_t). Deterministic drafts use sample-and-match:
node i draws with the noise of the position it predicts and is accepted when it equals its parent's draw;
the accepted path sees the committed context, so the output equals AR's with the same seed, and P(reach v)
= p(path(v)), the most any lossless verifier gets. Sampled drafts (STAND) are verified by the walk that
`SamplingParams.verifier` names (goose.engine.core.verify): by default multi-candidate recursive rejection
sampling (SpecTr / RSD) without replacement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from goose.engine.core.verify.rules import VERIFIERS
from goose.validation import check_choice, check_float, check_int


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings (config group `sampling`): T = 0 is greedy; top_k = 0 and top_p = 1 disable those;
    `verifier`: how drafts that carry their proposal q are verified (goose.engine.core.verify.rules)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    verifier: str = "auto"

    def __post_init__(self) -> None:
        check_float("sampling.temperature", self.temperature, low=0.0, why="0 = greedy decoding")
        check_float("sampling.top_p", self.top_p, low=0.0, high=1.0, why="nucleus mass; 1 = off")
        if self.top_p <= 0.0:
            raise ValueError(
                f"sampling.top_p = {self.top_p!r}: must be a number in (0, 1] (nucleus mass; 1 = off)"
            )
        check_int("sampling.top_k", self.top_k, low=0, why="0 = off")
        check_choice("sampling.verifier", self.verifier, VERIFIERS, why="auto = rejection sampling")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "temperature": float(self.temperature),
            "top_p": float(self.top_p),
            "top_k": int(self.top_k),
            "verifier": self.verifier,
        }


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

    def step_uniform(self, first_position: int, index: int) -> float:
        """u in (0, 1) of the index-th test of the step whose first drafted position is `first_position`
        (strictly increasing per sequence, so never reused; VERIFY.md "Randomness")."""
        return (derive_seed(self.seed, "decide", first_position, index) + 0.5) / float(1 << 63)


def sample_and_match(scores: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets, draws) per node: draws = argmax(scores + noise); a child is accepted if it equals its
    parent's draw. Separate so that a test can swap in a wrong verifier.
    """
    draws = (scores + noise).argmax(dim=-1)
    return draws, draws
