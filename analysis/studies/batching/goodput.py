"""Goodput under continuous batching (issue 58): per method and concurrency, the requests per second whose time
per output token (TPOT) meets a target, a multiple of batch-1 AR's median TPOT, against AR's at the same
concurrency; the serving papers' measure of useful throughput. Rows: `make batching`'s (experiments/batching.py).
"""

from __future__ import annotations

import statistics

import pandas as pd

from analysis.studies.batching.table_style import method_rank, spread

# Goodput's TPOT targets, as multiples of batch-1 AR's median TPOT of the same model and dtype (its own speed):
# a request meets the target when its time per output token after the first is at most target.
GOODPUT_TARGETS = (1.5, 2.0)


def goodput_table(df: pd.DataFrame) -> list[list[str]]:
    """Per (model, dtype, run, method, concurrency) and TPOT target: the requests meeting the target (over every
    repeat) and goodput, requests meeting it per second of the round, median [min, max] over repeats and over
    AR's at the same concurrency and target (per repeat, as `ratios`). The target is GOODPUT_TARGETS × batch-1
    AR's median request TPOT of the model and dtype (over the main run's repeats)."""
    out = []
    if "tpot_s" not in df.columns:
        return out
    for (model, dtype), d in df.groupby(["model", "dtype"], sort=True):
        base = d[(d["method"] == "ar") & (d["concurrency"] == 1)]
        base_tpots = [t for ts in base["tpot_s"] if isinstance(ts, list) for t in ts]
        if not base_tpots:
            continue
        ar_tpot = statistics.median(base_tpots)
        for run, r in d.groupby("run", sort=True):
            for method in sorted(r["method"].unique(), key=method_rank):
                for c in sorted(r["concurrency"].unique()):
                    g = r[(r["method"] == method) & (r["concurrency"] == c)]
                    ar = r[(r["method"] == "ar") & (r["concurrency"] == c)]
                    if g.empty or ar.empty:
                        continue
                    for k in GOODPUT_TARGETS:
                        target = k * ar_tpot
                        rates = goodputs(g, target)
                        ar_rates = dict(zip(ar["repeat"], goodputs(ar, target), strict=True))
                        rel = [
                            x / ar_rates[rep]
                            for rep, x in zip(g["repeat"], rates, strict=True)
                            if ar_rates.get(rep)
                        ]
                        met = sum(sum(t <= target for t in ts) for ts in g["tpot_s"])
                        total = sum(len(ts) for ts in g["tpot_s"])
                        out.append(
                            [
                                model,
                                dtype,
                                run,
                                method,
                                str(int(c)),
                                f"{k:g}× AR ({1e3 * target:.1f})",
                                f"{met}/{total}",
                                spread(rates),
                                spread(rel) + "×" if rel else "—",
                            ]
                        )
    return out


def goodputs(g: pd.DataFrame, target: float) -> list[float]:
    """Per row (one round): requests whose TPOT is at most `target`, per second of the round's wall time."""
    return [
        sum(t <= target for t in ts) / wall for ts, wall in zip(g["tpot_s"], g["wall_time_s"], strict=True)
    ]
