"""τ decomposition: max(τ_PLD, τ_TR) (the better single source) plus Goose's synergy gain
τ_Goose − max(τ_PLD, τ_TR), per model and per model × bench, with the gain in %.

Per (model, bench) the three methods are compared on the prompts all three completed. The per
model bar uses each method's τ averaged over the model's benches (each bench weighs the same),
then takes the max of the two averages; the per-bench bars take the max per bench. A negative
gain (Goose below the better single source) is drawn as a hatched segment below the top of the
base bar.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from analysis.load import Results, cells, common_prompts
from analysis.names import BENCH_ORDER, MODEL_NAMES, bench_name, model_name, order_key
from analysis.report import METHOD_COLORS, Output, Skip, cli, fmt, fmt_pct, save_figure, write_table

DESCRIPTION = __doc__.splitlines()[0]
METHODS = ("pld", "tr", "goose")


def decomposition(res: Results) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per model × bench, per model) frames with tau_pld, tau_tr, base, base_from, tau_goose,
    gain, gain_pct, n (prompts compared; per model: benches)."""
    df = res.reference(METHODS)
    if df.empty:
        return pd.DataFrame(), pd.DataFrame()
    c = cells(common_prompts(df))
    wide = c.pivot_table(index=["model", "bench"], columns="method", values="tau", aggfunc="first")
    n = c.groupby(["model", "bench"])["prompts"].min()
    wide = wide.reindex(columns=list(METHODS))
    wide = wide.dropna(subset=["goose"]).dropna(subset=["pld", "tr"], how="all")
    if wide.empty:
        return pd.DataFrame(), pd.DataFrame()
    per_bench = _frame(wide)
    per_bench["n"] = n.reindex(per_bench.index).values
    per_model = _frame(wide.groupby(level="model").mean())
    per_model["n"] = wide.groupby(level="model").size()
    return per_bench.reset_index(), per_model.reset_index()


def _frame(w: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(index=w.index)
    out["tau_pld"], out["tau_tr"], out["tau_goose"] = w["pld"], w["tr"], w["goose"]
    out["base"] = w[["pld", "tr"]].max(axis=1)
    out["base_from"] = np.where(w["pld"].fillna(-np.inf) >= w["tr"].fillna(-np.inf), "PLD", "TR")
    out["gain"] = out["tau_goose"] - out["base"]
    out["gain_pct"] = 100.0 * out["gain"] / out["base"]
    return out


def _stack(ax: plt.Axes, x: np.ndarray, d: pd.DataFrame, width: float) -> None:
    for xi, (_, r) in zip(x, d.iterrows(), strict=True):
        base_color = METHOD_COLORS["pld"] if r["base_from"] == "PLD" else METHOD_COLORS["tr"]
        ax.bar(xi, r["base"], width, color=base_color, edgecolor="white")
        if r["gain"] >= 0:
            ax.bar(xi, r["gain"], width, bottom=r["base"], color=METHOD_COLORS["goose"], edgecolor="white")
        else:
            ax.bar(
                xi,
                -r["gain"],
                width,
                bottom=r["tau_goose"],
                color="none",
                edgecolor=METHOD_COLORS["goose"],
                hatch="///",
            )
        ax.annotate(
            fmt_pct(r["gain_pct"], 0),
            (xi, max(r["base"], r["tau_goose"])),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7,
            fontweight="bold",
        )


def build(res: Results, out: Path) -> Output:
    per_bench, per_model = decomposition(res)
    if per_bench.empty:
        raise Skip("τ decomposition needs Goose and at least one of PLD / TR in the same model × bench")
    output = Output()
    models = order_key(per_bench["model"], list(MODEL_NAMES))
    benches = order_key(per_bench["bench"], BENCH_ORDER)

    many = len(models) > 1
    if many:  # per model on top, per model x bench below (one bar per model inside each bench)
        fig, (ax1, ax2) = plt.subplots(
            2,
            1,
            figsize=(max(8.0, 0.5 * len(models) * len(benches) + 2), 8.5),
            gridspec_kw={"height_ratios": [1, 1.4]},
        )
    else:
        fig, (ax1, ax2) = plt.subplots(
            1,
            2,
            figsize=(3.0 + 1.4 * len(benches), 4.0),
            gridspec_kw={"width_ratios": [1.2, max(2, len(benches))]},
        )
    pm = per_model.set_index("model").loc[models].reset_index()
    _stack(ax1, np.arange(len(models)), pm, 0.6)
    ax1.set_xticks(np.arange(len(models)), [model_name(m) for m in models])
    ax1.set_xlim(-0.6, len(models) - 0.4)
    ax1.set_ylabel("τ (tokens per forward call)")
    ax1.set_title("per model (τ of each method averaged over benches)")

    width = 0.84 / len(models)
    ticks, tick_labels = [], []
    for i, m in enumerate(models):
        d = (
            per_bench[per_bench["model"] == m]
            .set_index("bench")
            .reindex(benches)
            .dropna(subset=["tau_goose"])
        )
        x = np.array([benches.index(b) for b in d.index]) - 0.42 + width * (i + 0.5)
        _stack(ax2, x, d.reset_index(), width * 0.9)
        ticks += list(x)
        tick_labels += [model_name(m)] * len(x)
    if many:
        ax2.set_xticks(ticks, tick_labels, rotation=90, fontsize=7)
        for k, b in enumerate(benches):
            ax2.annotate(
                bench_name(b),
                (k, 0),
                xycoords=("data", "axes fraction"),
                xytext=(0, -62),
                textcoords="offset points",
                ha="center",
                va="top",
                fontweight="bold",
            )
        for k in range(1, len(benches)):
            ax2.axvline(k - 0.5, color="#dddddd", lw=0.8, zorder=0)
        ax2.set_title("per model × bench")
    else:
        ax2.set_xticks(np.arange(len(benches)), [bench_name(b) for b in benches])
        ax2.set_title(f"per bench ({model_name(models[0])})")
    ax2.set_xlim(-0.5, len(benches) - 0.5)
    ax2.set_ylabel("τ (tokens per forward call)")
    for ax in (ax1, ax2):
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    both = pd.concat([per_model, per_bench])
    handles = [
        Patch(color=METHOD_COLORS[m.lower()], label=f"max(τ_PLD, τ_TR) = τ_{m}")
        for m in ("PLD", "TR")
        if (both["base_from"] == m).any()
    ]
    handles.append(Patch(color=METHOD_COLORS["goose"], label="Goose synergy gain"))
    if (both["gain"] < 0).any():
        handles.append(
            Patch(
                facecolor="none",
                edgecolor=METHOD_COLORS["goose"],
                hatch="///",
                label="Goose below the better source",
            )
        )
    fig.suptitle("τ decomposition: better single source + Goose's synergy gain (label: gain in %)")
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0.4 / fig.get_figheight(), 1, 1))
    output.files += save_figure(fig, out, "tau_decomposition")

    header = ["Model", "Bench", "n", "τ PLD", "τ TR", "max(τ PLD, τ TR)", "τ Goose", "gain", "gain %"]
    rows = []
    for m in models:
        for _, r in (
            per_bench[per_bench["model"] == m]
            .set_index("bench")
            .reindex(benches)
            .dropna(subset=["tau_goose"])
            .iterrows()
        ):
            rows.append(
                [
                    model_name(m),
                    bench_name(r.name),
                    r["n"],
                    fmt(r["tau_pld"]),
                    fmt(r["tau_tr"]),
                    f"{fmt(r['base'])} ({r['base_from']})",
                    fmt(r["tau_goose"]),
                    fmt(r["gain"]),
                    fmt_pct(r["gain_pct"]),
                ]
            )
        r = pm.set_index("model").loc[m]
        rows.append(
            [
                model_name(m),
                "mean over benches",
                f"{int(r['n'])} benches",
                fmt(r["tau_pld"]),
                fmt(r["tau_tr"]),
                f"{fmt(r['base'])} ({r['base_from']})",
                fmt(r["tau_goose"]),
                fmt(r["gain"]),
                fmt_pct(r["gain_pct"]),
            ]
        )
    output.files += write_table(
        out,
        "tau_decomposition",
        header,
        rows,
        "τ decomposition: max(τ_PLD, τ_TR) plus Goose's synergy gain",
        [
            "n = prompts all three methods completed; gain % = (τ_Goose − max) / max.",
            "Mean row: each method's τ averaged over benches first, then the max of the two averages.",
            res.scope(),
        ],
    )
    missing = [
        f"{model_name(m)}/{bench_name(b)}"
        for m, b, p, t in per_bench[["model", "bench", "tau_pld", "tau_tr"]].itertuples(index=False)
        if pd.isna(p) or pd.isna(t)
    ]
    if missing:
        output.notes.append(
            "τ decomposition: one of PLD/TR missing in " + ", ".join(missing) + " (max over the one present)"
        )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
