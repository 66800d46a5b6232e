"""Cell metrics from result rows (no torch: analysis imports this), as docs/paper.md defines them: τ = Σ
generated / Σ forward calls; tokens/s = Σ generated / Σ wall time; speedup = tokens/s over AR's on the
prompts both completed (at T > 0, AR's sample with the same seed); p_s, p_t = Σ accepted / Σ offered per
source; mean acceptance length per step and per request (goose.records.acceptance).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from goose.records.acceptance import (
    accept_lengths,
    histogram,
    mean_accept_length,
    mean_accept_length_per_request,
)
from goose.records.results import sample_key


def _ok(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status", "ok") == "ok"]


def rate(num: float, den: float) -> float:
    return num / den if den else float("nan")


def cell_summary(rows: list[dict[str, Any]], ar_rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Summary of one cell (model x bench x method x config). `ar_rows`: the AR rows of the same
    model/bench/max_new_tokens, for the speedup (restricted to prompts present in both)."""
    ok = _ok(rows)
    gen = sum(r["generated_tokens"] for r in ok)
    calls = sum(r["forward_calls"] for r in ok)
    wall = sum(r["wall_time_s"] for r in ok)
    offered = {s: sum(r["offered"].get(s, 0) for r in ok) for s in ("spine", "branch")}
    accepted = {s: sum(r["accepted"].get(s, 0) for r in ok) for s in ("spine", "branch")}
    p_s = rate(accepted["spine"], offered["spine"])
    p_t = rate(accepted["branch"], offered["branch"])
    out: dict[str, Any] = {
        "prompts": len(ok),
        "failed": len(rows) - len(ok),
        "generated_tokens": gen,
        "forward_calls": calls,
        "tau": rate(gen, calls),
        "tokens_per_s": rate(gen, wall),
        # rows whose AR reference failed have lossless None: no verdict, left out of the share
        "lossless_share": rate(
            sum(r.get("lossless") is True for r in ok), sum(r.get("lossless") is not None for r in ok)
        ),
        "near_tie_mismatches": sum(1 for r in ok if r.get("lossless") is False and r.get("near_tie")),
        "real_mismatches": sum(1 for r in ok if r.get("lossless") is False and not r.get("near_tie")),
        "p_s": p_s,
        "p_t": p_t,
        "p_ratio": rate(p_s, p_t),
        "offered_spine": offered["spine"],
        "offered_branch": offered["branch"],
        "accepted_spine": accepted["spine"],
        "accepted_branch": accepted["branch"],
        "speedup": float("nan"),
        "mean_accept_length": mean_accept_length(histogram(n for r in ok for n in accept_lengths(r))),
        "mean_accept_length_per_request": mean_accept_length_per_request(ok),
    }
    if ar_rows:
        ar = {sample_key(r): r for r in _ok(ar_rows)}
        both = [r for r in ok if sample_key(r) in ar]
        mine = rate(sum(r["generated_tokens"] for r in both), sum(r["wall_time_s"] for r in both))
        base = rate(
            sum(ar[sample_key(r)]["generated_tokens"] for r in both),
            sum(ar[sample_key(r)]["wall_time_s"] for r in both),
        )
        out["speedup"] = rate(mine, base)
    return out


def per_prompt_speedups(rows: list[dict[str, Any]], ar_rows: list[dict[str, Any]]) -> list[float]:
    """Per-prompt speedups over the prompts both completed: the spread behind a cell's `speedup`, which is a
    ratio of sums.
    """
    ar = {sample_key(r): r for r in _ok(ar_rows)}
    out = []
    for r in _ok(rows):
        a = ar.get(sample_key(r))
        if a is None:
            continue
        out.append(
            rate(rate(r["generated_tokens"], r["wall_time_s"]), rate(a["generated_tokens"], a["wall_time_s"]))
        )
    return out


def format_table(header: list[str], rows: list[list[Any]]) -> str:

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "nan" if v != v else f"{v:.3f}"
        return str(v)

    cells = [header] + [[fmt(v) for v in r] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
