"""The self-draft's proposal q and its skip-set search (SWIFT, Xia et al., ICLR 2025, arXiv 2410.06916).

q at a node = the target's warp (`warp_scores`) of the skipped forward's logits, cut to its `top_k` most
likely tokens and renormalised; drafts are drawn from exactly that q, so rejection sampling stays exact.

The skip set is chosen per prompt by SWIFT's "matchness": the share of a window of the prompt's last tokens
at which the skipped forward's argmax, run teacher-forced over the window, equals the full model's (from the
prefill logits). Candidates: SWIFT's initial set (odd layers first), then random m-subsets and one-swap
mutations of the best so far, m = int(2 (L − 2) · skip_ratio); the first and last layers are never skipped.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from goose.engine.core.backend import SkipSet
from goose.engine.core.draft_forward import DraftForward
from goose.engine.core.sampling import SamplingParams, warp_scores

Proposal = tuple[tuple[int, ...], tuple[float, ...]]
SubLayer = tuple[str, int]  # ("attention" | "mlp", layer index)


def truncated_proposals(logits: torch.Tensor, sampling: SamplingParams, top_k: int) -> list[Proposal]:
    """Per row of `logits` [k, V]: (token ids, probabilities) of q, the warped logits cut to the top_k most
    likely tokens and renormalised (zero-probability tokens dropped), most likely first. T = 0 scores with
    T = 1 (q then only orders the drafts and sets the confidence stop). One host transfer."""
    scores = logits.float() if sampling.greedy else warp_scores(logits, sampling)
    values, ids = torch.topk(scores, min(top_k, scores.shape[-1]), dim=-1)
    probs = torch.softmax(values.double(), dim=-1)
    out: list[Proposal] = []
    for row_ids, row_probs in zip(ids.tolist(), probs.tolist(), strict=True):
        kept = [(t, p) for t, p in zip(row_ids, row_probs, strict=True) if p > 0.0]
        total = sum(p for _, p in kept)
        out.append((tuple(t for t, _ in kept), tuple(p / total for _, p in kept)))
    return out


def sample_index(probs: Sequence[float], rng: random.Random) -> int:
    """An index drawn from `probs` (summing to 1) by inverse CDF."""
    u = rng.random() * sum(probs)
    acc = 0.0
    for i, p in enumerate(probs):
        acc += p
        if u < acc and p > 0.0:
            return i
    return max(i for i, p in enumerate(probs) if p > 0.0)


def skippable(num_layers: int) -> list[SubLayer]:
    """Every sub-layer that may be skipped: attention and MLP of layers 1..L-2, odd layers first (SWIFT's
    initial set skips every odd layer)."""
    order = [i for i in range(1, num_layers - 1) if i % 2] + [
        i for i in range(1, num_layers - 1) if not i % 2
    ]
    return [(kind, i) for i in order for kind in ("attention", "mlp")]


def skip_count(num_layers: int, skip_ratio: float) -> int:
    """m = int(2 (L − 2) · r): how many sub-layers a searched skip set leaves out."""
    return int(2 * max(num_layers - 2, 0) * skip_ratio)


def as_skip_set(sublayers: Sequence[SubLayer]) -> SkipSet:
    return SkipSet(
        attention=frozenset(i for kind, i in sublayers if kind == "attention"),
        mlp=frozenset(i for kind, i in sublayers if kind == "mlp"),
    )


def matchness(
    draft_forward: DraftForward, window: Sequence[int], start: int, targets: torch.Tensor, skip: SkipSet
) -> float:
    """Share of the window's positions whose skipped-forward argmax equals the full model's (`targets`)."""
    logits = draft_forward.context(window, start, skip)
    return float((logits.argmax(dim=-1) == targets).double().mean())


def search_skip_set(
    draft_forward: DraftForward,
    prompt_ids: Sequence[int],
    full_logits: torch.Tensor,
    skip_ratio: float,
    trials: int,
    window: int,
    rng: random.Random,
) -> tuple[SkipSet, float, int]:
    """(best skip set, its matchness, candidates scored) over the prompt's last `window` tokens;
    `full_logits` [P, V] are the full model's prefill logits (row j predicts token j + 1)."""
    num_layers = draft_forward.num_layers
    pool = skippable(num_layers)
    m = skip_count(num_layers, skip_ratio)
    p = len(prompt_ids)
    start = max(0, p - window)
    targets = full_logits[start:p].argmax(dim=-1)
    span = list(prompt_ids[start:p])
    best = pool[:m]
    best_score = matchness(draft_forward, span, start, targets, as_skip_set(best))
    scored = 1
    for trial in range(1, trials):
        if best_score >= 1.0 or m == 0 or m == len(pool):
            break
        if trial % 2:
            candidate = rng.sample(pool, m)
        else:  # swap one skipped sub-layer of the best for one it keeps
            kept = [s for s in pool if s not in best]
            candidate = list(best)
            candidate[rng.randrange(m)] = rng.choice(kept)
        score = matchness(draft_forward, span, start, targets, as_skip_set(candidate))
        scored += 1
        if score > best_score:
            best, best_score = candidate, score
    return as_skip_set(best), best_score, scored
