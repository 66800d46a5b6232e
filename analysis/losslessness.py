"""Losslessness: per model × bench × method (every config), the share of prompts whose output is
identical to greedy AR's, the near-tie mismatches (top-2 logit margin within the dtype's noise at
the first differing token) with their largest margin, the real mismatches (a bug: listed one by
one) and the failed prompts.

Every cell of the results is listed, sensitivity and ablation configs included, so that no
mismatch can hide. AR is the reference and is not listed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load import Results
from analysis.names import BENCH_ORDER, METHOD_ORDER, MODEL_NAMES, bench_name, model_name, order_key
from analysis.report import Output, Skip, cli, fmt, write_table

DESCRIPTION = __doc__.splitlines()[0]


def lossless_cells(res: Results) -> pd.DataFrame:
    """One row per non-AR cell: n, identical, unchecked (no verdict in the row), near_tie,
    max_tie_margin, real, real_detail, failed."""
    df = res.rows
    if df.empty:
        return pd.DataFrame()
    df = df[df["method"] != "ar"]
    failed = res.failed
    out = []
    keys = ["model", "bench", "method", "config_hash", "max_new_tokens", "dtype"]
    for key, g in df.groupby(keys, sort=False, dropna=False):
        recs = g.to_dict("records")
        unchecked = [r for r in recs if r.get("lossless") not in (True, False)]
        mism = [r for r in recs if r.get("lossless") is False]
        tie = [r for r in mism if r.get("near_tie") is True]
        real = [r for r in mism if r.get("near_tie") is not True]
        margins = [float(r["diff_margin"]) for r in tie if r.get("diff_margin") is not None]
        n_failed = 0
        if not failed.empty:
            f = failed
            for k, v in zip(keys, key, strict=True):
                f = f[f[k] == v]
            n_failed = len(f)
        out.append(
            {
                **dict(zip(keys, key, strict=True)),
                "label": g["label"].iloc[0],
                "n": len(g),
                "identical": sum(1 for r in recs if r.get("lossless") is True),
                "unchecked": len(unchecked),
                "near_tie": len(tie),
                "max_tie_margin": max(margins) if margins else np.nan,
                "real": len(real),
                "real_detail": [(r["prompt_id"], r.get("first_diff"), r.get("diff_margin")) for r in real],
                "failed": n_failed,
            }
        )
    # Cells whose every prompt failed have no ok row: list them too.
    if not failed.empty:
        seen = {tuple(r[k] for k in keys) for r in out}
        for key, f in failed[failed["method"] != "ar"].groupby(keys, sort=False, dropna=False):
            if tuple(key) not in seen:
                out.append(
                    {
                        **dict(zip(keys, key, strict=True)),
                        "label": f"{key[2]} [{key[3]}]",
                        "n": 0,
                        "identical": 0,
                        "unchecked": 0,
                        "near_tie": 0,
                        "max_tie_margin": np.nan,
                        "real": 0,
                        "real_detail": [],
                        "failed": len(f),
                    }
                )
    return pd.DataFrame(out)


def build(res: Results, out: Path) -> Output:
    c = lossless_cells(res)
    if c.empty:
        raise Skip("no method rows (besides AR) to check against AR")
    output = Output()
    models = order_key(c["model"], list(MODEL_NAMES))
    benches = order_key(c["bench"], BENCH_ORDER)
    methods = order_key(c["method"], METHOD_ORDER)
    rows = []
    for m in models:
        for b in benches:
            for meth in methods:
                for r in (
                    c[(c["model"] == m) & (c["bench"] == b) & (c["method"] == meth)]
                    .sort_values("label")
                    .itertuples()
                ):
                    share = r.identical / r.n if r.n else np.nan
                    flag = "⚠ " if r.real or r.failed or r.unchecked else ""
                    detail = "; ".join(f"{p} @{d} (margin {fmt(mg, 4)})" for p, d, mg in r.real_detail)
                    rows.append(
                        [
                            model_name(m),
                            bench_name(b),
                            flag + r.label,
                            str(r.n),
                            f"{r.identical}/{r.n}",
                            "—" if np.isnan(share) else f"{100 * share:.1f}%",
                            str(r.near_tie),
                            fmt(r.max_tie_margin, 6) if r.near_tie else "—",
                            str(r.real) + (f": {detail}" if detail else ""),
                            str(r.failed) + (f" (+{r.unchecked} unchecked)" if r.unchecked else ""),
                        ]
                    )
    total_real, total_tie, total_failed = (
        int(c["real"].sum()),
        int(c["near_tie"].sum()),
        int(c["failed"].sum()),
    )
    n_prompts, total_unchecked = int(c["n"].sum()), int(c["unchecked"].sum())
    headline = (
        f"{n_prompts} method prompts: {int(c['identical'].sum())} identical to AR, "
        f"{total_tie} near-tie mismatches, {total_real} REAL mismatches, {total_unchecked} without a verdict, "
        f"{total_failed} failed prompts."
    )
    if total_unchecked:
        output.notes.append(f"losslessness: {total_unchecked} rows carry no lossless verdict")
    if total_real:
        output.notes.append(f"losslessness: {total_real} real mismatches (see losslessness.md)")
    if total_failed:
        output.notes.append(f"losslessness: {total_failed} failed prompts without an ok re-run")
    output.files += write_table(
        out,
        "losslessness",
        [
            "Model",
            "Bench",
            "Method",
            "n",
            "identical to AR",
            "share",
            "near-tie mism.",
            "max near-tie margin",
            "real mismatches (prompt @first diff)",
            "failed",
        ],
        rows,
        "Losslessness: outputs identical to greedy AR, per cell",
        [
            headline,
            "near-tie: the top-2 logit margin at the first differing token is within the dtype's noise (2 ulps of the top logit, ≥ 1e-4); anything else is a real mismatch (a bug). ⚠ marks cells with real mismatches or failures.",
            res.scope(),
        ],
    )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
