"""Source heterogeneity: acceptance rate p_s of spine (context-matched) tokens against p_t of
branch (adjacency) tokens, mean per bench with p_s/p_t above each pair, and the ratio p_s/p_t per
model × bench as a heatmap.

p_s, p_t = Σ accepted / Σ offered of the source over a cell (docs/paper.md; unconditional: a token whose
parent was rejected counts as offered). They come from Goose's rows; where a cell has no Goose
rows, or Goose offered no token of a source there, p_s falls back to PLD's rows and p_t to TR's,
and the table says which method each rate came from. The per-bench bars average the cells' rates
over models; the ratio written above a pair is the ratio of those two means.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter

from analysis.load import Results, cells
from analysis.names import BENCH_ORDER, MODEL_NAMES, bench_name, method_name, model_name, order_key
from analysis.report import Output, Skip, cli, fmt, fmt_ratio, save_figure, write_table

DESCRIPTION = __doc__.splitlines()[0]
COLORS = {"p_s": "#1f77b4", "p_t": "#ff7f0e"}


def source_rates(res: Results) -> pd.DataFrame:
    """Per (model, bench): p_s, p_t with their counts and the method each came from, and p_ratio."""
    df = res.reference(["goose", "pld", "tr"])
    if df.empty:
        return pd.DataFrame()
    c = cells(df)
    out = []
    for (model, bench), g in c.groupby(["model", "bench"], sort=False):
        by = {m: r for m, r in zip(g["method"], g.to_dict("records"), strict=True)}
        row = {"model": model, "bench": bench}
        for rate, src, fallback in (("p_s", "spine", "pld"), ("p_t", "branch", "tr")):
            pick = None
            for m in ("goose", fallback):
                r = by.get(m)
                if r is not None and r[f"offered_{src}"] > 0:
                    pick = (m, r)
                    break
            if pick is None:
                row.update({rate: math.nan, f"{rate}_from": None, f"{rate}_acc": 0, f"{rate}_off": 0})
            else:
                m, r = pick
                row.update(
                    {
                        rate: r[rate],
                        f"{rate}_from": m,
                        f"{rate}_acc": r[f"accepted_{src}"],
                        f"{rate}_off": r[f"offered_{src}"],
                    }
                )
        row["p_ratio"] = row["p_s"] / row["p_t"] if row["p_t"] and not math.isnan(row["p_t"]) else math.nan
        if row["p_t"] == 0 and row["p_s"] > 0:
            row["p_ratio"] = math.inf
        out.append(row)
    rates = pd.DataFrame(out)
    return rates.dropna(subset=["p_s", "p_t"], how="all") if not rates.empty else rates


def ratio_stats(rates: pd.DataFrame) -> dict[str, float]:
    """Median, min and max of the finite p_s/p_t ratios over cells, and how many cells count."""
    r = (
        rates["p_ratio"].replace([np.inf, -np.inf], np.nan).dropna()
        if not rates.empty
        else pd.Series(dtype=float)
    )
    if r.empty:
        return {"median": math.nan, "min": math.nan, "max": math.nan, "cells": 0}
    return {"median": float(r.median()), "min": float(r.min()), "max": float(r.max()), "cells": int(len(r))}


def build(res: Results, out: Path) -> Output:
    rates = source_rates(res)
    if rates.empty:
        raise Skip("no Goose, PLD or TR rows with drafted tokens: no acceptance rates")
    output = Output()
    models = order_key(rates["model"], list(MODEL_NAMES))
    benches = order_key(rates["bench"], BENCH_ORDER)
    fallback = rates[
        (rates["p_s_from"].fillna("goose") != "goose") | (rates["p_t_from"].fillna("goose") != "goose")
    ]
    if len(fallback):
        output.notes.append(
            "heterogeneity: fell back from Goose in "
            + ", ".join(
                f"{model_name(r.model)}/{bench_name(r.bench)} (p_s from {r.p_s_from}, p_t from {r.p_t_from})"
                for r in fallback.itertuples()
            )
        )

    fig, (ax1, ax2) = plt.subplots(
        1,
        2,
        figsize=(max(10.0, 2.0 * len(benches) + 1.5), max(3.8, 0.45 * len(models) + 2.8)),
        gridspec_kw={"width_ratios": [1.2, 1]},
    )
    mean = rates.groupby("bench")[["p_s", "p_t"]].mean().reindex(benches)
    x = np.arange(len(benches))
    for k, (col, lab) in enumerate((("p_s", "p_s spine (context match)"), ("p_t", "p_t branch (adjacency)"))):
        ax1.bar(x - 0.2 + 0.4 * k, mean[col], 0.4, color=COLORS[col], label=lab)
    for xi, (ps, pt) in zip(x, mean[["p_s", "p_t"]].itertuples(index=False), strict=True):
        if math.isnan(ps) or math.isnan(pt):
            txt = "—"
        else:
            txt = fmt_ratio(ps / pt, 1) if pt > 0 else ("∞" if ps > 0 else "—")
        ax1.annotate(
            f"p_s/p_t\n{txt}",
            (xi, np.nanmax([ps, pt, 0])),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7.5,
            fontweight="bold",
        )
    ax1.set_xticks(x, [bench_name(b) for b in benches])
    ax1.set_ylabel("acceptance rate (accepted / drafted)")
    top = (
        np.nanmax(mean[["p_s", "p_t"]].to_numpy())
        if np.isfinite(mean[["p_s", "p_t"]].to_numpy()).any()
        else 1.0
    )
    ax1.set_ylim(0, min(1.0, top) * 1.3 + 0.02)
    ax1.set_title(
        "mean source acceptance per bench"
        + (f" (over {len(models)} models)" if len(models) > 1 else f" ({model_name(models[0])})")
    )
    ax1.legend(loc="upper left", frameon=False)

    grid = rates.pivot_table(index="model", columns="bench", values="p_ratio", aggfunc="first").reindex(
        index=models, columns=benches
    )
    vals = grid.to_numpy(dtype=float)
    finite = vals[np.isfinite(vals) & (vals > 0)]
    if finite.size:
        lo, hi = float(finite.min()), float(finite.max())
        norm = LogNorm(vmin=lo if lo < hi else lo / 2, vmax=hi if hi > lo else hi * 2)
        im = ax2.imshow(
            np.where(np.isfinite(vals) & (vals > 0), vals, np.nan), cmap="viridis", norm=norm, aspect="auto"
        )
        bar = fig.colorbar(im, ax=ax2, label="p_s / p_t (log scale)", fraction=0.05)
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        bar.ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.set_facecolor("#eeeeee")
    for i in range(len(models)):
        for j in range(len(benches)):
            v = vals[i, j]
            coloured = np.isfinite(v) and v > 0
            label = fmt_ratio(v, 1) if not np.isnan(v) else "n/a"
            ax2.text(
                j,
                i,
                label,
                ha="center",
                va="center",
                fontsize=8,
                color="white" if coloured else "black",
                fontweight="bold",
            )
    ax2.set_xticks(range(len(benches)), [bench_name(b) for b in benches], rotation=20, ha="right")
    ax2.set_yticks(range(len(models)), [model_name(m) for m in models])
    ax2.set_xlim(-0.5, len(benches) - 0.5)
    ax2.set_ylim(len(models) - 0.5, -0.5)
    ax2.set_title("p_s / p_t per model × bench (grey: 0, ∞ or undefined)")
    ax2.spines[:].set_visible(False)
    st = ratio_stats(rates)
    fig.suptitle(
        f"Source heterogeneity: spine vs branch acceptance (median p_s/p_t {fmt_ratio(st['median'], 1)}, "
        f"range {fmt(st['min'], 1)}–{fmt(st['max'], 1)} over {st['cells']} cells)"
        + (
            f"\nrates from Goose's rows, but in {len(fallback)} of {len(rates)} cells from PLD (p_s) / TR (p_t): see the table"
            if len(fallback)
            else "\nrates from Goose's rows"
        )
    )
    fig.tight_layout()
    output.files += save_figure(fig, out, "heterogeneity")

    header = [
        "Model",
        "Bench",
        "p_s from",
        "spine acc./drafted",
        "p_s",
        "p_t from",
        "branch acc./drafted",
        "p_t",
        "p_s/p_t",
    ]
    rows = []
    for model in models:
        for b in benches:
            hit = rates[(rates["model"] == model) & (rates["bench"] == b)]
            for r in hit.itertuples():
                rows.append(
                    [
                        model_name(model),
                        bench_name(b),
                        method_name(r.p_s_from) if r.p_s_from else "—",
                        f"{r.p_s_acc}/{r.p_s_off}",
                        fmt(r.p_s, 3),
                        method_name(r.p_t_from) if r.p_t_from else "—",
                        f"{r.p_t_acc}/{r.p_t_off}",
                        fmt(r.p_t, 3),
                        fmt_ratio(r.p_ratio, 1),
                    ]
                )
    output.files += write_table(
        out,
        "heterogeneity",
        header,
        rows,
        "Source acceptance: spine p_s vs branch p_t",
        [
            "p = Σ accepted / Σ drafted tokens of the source over the cell (unconditional: a token under a rejected parent counts as drafted).",
            f"median p_s/p_t over {st['cells']} cells {fmt_ratio(st['median'], 1)}, range {fmt(st['min'], 1)}–{fmt(st['max'], 1)}.",
            res.scope(),
        ],
    )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
