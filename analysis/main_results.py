"""Main results: τ and speedup per model × bench × method (the paper's main table and its speedup
bars, Goose's values annotated).

Only the methods' reference configs (the main grid) are compared, and in each setting (model,
bench, max_new_tokens, dtype) only on the prompts every method present completed (docs/paper.md): a bench
whose run is still in progress shows fewer prompts (column n of the long table). The mean over
benches weights each bench equally. `all_cells.csv` lists every cell of the results (every
method and config, each on all its own prompts) for readers who want more.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.load import Results, cells, common_prompts
from analysis.names import (
    BENCH_ORDER,
    MAIN_METHODS,
    MODEL_NAMES,
    bench_name,
    method_name,
    model_name,
    order_key,
)
from analysis.report import METHOD_COLORS, Output, Skip, cli, fmt, fmt_ratio, save_figure, write_table

DESCRIPTION = __doc__.splitlines()[0]


def main_cells(res: Results) -> pd.DataFrame:
    """Cells of the main grid on the prompts every main method of the setting completed."""
    df = res.reference(MAIN_METHODS)
    if df.empty:
        return cells(df)
    return cells(common_prompts(df))


def _bars(c: pd.DataFrame, metric: str, ylabel: str, title: str, annotate_fmt: str) -> plt.Figure:
    models = order_key(c["model"], list(MODEL_NAMES))
    benches = order_key(c["bench"], BENCH_ORDER)
    methods = [m for m in order_key(c["method"], MAIN_METHODS) if m != "ar"]
    fig, axes = plt.subplots(
        len(models), 1, figsize=(max(7.5, 1.5 * (len(benches) + 1) + 2), 3.1 * len(models)), squeeze=False
    )
    width = 0.8 / max(1, len(methods))
    for ax, model in zip(axes[:, 0], models, strict=True):
        cm = c[c["model"] == model]
        groups = benches + (["Mean"] if len(benches) > 1 else [])
        x = np.arange(len(groups))
        top = 0.0
        for i, m in enumerate(methods):
            vals = []
            for b in benches:
                v = cm.loc[(cm["bench"] == b) & (cm["method"] == m), metric]
                vals.append(float(v.iloc[0]) if len(v) else np.nan)
            if len(benches) > 1:
                vals.append(np.nanmean(vals) if np.isfinite(vals).any() else np.nan)
            xs = x - 0.4 + width * (i + 0.5)
            ax.bar(
                xs,
                vals,
                width,
                label=method_name(m),
                color=METHOD_COLORS.get(m),
                edgecolor="white",
                linewidth=0.4,
            )
            top = max(top, np.nanmax(vals) if np.isfinite(vals).any() else 0.0)
            if m == "goose":
                for xi, v in zip(xs, vals, strict=True):
                    if np.isfinite(v):
                        ax.annotate(
                            annotate_fmt.format(v),
                            (xi, v),
                            xytext=(0, 2),
                            textcoords="offset points",
                            ha="center",
                            va="bottom",
                            fontsize=7,
                            fontweight="bold",
                            color=METHOD_COLORS["goose"],
                            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
                        )
        ax.axhline(1.0, color="#555555", linestyle="--", linewidth=0.8, label="AR (=1)")
        ax.set_xticks(x, [bench_name(g) for g in groups])
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, max(top, 1.0) * 1.15 + 0.1)
        n = cm.groupby("bench")["prompts"].min()
        n_txt = f"{n.min()}" if n.min() == n.max() else f"{n.min()}–{n.max()}"
        ax.set_title(f"{model_name(model)}: {title}; n = {n_txt} prompts per bench")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, ncol=min(8, len(labels)), loc="lower center", frameon=False)
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))
    return fig


def build(res: Results, out: Path) -> Output:
    output = Output()
    if not res.rows.empty:
        every = cells(res.rows)
        out.mkdir(parents=True, exist_ok=True)
        csv = out / "all_cells.csv"
        every.drop(columns=["varied", "method_config"]).to_csv(csv, index=False)
        output.files.append(csv)
    c = main_cells(res)
    if c.empty or not (c["method"] != "ar").any():
        raise Skip("no main-grid rows (methods " + ", ".join(MAIN_METHODS) + ")")
    models = order_key(c["model"], list(MODEL_NAMES))
    benches = order_key(c["bench"], BENCH_ORDER)
    methods = order_key(c["method"], MAIN_METHODS)
    if len(set(zip(c["model"], c["bench"], c["method"], strict=True))) < len(c):
        output.notes.append(
            "several max_new_tokens/dtype settings share a model × bench: rows repeat per setting"
        )

    # Wide table: rows (model, method), per bench τ and speedup, then the mean over benches.
    header = (
        ["Model", "Method"]
        + [f"{bench_name(b)} {s}" for b in benches for s in ("τ", "×")]
        + ["Mean τ", "Mean ×"]
    )
    rows = []
    for model in models:
        cm = c[c["model"] == model]
        n = [cm.loc[cm["bench"] == b, "prompts"].min() if (cm["bench"] == b).any() else None for b in benches]
        rows.append([model_name(model), "n prompts"] + [x for v in n for x in (fmt(v), "")] + ["", ""])
        for m in methods:
            vals, taus, sps = [], [], []
            for b in benches:
                hit = cm[(cm["bench"] == b) & (cm["method"] == m)]
                tau = float(hit["tau"].iloc[0]) if len(hit) else np.nan
                sp = float(hit["speedup"].iloc[0]) if len(hit) else np.nan
                taus.append(tau)
                sps.append(sp)
                other_session = len(hit) and m != "ar" and float(hit["ar_same_session"].iloc[0]) < 1.0
                vals += [fmt(tau), fmt_ratio(sp) + ("†" if other_session else "")]
            mt = np.nanmean(taus) if np.isfinite(taus).any() else np.nan
            ms = np.nanmean(sps) if np.isfinite(sps).any() else np.nan
            rows.append(["", method_name(m)] + vals + [fmt(mt), fmt_ratio(ms)])
    notes = [
        "τ = Σ generated tokens / Σ forward calls (prefill counted); × = tokens/s over AR's on the same prompts.",
        "Per setting, only prompts completed by every method listed count (n prompts); Mean = unweighted mean over benches.",
        "† timed in another run than its AR reference (e.g. regenerated later, or while other runs shared "
        "the machine): that speedup is not a side-by-side wall-clock measurement; τ is exact either way.",
        res.scope(),
    ]
    output.files += write_table(
        out, "main_results", header, rows, "Main results: τ and speedup over AR", notes
    )

    # Long table: every main cell with prompts, tokens/s and the per-prompt speedup spread.
    long_header = [
        "Model",
        "Bench",
        "Method",
        "n",
        "τ",
        "tokens/s",
        "speedup",
        "per-prompt speedup median [IQR]",
        "timed in AR's run",
    ]
    long_rows = []
    for model in models:
        for b in benches:
            for m in methods:
                hit = c[(c["model"] == model) & (c["bench"] == b) & (c["method"] == m)]
                for _, r in hit.iterrows():
                    iqr = (
                        "—"
                        if np.isnan(r["speedup_q25"])
                        else f"{r['speedup_median']:.2f} [{r['speedup_q25']:.2f}–{r['speedup_q75']:.2f}]"
                    )
                    same = r["ar_same_session"]
                    same = "—" if np.isnan(same) else f"{100 * same:.0f}%" + (" ⚠" if same < 1 else "")
                    long_rows.append(
                        [
                            model_name(model),
                            bench_name(b),
                            method_name(m),
                            r["prompts"],
                            fmt(r["tau"]),
                            fmt(r["tokens_per_s"], 1),
                            fmt_ratio(r["speedup"]),
                            iqr,
                            same,
                        ]
                    )
    output.files += write_table(
        out,
        "main_results_long",
        long_header,
        long_rows,
        "Main results per cell, with the spread of per-prompt speedups",
        [
            "speedup is a ratio of sums (Σ tokens / Σ time vs AR's), so one slow prompt weighs in full; the median and IQR are over per-prompt speedups.",
            "timed in AR's run: share of prompts whose AR reference row comes from the same run (the paper wants 100%; ⚠ = a resumed run, timings taken at different times).",
            res.scope(),
        ],
    )
    output.files += save_figure(
        _bars(c, "speedup", "speedup over AR (×)", "wall-clock speedup over AR (Goose annotated)", "{:.2f}×"),
        out,
        "main_speedup",
    )
    output.files += save_figure(
        _bars(c, "tau", "τ (tokens per forward call)", "τ per method (Goose annotated)", "{:.2f}"),
        out,
        "main_tau",
    )
    if "goose" not in methods:
        output.notes.append("main results: no Goose rows yet (nothing annotated)")
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
