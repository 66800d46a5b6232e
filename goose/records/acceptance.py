"""The field's acceptance metrics of a cell, from its rows' per-step data (torch-free).

Acceptance length (specdec_bench, vLLM): L = accepted drafted tokens + 1 (the bonus) per verification
step, every step counted: its histogram, marginal acceptance P(L − 1 >= k), conditional acceptance (ratio
of consecutive marginals), and the mean per step and per request (a short request weighs as much as a long
one). Tree extras where rows carry them: acceptance by depth, by sibling rank and by source (spine p_s,
branch p_t, other). `speculation_profile` writes specdec_bench's `speculation_profile.json` (schema 1.0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

SCHEMA_VERSION = "1.0"
TOLERANCE = 0.02  # specdec_bench's mean-consistency tolerance
SHAPE_FIELDS = ("depth_offered", "depth_accepted", "rank_offered", "rank_accepted")  # row fields
SOURCES = ("spine", "branch", "other")
NAN = float("nan")


def _ints(value: Any) -> list[int]:
    """A row's list field as ints; [] when missing (None, or NaN from a DataFrame)."""
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else []


def _ok(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status", "ok") == "ok"]


def accept_lengths(row: dict[str, Any]) -> list[int]:
    """The acceptance length L = accepted drafted tokens + 1 of each step of one row."""
    return [a + 1 for a in _ints(row.get("step_accepted"))]


def histogram(lengths: Iterable[int]) -> dict[int, int]:
    """Steps per acceptance length, by increasing length."""
    out: dict[int, int] = {}
    for n in lengths:
        out[n] = out.get(n, 0) + 1
    return dict(sorted(out.items()))


def marginal_accept_rates(hist: dict[int, int], positions: int | None = None) -> list[float]:
    """P(at least k drafts accepted) for k = 1 .. positions (default: the longest length seen - 1)."""
    steps = sum(hist.values())
    if positions is None:
        positions = max(hist, default=1) - 1
    if not steps:
        return [0.0] * positions
    return [sum(c for n, c in hist.items() if n - 1 >= k) / steps for k in range(1, positions + 1)]


def conditional_accept_rates(marginal: Sequence[float]) -> list[float]:
    """P(draft k accepted | drafts 1 .. k-1 accepted): ratios of consecutive marginals."""
    out, prev = [], 1.0
    for m in marginal:
        out.append(m / prev if prev > 0 else 0.0)
        prev = m
    return out


def mean_accept_length(hist: dict[int, int]) -> float:
    """Mean acceptance length per step (NaN without steps)."""
    steps = sum(hist.values())
    return sum(n * c for n, c in hist.items()) / steps if steps else NAN


def mean_accept_length_per_request(rows: Iterable[dict[str, Any]]) -> float:
    """The mean over rows (requests with at least one step) of each row's mean acceptance length."""
    means = [sum(ls) / len(ls) for ls in (accept_lengths(r) for r in rows) if ls]
    return sum(means) / len(means) if means else NAN


def _sum_lists(lists: Iterable[list[int]]) -> list[int]:
    total: list[int] = []
    for counts in lists:
        total.extend([0] * (len(counts) - len(total)))
        for i, c in enumerate(counts):
            total[i] += c
    return total


def _rates(offered: list[int], accepted: list[int]) -> dict[str, list[Any]]:
    accepted = accepted + [0] * (len(offered) - len(accepted))
    return {
        "offered": offered,
        "accepted": accepted[: len(offered)],
        "rate": [a / o if o else NAN for a, o in zip(accepted, offered, strict=False)],
    }


def acceptance_by_shape(rows: Iterable[dict[str, Any]], kind: str) -> dict[str, list[Any]] | None:
    """Offered, accepted and rate per tree depth ("depth", index d-1) or sibling rank ("rank", index r)."""
    rows = [r for r in rows if isinstance(r.get(f"{kind}_offered"), (list, tuple))]
    if not rows:
        return None
    offered = _sum_lists(_ints(r.get(f"{kind}_offered")) for r in rows)
    accepted = _sum_lists(_ints(r.get(f"{kind}_accepted")) for r in rows)
    return _rates(offered, accepted)


def acceptance_by_source(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{spine, branch, other: {offered, accepted, rate}} (rate NaN where nothing was offered)."""
    out = {s: {"offered": 0, "accepted": 0} for s in SOURCES}
    for r in rows:
        for what in ("offered", "accepted"):
            counts = r.get(what)
            for name, n in counts.items() if isinstance(counts, dict) else ():
                out[name if name in SOURCES else "other"][what] += int(n)
    for s in out.values():
        s["rate"] = s["accepted"] / s["offered"] if s["offered"] else NAN
    return out


def _drafted(row: dict[str, Any]) -> int:
    """Drafted nodes of a row: Σ depth_offered, which leaves out nodes past a tree's accept_limit (Lookahead's
    Jacobi nodes); rows without it count tree sizes minus the anchors."""
    if isinstance(row.get("depth_offered"), (list, tuple)):
        return sum(_ints(row["depth_offered"]))
    return sum(max(t - 1, 0) for t in _ints(row.get("step_tree_size")))


def acceptance_summary(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The `speculation` record of a cell (its ok rows), field names after vLLM PR #48915 plus
    the per-position rates and the tree extras."""
    ok = _ok(rows)
    lengths = [n for r in ok for n in accept_lengths(r)]
    hist = histogram(lengths)
    marginal = marginal_accept_rates(hist)
    return {
        "num_spec_steps": len(lengths),
        "num_draft_tokens": sum(_drafted(r) for r in ok),
        "num_accepted_draft_tokens": sum(n - 1 for n in lengths),
        "mean_acceptance_length": mean_accept_length(hist),
        "mean_acceptance_length_per_request": mean_accept_length_per_request(ok),
        "acceptance_histogram": {str(n): c for n, c in hist.items()},
        "marginal_accept_rates": marginal,
        "conditional_accept_rates": conditional_accept_rates(marginal),
        "acceptance_by_depth": acceptance_by_shape(ok, "depth"),
        "acceptance_by_source": acceptance_by_source(ok),
        "acceptance_by_sibling_rank": acceptance_by_shape(ok, "rank"),
    }


def consistency_check(mean: float, marginal: Sequence[float], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """specdec_bench's `validation.mean_consistency`: |1 + Σ marginal - mean| <= tolerance."""
    implied = 1.0 + sum(marginal)
    delta = abs(implied - mean) if mean is not None else math.inf
    return {
        "implied_mean_accept_length": round(implied, 6),
        "reported_mean_accept_length": None if mean is None else round(mean, 6),
        "abs_delta": round(delta, 6),
        "tolerance": tolerance,
        "passed": bool(delta <= tolerance),
    }


def monotonicity_check(marginal: Sequence[float]) -> dict[str, Any]:
    """specdec_bench's `validation.marginal_monotonicity`: the marginals never increase."""
    violations = [
        {"position": i, "value": marginal[i], "previous": marginal[i - 1]}
        for i in range(1, len(marginal))
        if marginal[i] > marginal[i - 1] + 1e-9
    ]
    return {"passed": not violations, "violations": violations}


def _finite(value: Any) -> Any:
    """JSON-safe: NaN / inf -> None, floats rounded to 6 decimals, recursively."""
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def speculation_profile(
    rows: Iterable[dict[str, Any]],
    method: str,
    target_model: str,
    measurement_conditions: dict[str, Any] | None = None,
    per_category: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `speculation_profile.json` payload (specdec_bench schema 1.0) of one cell's rows; K is the deepest
    tree drafted, so the vectors span every observed length; tree extras go under `extensions.goose_bench`."""
    ok = _ok(rows)
    summary = acceptance_summary(ok)
    hist = {int(n): c for n, c in summary["acceptance_histogram"].items()}
    depth = summary["acceptance_by_depth"]
    k = max(max(hist, default=1) - 1, len(depth["offered"]) if depth else 0)
    marginal = marginal_accept_rates(hist, k)
    mean = summary["mean_acceptance_length"]
    mean = None if mean != mean else mean
    profile = {
        "schema_version": SCHEMA_VERSION,
        "measured": bool(ok),
        "method": method,
        "draft_checkpoint": None,  # training-free: no draft model
        "target_model": target_model,
        "num_speculative_tokens": k,
        "block_size": None,
        "max_supported_k": k,
        "verification_method": "longest_prefix",  # the accepted root path of the tree
        "conditional_accept_rates": [round(x, 6) for x in conditional_accept_rates(marginal)],
        "marginal_accept_rates": [round(x, 6) for x in marginal],
        "mean_accept_length": None if mean is None else round(mean, 6),
        "mean_accept_length_per_request": _finite(summary["mean_acceptance_length_per_request"]),
        "accept_length_model": "measured_per_k",
        "accept_length_by_k": {str(k): None if mean is None else round(mean, 6)},
        "acceptance_length_histogram": {str(n): c for n, c in hist.items()},
        "per_category": per_category,
        "measurement_conditions": measurement_conditions,
        "validation": {
            "mean_consistency": consistency_check(mean, marginal) if mean is not None else None,
            "marginal_monotonicity": monotonicity_check(marginal),
        },
        "extensions": {
            "goose_bench": _finite(
                {
                    key: summary[key]
                    for key in (
                        "num_spec_steps",
                        "num_draft_tokens",
                        "num_accepted_draft_tokens",
                        "acceptance_by_depth",
                        "acceptance_by_source",
                        "acceptance_by_sibling_rank",
                    )
                }
            )
        },
    }
    return profile


def counter_check(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Checks from each row's own counters, which `consistency_check` (a tail-sum identity, true of any one
    histogram) cannot fail: a row's verification steps are its forward calls less the prefill
    (len(step_accepted) = forward_calls - 1), and its tokens are the prefill's one plus each step's
    accepted drafts and bonus token, 1 + Σ (accepted + 1) = generated_tokens, except that a row that ended
    at EOS before max_new_tokens drops the tokens its last step committed after the EOS (at most that step's
    accepted + 1; a row that ran to max_new_tokens drops none, its last tree is cut to the tokens still
    wanted). Returns the rows checked and those that fail, by prompt."""
    checked, violations = 0, []
    for r in _ok(rows):
        accepted = _ints(r.get("step_accepted"))
        if r.get("step_accepted") is None or r.get("forward_calls") is None:
            continue
        checked += 1
        excess = 1 + sum(a + 1 for a in accepted) - int(r["generated_tokens"])
        ended_early = r.get("stop") == "eos" or int(r["generated_tokens"]) < int(r.get("max_new_tokens") or 0)
        allowed = (accepted[-1] + 1 if accepted else 0) if ended_early else 0
        if len(accepted) != int(r["forward_calls"]) - 1 or not 0 <= excess <= allowed:
            violations.append(
                {
                    "prompt_id": str(r.get("prompt_id")),
                    "steps": len(accepted),
                    "forward_calls": r["forward_calls"],
                    "committed_minus_generated": excess,
                }
            )
    return {"rows": checked, "violations": violations, "passed": not violations}


def validate_profile(profile: dict[str, Any], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Re-run both checks on a profile's published fields, and check that its histogram gives its mean."""
    marginal = [float(x) for x in profile.get("marginal_accept_rates") or []]
    mean = profile.get("mean_accept_length")
    hist = {int(n): int(c) for n, c in (profile.get("acceptance_length_histogram") or {}).items()}
    consistency = consistency_check(mean, marginal, tolerance) if mean is not None else None
    from_hist = mean_accept_length(hist)
    histogram_mean = {
        "histogram_mean_accept_length": _finite(from_hist),
        "passed": mean is None or (from_hist == from_hist and abs(from_hist - mean) <= tolerance),
    }
    monotone = monotonicity_check(marginal)
    passed = (
        (consistency is None or consistency["passed"]) and monotone["passed"] and histogram_mean["passed"]
    )
    return {
        "passed": bool(passed),
        "mean_consistency": consistency,
        "marginal_monotonicity": monotone,
        "histogram_mean": histogram_mean,
    }
