"""Losslessness verdicts: a method's output compared with the AR reference of the same prompt, and on a
mismatch the top-2 margin at the first differing token (a near-tie or a real mismatch).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from goose.engine.core.sampling import GREEDY, SamplingParams
from goose.engine.core.verifier import VerificationEngine

UNKNOWN = {"lossless": None, "first_diff": None, "diff_margin": None, "near_tie": None}


def near_tie_threshold(top_logit: float, dtype: torch.dtype) -> float:
    """2 ulps of the top logit in `dtype`, and at least 1e-4 (measured fp32 noise between a tree
    forward and sequential decoding is ~4e-5)."""
    ulp = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(top_logit), 1e-30)))
    return max(2.0 * ulp, 1e-4)


def lossless_fields(
    engine: VerificationEngine,
    prompt_ids: list[int],
    output: list[int],
    reference: list[int],
    sampling: SamplingParams = GREEDY,
    seed: int = 0,
) -> dict[str, Any]:
    """Compare with the AR reference; on a mismatch, teacher-force AR's prefix up to the first
    differing index and record the top-2 margin there. A margin within 2 ulps of the top logit in
    the model's dtype (at least 1e-4, the fp32 tree-vs-sequential noise) is a near-tie. At
    temperature > 0 the margin is that of the perturbed scores log p / ... + g that AR's draw
    compared (the same noise), and the tolerance is divided by T."""
    if output == reference:
        return {"lossless": True, "first_diff": None, "diff_margin": None, "near_tie": None}
    idx = next(
        (i for i, (a, b) in enumerate(zip(output, reference, strict=False)) if a != b),
        min(len(output), len(reference)),
    )
    return {
        "lossless": False,
        "first_diff": idx,
        "diff_tokens": [
            reference[idx] if idx < len(reference) else None,
            output[idx] if idx < len(output) else None,
        ],
        **divergence_verdict(engine, prompt_ids + reference[:idx], sampling, seed),
    }


def divergence_verdict(
    engine: VerificationEngine,
    prefix_ids: list[int],
    sampling: SamplingParams = GREEDY,
    seed: int = 0,
) -> dict[str, Any]:
    """The verdict on a divergence after `prefix_ids` (the prompt + AR's output up to the first
    differing token): the top-2 margin of a teacher-forced forward there, and whether it is a
    near-tie (within `near_tie_threshold`, divided by T at temperature > 0) or a real mismatch."""
    top1, top2, margin, top_value = engine.next_token_margin(prefix_ids, sampling, seed)
    tol = near_tie_threshold(top_value, engine.dtype) / (1.0 if sampling.greedy else sampling.temperature)
    return {
        "diff_margin": margin,
        "diff_top2": [top1, top2],
        "near_tie": margin <= tol,
        "near_tie_threshold": tol,
    }


def row_verdict(
    engine: VerificationEngine,
    prompt_ids: list[int],
    output: list[int],
    reference: list[int] | None,
    *,
    is_reference: bool,
    stochastic: bool,
    sampling: SamplingParams = GREEDY,
    seed: int = 0,
) -> dict[str, Any]:
    """The losslessness fields of a row. is_reference: the row is the AR reference itself (lossless by
    definition); stochastic: the drafter samples its drafts, so the output equals AR's in distribution only
    (lossless None, `lossless_check` "distribution", `same_as_ar` recorded); reference None: the AR run of
    this prompt failed (lossless None)."""
    if is_reference:
        return {"lossless": True, "first_diff": None, "diff_margin": None, "near_tie": None}
    if stochastic:
        return {
            **UNKNOWN,
            "lossless_check": "distribution",
            "same_as_ar": output == reference if reference is not None else None,
        }
    if reference is None:
        return {**UNKNOWN, "lossless_error": "no AR reference: the AR run of this prompt failed"}
    return lossless_fields(engine, prompt_ids, output, reference, sampling, seed)
