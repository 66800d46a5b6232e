"""Continuous batching (issue 58): each contender's output tokens/s over AR's at the same concurrency, per
dtype, from `make batching`'s rows (experiments/batching.py). A ratio is taken per repeat (the contender and
AR of one round) and shown as the median [min, max] over repeats; TPOT p50 / p99 are medians over repeats
of each run's per-request percentiles; waste = verified nodes that were neither an anchor nor accepted, as a
share of verified nodes; identical = outputs equal to batch-1 AR's (over every repeat), with divergences
split into near-ties and real mismatches by their top-2 margin.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.load import Results
from analysis.names import order_key
from analysis.report import Output, Skip, cli, save_figure, write_table
from goose.records.results import read_rows

DESCRIPTION = __doc__.splitlines()[0]


def batching_rows(folder: Path) -> pd.DataFrame:
    rows = read_rows(sorted(folder.glob("*.jsonl*"))) if folder.is_dir() else []
    return pd.DataFrame([r for r in rows if r.get("study") == "batching"])


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}, {fmt.format(max(values))}]"


def ratios(g: pd.DataFrame, ar: pd.DataFrame) -> list[float]:
    """Per repeat: the contender's tokens/s over AR's at the same concurrency in the same round."""
    base = dict(zip(ar["repeat"], ar["tokens_per_s"], strict=True))
    return [t / base[r] for r, t in zip(g["repeat"], g["tokens_per_s"], strict=True) if r in base]


def divergences(g: pd.DataFrame) -> str:
    items = [d for ds in g["diverged"] for d in ds]
    total = int(g["requests"].sum())
    ties = sum(bool(d.get("near_tie")) for d in items)
    return f"{total - len(items)}/{total}" + (
        f" ({ties} near-tie, {len(items) - ties} real)" if items else ""
    )


def table(df: pd.DataFrame) -> tuple[list[list[str]], dict[tuple[str, str], dict[int, float]]]:
    rows, curves = [], {}
    for (model, dtype), d in df.groupby(["model", "dtype"], sort=True):
        ar_c1 = d[(d["method"] == "ar") & (d["concurrency"] == 1)]["tokens_per_s"].tolist()
        for method in sorted(d["method"].unique(), key=order_key):
            for c in sorted(d["concurrency"].unique()):
                g = d[(d["method"] == method) & (d["concurrency"] == c)]
                ar = d[(d["method"] == "ar") & (d["concurrency"] == c)]
                if g.empty or ar.empty:
                    continue
                rs = ratios(g, ar)
                curves.setdefault((f"{model} {dtype}", method), {})[int(c)] = statistics.median(rs)
                nodes, waste = g["nodes"].sum(), g["waste_nodes"].sum()
                split = g[["draft_s", "forward_s", "walk_s", "update_s"]].sum()
                total = split.sum()
                rows.append(
                    [
                        model,
                        dtype,
                        method,
                        str(int(c)),
                        str(len(g)),
                        spread(g["tokens_per_s"].tolist(), "{:.1f}"),
                        spread(rs) + "×",
                        spread([t / statistics.median(ar_c1) for t in g["tokens_per_s"]]) + "×"
                        if ar_c1
                        else "—",
                        f"{1e3 * statistics.median(g['tpot_p50_s']):.1f}",
                        f"{1e3 * statistics.median(g['tpot_p99_s']):.1f}",
                        f"{100 * waste / nodes:.0f}%" if nodes else "—",
                        " / ".join(f"{100 * split[k] / total:.0f}" for k in split.index) if total else "—",
                        divergences(g),
                    ]
                )
    return rows, curves


def stops_paying(curves: dict[tuple[str, str], dict[int, float]]) -> list[str]:
    """Per (model dtype, method): the lowest concurrency at which the median ratio falls below 1."""
    notes = []
    for (setting, method), curve in sorted(curves.items()):
        if method == "ar":
            continue
        below = [c for c in sorted(curve) if curve[c] < 1.0]
        where = f"below AR from concurrency {below[0]}" if below else "never below AR in the measured range"
        notes.append(
            f"{setting} {method}: {where} (" + ", ".join(f"c{c} {curve[c]:.2f}×" for c in sorted(curve)) + ")"
        )
    return notes


def plot(curves: dict[tuple[str, str], dict[int, float]], out: Path) -> list[Path]:
    settings = sorted({s for s, _ in curves})
    fig, axes = plt.subplots(1, len(settings), figsize=(5 * len(settings), 3.6), squeeze=False)
    for ax, setting in zip(axes[0], settings, strict=True):
        for (s, method), curve in sorted(curves.items(), key=lambda kv: order_key(kv[0][1])):
            if s != setting or method == "ar":
                continue
            cs = sorted(curve)
            ax.plot(cs, [curve[c] for c in cs], marker="o", label=method)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency (requests in the batch)")
        ax.set_ylabel("output tokens/s over AR at the same concurrency")
        ax.set_title(setting)
        ax.legend(fontsize=7)
    return save_figure(fig, out, "speedup_vs_concurrency")


def build(res: Results, out: Path) -> Output:
    folder = res.records_dir() / "studies" / "batching"
    df = batching_rows(folder)
    if df.empty:
        raise Skip(f"no batching rows under {folder}: run `make batching`")
    rows, curves = table(df)
    header = [
        "model",
        "dtype",
        "method",
        "concurrency",
        "repeats",
        "tokens/s",
        "× AR (same concurrency)",
        "× AR at concurrency 1",
        "TPOT p50 ms",
        "TPOT p99 ms",
        "waste",
        "draft / forward / walk / update %",
        "identical to batch-1 AR",
    ]
    output = Output()
    output.files += write_table(
        out,
        "throughput",
        header,
        rows,
        caption="Continuous batching: output tokens/s per method and concurrency (median [min, max] over repeats)",
        notes=stops_paying(curves),
    )
    output.files += plot(curves, out)
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
