"""Isotropic control and ablations: τ of the isotropic trees (iso3, iso5 at the fixed budget B, and
iso3_beff, iso5_beff at Goose's budget rule B_eff) beside Goose's with the Goose/iso ratio; τ of
each Goose ablation beside full Goose with the change Δ%.

Each table compares its methods on the prompts all of them completed, per setting. The mean row of
a model averages each method's τ over benches first.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load import Results, cells, common_prompts
from analysis.names import (
    ABLATIONS,
    BENCH_ORDER,
    ISO_METHODS,
    MODEL_NAMES,
    bench_name,
    method_name,
    model_name,
    order_key,
)
from analysis.report import Output, Skip, cli, fmt, fmt_pct, fmt_ratio, write_table

DESCRIPTION = __doc__.splitlines()[0]
ABLATION_MEANING = {
    "goose_no_spine_branches": "ρ = 0: no branch alternatives on spine nodes",
    "goose_no_bigram": "adjacency lookups use the unigram row only",
    "goose_no_consensus": "confidence c = 0: no chain extension, every tree at budget B",
    "goose_no_prefill": "adjacency table not seeded from the prefill logits",
}


def tau_table(res: Results, others: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """τ per (model, bench) of Goose and `others` present, on their shared prompts; columns are
    method names plus `n`. Rows without Goose are dropped. Also returns the methods present."""
    df = res.reference(["goose", *others])
    present = [m for m in others if (df["method"] == m).any()] if not df.empty else []
    if df.empty or not present or not (df["method"] == "goose").any():
        return pd.DataFrame(), present
    c = cells(common_prompts(df))
    wide = c.pivot_table(index=["model", "bench"], columns="method", values="tau", aggfunc="first")
    wide["n"] = c.groupby(["model", "bench"])["prompts"].min()
    wide = wide.dropna(subset=["goose"])
    wide = wide[wide[[m for m in present if m in wide.columns]].notna().any(axis=1)]
    return wide, present


def iso_gains(res: Results) -> pd.DataFrame:
    """Goose's τ gain over each isotropic variant per (model, bench), in % (long frame)."""
    wide, present = tau_table(res, ISO_METHODS)
    rows = []
    for (model, bench), r in wide.iterrows():
        for m in present:
            if m in r and not np.isnan(r[m]):
                rows.append(
                    {"model": model, "bench": bench, "iso": m, "gain_pct": 100.0 * (r["goose"] / r[m] - 1.0)}
                )
    return pd.DataFrame(rows)


def _rows(wide: pd.DataFrame, present: list[str], cell) -> list[list[str]]:
    models = order_key(wide.index.get_level_values("model"), list(MODEL_NAMES))
    benches = order_key(wide.index.get_level_values("bench"), BENCH_ORDER)
    rows = []
    for model in models:
        w = wide.loc[model]
        for b in benches:
            if b in w.index:
                r = w.loc[b]
                rows.append([model_name(model), bench_name(b), str(int(r["n"])), fmt(r["goose"])] + cell(r))
        cols = [c for c in ["goose", *present] if c in w.columns]
        complete = w[cols].dropna()  # only benches where every column has a τ: a like-for-like mean
        if complete.empty:
            continue
        mean = complete.mean()
        label = f"{len(complete)} of {len(w)} benches" if len(complete) < len(w) else f"{len(w)} benches"
        rows.append([model_name(model), "mean over benches", label, fmt(mean["goose"])] + cell(mean))
    return rows


def build(res: Results, out: Path) -> Output:
    output = Output()
    wide, present = tau_table(res, ISO_METHODS)
    if wide.empty:
        output.notes.append(
            "isotropic control: no iso3/iso5/iso3_beff/iso5_beff rows beside Goose (table skipped)"
        )
    else:
        missing = [m for m in ISO_METHODS if m not in present]
        if missing:
            output.notes.append("isotropic control: no rows of " + ", ".join(missing) + " (columns left out)")

        def iso_cells(r: pd.Series) -> list[str]:
            vals = []
            for m in present:
                t = r.get(m, np.nan)
                vals += [fmt(t), fmt_ratio(r["goose"] / t if t and not np.isnan(t) else np.nan)]
            return vals

        header = ["Model", "Bench", "n", "τ Goose"]
        for m in present:
            header += [f"τ {method_name(m)}", f"Goose/{method_name(m)}"]
        output.files += write_table(
            out,
            "iso_vs_goose",
            header,
            _rows(wide, present, iso_cells),
            "Isotropic control: τ of balanced k-ary trees vs Goose",
            [
                "Iso-3/Iso-5: k-ary tree at the fixed budget B; @B_eff: same tree at Goose's confidence-driven budget B_eff (the same-budget comparison).",
                "n = prompts all listed methods completed; ratio > 1 means Goose accepts more tokens per forward call.",
                res.scope(),
            ],
        )

    wide, present = tau_table(res, ABLATIONS)
    if wide.empty:
        output.notes.append("ablations: no goose_no_* rows beside Goose (table skipped)")
    else:
        missing = [m for m in ABLATIONS if m not in present]
        if missing:
            output.notes.append("ablations: no rows of " + ", ".join(missing) + " (columns left out)")

        def abl_cells(r: pd.Series) -> list[str]:
            vals = []
            for m in present:
                t = r.get(m, np.nan)
                vals += [fmt(t), fmt_pct(100.0 * (t / r["goose"] - 1.0) if r["goose"] else np.nan)]
            return vals

        header = ["Model", "Bench", "n", "τ Goose"]
        for m in present:
            header += [f"τ {method_name(m)}", "Δ%"]
        output.files += write_table(
            out,
            "ablations",
            header,
            _rows(wide, present, abl_cells),
            "Ablations: τ of Goose without one component, vs full Goose",
            [f"{method_name(m)}: {ABLATION_MEANING.get(m, '')}" for m in present]
            + ["Δ% = τ_ablation / τ_Goose − 1 (negative: the component helps).", res.scope()],
        )
    if not output.files:
        raise Skip("no isotropic-control or ablation rows beside Goose")
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
