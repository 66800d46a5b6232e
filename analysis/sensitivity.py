"""Hyperparameter sensitivity: Goose's τ against the node budget B, the max depth D, the adjacency
top-k K, the spine share ρ and the spine-ratio tiers (one panel per swept hyperparameter).

A sweep point is a Goose config that differs from the paper's defaults (`GooseConfig()`) in
exactly one of these hyperparameters; the defaults themselves are the shared point of every
panel. In each setting (model, bench, max_new_tokens, dtype) the points of a panel are compared
on the prompts all of them completed. Panels without at least two values are left out (with a
note), and configs that differ in several hyperparameters at once are not drawn.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.load import Results, cells, common_prompts
from analysis.names import BENCH_ORDER, MODEL_NAMES, SYMBOLS, bench_name, format_value, model_name, order_key
from analysis.report import Output, Skip, cli, fmt, save_figure, write_table
from goose.method.config import GooseConfig

DESCRIPTION = __doc__.splitlines()[0]
PARAMS = ["budget", "max_depth", "k", "rho", "spine_ratio_tiers"]
PARAM_TITLES = {
    "budget": "node budget B (nodes)",
    "max_depth": "max depth D (levels)",
    "k": "adjacency top-k K",
    "rho": "spine share ρ of the branch budget",
    "spine_ratio_tiers": "spine-ratio tiers",
}
PLATEAU_SHARE = 0.98  # a plateau starts at the first value whose τ reaches this share of the best


def sweeps(res: Results) -> tuple[pd.DataFrame, list[str]]:
    """Long frame (model, bench, param, value, value_key, tau, prompts, is_default) of every
    sensitivity point, and notes on what could not be used."""
    notes: list[str] = []
    df = res.rows
    if df.empty:
        return pd.DataFrame(), notes
    goose = df[df["method"] == "goose"]
    default = GooseConfig().as_dict()
    if goose.empty:
        return pd.DataFrame(), notes
    point_param: dict[str, str | None] = {}
    multi = set()
    for h, varied in zip(goose["config_hash"], goose["varied"], strict=True):
        if h in point_param or h in multi:
            continue
        keys = list(varied)
        if not keys:
            point_param[h] = None  # the defaults
        elif len(keys) == 1 and keys[0] in PARAMS:
            point_param[h] = keys[0]
        else:
            multi.add(h)
    if multi:
        labels = sorted(set(goose.loc[goose["config_hash"].isin(multi), "label"]))
        notes.append(
            "sensitivity: Goose configs not on a one-hyperparameter sweep, not drawn: " + "; ".join(labels)
        )
    if not any(point_param[h] is None for h in point_param):
        notes.append(
            "sensitivity: no Goose rows at the paper's defaults; panels lack the shared default point"
        )
    frames = []
    for param in PARAMS:
        hashes = [h for h, p in point_param.items() if p == param or p is None]
        sub = goose[goose["config_hash"].isin(hashes)]
        if (
            sub.empty
            or sub["config_hash"].nunique() < 2
            or not any(point_param[h] == param for h in sub["config_hash"])
        ):
            continue
        c = cells(common_prompts(sub))
        c["param"] = param
        c["value"] = [cfg.get(param, default[param]) for cfg in c["method_config"]]
        c["is_default"] = [point_param[h] is None for h in c["config_hash"]]
        # A (model, bench) with only the default point has no sweep of this parameter.
        c = c[c.groupby(["model", "bench", "max_new_tokens"])["config_hash"].transform("nunique") > 1]
        if not c.empty:
            frames.append(
                c[["model", "bench", "max_new_tokens", "param", "value", "is_default", "tau", "prompts"]]
            )
    if not frames:
        return pd.DataFrame(), notes
    out = pd.concat(frames, ignore_index=True)
    out["value_key"] = [format_value(v) for v in out["value"]]
    return out, notes


def mean_curve(s: pd.DataFrame) -> pd.DataFrame:
    """Mean τ over benches per (model, param, value), only at values every bench of the model has."""
    rows = []
    for (model, param), g in s.groupby(["model", "param"], sort=False):
        n_benches = g["bench"].nunique()
        for key, v in g.groupby("value_key", sort=False):
            if v["bench"].nunique() == n_benches:
                rows.append(
                    {
                        "model": model,
                        "param": param,
                        "value_key": key,
                        "value": v["value"].iloc[0],
                        "tau": v["tau"].mean(),
                        "is_default": bool(v["is_default"].iloc[0]),
                    }
                )
    return pd.DataFrame(rows)


def spread(s: pd.DataFrame, param: str) -> dict[str, float]:
    """Per model: max − min of the bench-mean τ over the values of `param`."""
    m = mean_curve(s)
    m = m[m["param"] == param] if not m.empty else m
    return (
        {model: float(g["tau"].max() - g["tau"].min()) for model, g in m.groupby("model")}
        if not m.empty
        else {}
    )


def plateau_onset(s: pd.DataFrame, param: str) -> dict[str, float]:
    """Per model: the smallest value of a numeric `param` whose bench-mean τ reaches
    PLATEAU_SHARE of the best bench-mean τ of the sweep."""
    m = mean_curve(s)
    if m.empty:
        return {}
    out = {}
    for model, g in m[m["param"] == param].groupby("model"):
        g = g.sort_values("value")
        best = g["tau"].max()
        out[model] = float(g.loc[g["tau"] >= PLATEAU_SHARE * best, "value"].iloc[0])
    return out


def _sort_values(values: list) -> list:
    try:
        return sorted(values)
    except TypeError:
        return values


def build(res: Results, out: Path) -> Output:
    s, notes = sweeps(res)
    if s.empty:
        raise Skip(
            "no Goose sensitivity sweep in the results (configs differing from the defaults in one of "
            + ", ".join(SYMBOLS[p] for p in PARAMS)
            + ")"
        )
    output = Output(notes=list(notes))
    models = order_key(s["model"], list(MODEL_NAMES))
    params = [p for p in PARAMS if (s["param"] == p).any()]
    absent = [SYMBOLS[p] for p in PARAMS if p not in params]
    if absent:
        output.notes.append("sensitivity: no sweep of " + ", ".join(absent) + " (panels skipped)")
    benches = order_key(s["bench"], BENCH_ORDER)
    cmap = plt.get_cmap("tab10")
    means = mean_curve(s)
    # One row of panels per model; a single model's panels wrap onto rows of three.
    ncols = len(params) if len(models) > 1 else min(3, len(params))
    rows_per_model = -(-len(params) // ncols)
    fig, axes = plt.subplots(
        len(models) * rows_per_model,
        ncols,
        figsize=(3.4 * ncols + 0.5, 2.9 * len(models) * rows_per_model + 0.8),
        squeeze=False,
        sharey=True if len(models) == 1 else "row",
    )
    for ax in axes.flat[len(models) * len(params) :]:
        ax.set_axis_off()
    for i, model in enumerate(models):
        for j, param in enumerate(params):
            ax = axes[i * rows_per_model + j // ncols, j % ncols]
            sp = s[(s["model"] == model) & (s["param"] == param)]
            if sp.empty:
                ax.set_axis_off()
                ax.set_title(f"{model_name(model)}: no {SYMBOLS[param]} sweep", fontsize=8)
                continue
            values = _sort_values(
                list(dict.fromkeys(sp["value"].map(tuple if param == "spine_ratio_tiers" else lambda v: v)))
            )
            keys = [format_value(v) for v in values]
            numeric = param != "spine_ratio_tiers"
            xpos = {k: (v if numeric else idx) for idx, (k, v) in enumerate(zip(keys, values, strict=True))}
            for bi, b in enumerate(benches):
                d = sp[sp["bench"] == b]
                if d.empty:
                    continue
                d = d.assign(x=d["value_key"].map(xpos)).sort_values("x")
                ax.plot(d["x"], d["tau"], marker="o", ms=3, lw=1, color=cmap(bi % 10), label=bench_name(b))
            mm = means[(means["model"] == model) & (means["param"] == param)] if not means.empty else means
            if len(mm) and len(benches) > 1:
                mm = mm.assign(x=mm["value_key"].map(xpos)).sort_values("x")
                ax.plot(
                    mm["x"], mm["tau"], marker="s", ms=4, lw=2.2, color="black", label="mean over benches"
                )
            dflt = sp.loc[sp["is_default"], "value_key"]
            if len(dflt):
                ax.axvline(xpos[dflt.iloc[0]], color="#888888", ls=":", lw=1)
                ax.annotate(
                    "default",
                    (xpos[dflt.iloc[0]], 1),
                    xycoords=("data", "axes fraction"),
                    fontsize=7,
                    color="#666666",
                    ha="left",
                    va="top",
                    xytext=(2, 0),
                    textcoords="offset points",
                )
            if not numeric:
                ax.set_xticks(range(len(keys)), keys, rotation=20, ha="right")
            ax.set_xlabel(PARAM_TITLES[param])
            ax.set_ylabel("τ (tokens per forward call)" if j % ncols == 0 else "")
            ax.set_title(f"{model_name(model)}: τ vs {SYMBOLS[param]}")
        # One τ scale per model, from AR's τ = 1, so that small spreads look small.
        top = s.loc[s["model"] == model, "tau"].max()
        axes[i * rows_per_model, 0].set_ylim(
            min(1.0, s.loc[s["model"] == model, "tau"].min()) - 0.05, top + 0.1 * max(top - 1.0, 0.5)
        )
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=min(7, len(labels)),
        frameon=False,
        bbox_to_anchor=(0.5, -0.02),
    )
    fig.suptitle("Goose sensitivity: τ per swept hyperparameter (others at the paper's defaults)")
    fig.tight_layout(rect=(0, 0.4 / fig.get_figheight(), 1, 1 - 0.3 / fig.get_figheight()))
    output.files += save_figure(fig, out, "sensitivity")

    header = ["Model", "Hyperparameter", "Value"] + [bench_name(b) for b in benches] + ["Mean τ", "n (min)"]
    rows = []
    for model in models:
        for param in params:
            sp = s[(s["model"] == model) & (s["param"] == param)]
            if sp.empty:
                continue
            values = _sort_values(
                list(dict.fromkeys(sp["value"].map(tuple if param == "spine_ratio_tiers" else lambda v: v)))
            )
            for v in values:
                key = format_value(v)
                d = sp[sp["value_key"] == key].set_index("bench")
                mm = (
                    means[(means["model"] == model) & (means["param"] == param) & (means["value_key"] == key)]
                    if not means.empty
                    else means
                )
                rows.append(
                    [model_name(model), SYMBOLS[param], key + (" (default)" if d["is_default"].any() else "")]
                    + [fmt(d["tau"].get(b, float("nan"))) for b in benches]
                    + [fmt(float(mm["tau"].iloc[0])) if len(mm) else "—", str(int(d["prompts"].min()))]
                )
    summary = []
    for param in params:
        for model, v in spread(s, param).items():
            summary.append(f"{model_name(model)}: spread of mean τ across {SYMBOLS[param]} = {v:.2f}")
        if param in ("budget", "max_depth"):
            for model, v in plateau_onset(s, param).items():
                summary.append(
                    f"{model_name(model)}: mean τ reaches {PLATEAU_SHARE:.0%} of its best from {SYMBOLS[param]} = {format_value(v)}"
                )
    output.files += write_table(
        out,
        "sensitivity",
        header,
        rows,
        "Goose sensitivity: τ per value of each swept hyperparameter",
        summary + ["n = prompts every point of the sweep completed (per bench).", res.scope()],
    )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
