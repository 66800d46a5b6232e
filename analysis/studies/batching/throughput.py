"""Continuous batching (issue 58): each contender's output tokens/s over AR's at the same concurrency, per
dtype, from `make batching`'s rows (experiments/batching.py). A ratio is taken per repeat (the contender and
AR of one round) and shown as the median [min, max] over repeats; TPOT p50 / p99 are medians over repeats
of each run's per-request percentiles; waste = verified nodes that were neither an anchor nor accepted, as a
share of verified nodes; identical = outputs equal to batch-1 AR's (over every repeat), with divergences
split into near-ties and real mismatches by their top-2 margin. Goodput: requests per second whose TPOT meets
a target (a multiple of batch-1 AR's TPOT), the serving papers' measure of useful throughput.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.load import Results
from analysis.report import Output, Skip, cli, save_figure, write_table
from analysis.studies.batching.goodput import goodput_table
from analysis.studies.batching.replay import grid_surface, interpolate, replay, rows_surface, traces_of
from analysis.studies.batching.table_style import method_rank, spread
from goose.records.results import read_rows

DESCRIPTION = __doc__.splitlines()[0]


def batching_rows(folder: Path) -> pd.DataFrame:
    rows = read_rows(sorted(folder.glob("*.jsonl*"))) if folder.is_dir() else []
    df = pd.DataFrame([r for r in rows if r.get("study") == "batching"])
    if not df.empty:
        df["run"] = df["run"].fillna("main") if "run" in df.columns else "main"
    return df


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
    for (model, dtype, run), d in df.groupby(["model", "dtype", "run"], sort=True):
        ar_c1 = d[(d["method"] == "ar") & (d["concurrency"] == 1)]["tokens_per_s"].tolist()
        for method in sorted(d["method"].unique(), key=method_rank):
            for c in sorted(d["concurrency"].unique()):
                g = d[(d["method"] == method) & (d["concurrency"] == c)]
                ar = d[(d["method"] == "ar") & (d["concurrency"] == c)]
                if g.empty or ar.empty:
                    continue
                rs = ratios(g, ar)
                curves.setdefault((f"{model} {dtype} ({run})", method), {})[int(c)] = statistics.median(rs)
                nodes, waste = g["nodes"].sum(), g["waste_nodes"].sum()
                split = g[["draft_s", "forward_s", "walk_s", "update_s"]].sum()
                total = split.sum()
                rows.append(
                    [
                        model,
                        dtype,
                        run,
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
        for (s, method), curve in sorted(curves.items(), key=lambda kv: method_rank(kv[0][1])):
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


PROJECTED_CONCURRENCY = (1, 4, 16, 64)
GPU_SHAPE = "vicuna-7b"  # the GPU record's 7B shape (random weights: timing only)


def measured_rate(
    df: pd.DataFrame, model: str, dtype: str, method: str, c: int, run: str
) -> tuple[float, str]:
    """Median tokens/s of (method, c) in `run`'s rows, else in run "main"'s, else in any run's; ("nan", "") if
    none."""
    g = df[
        (df["model"] == model) & (df["dtype"] == dtype) & (df["method"] == method) & (df["concurrency"] == c)
    ]
    same, main = g[g["run"] == run], g[g["run"] == "main"]
    use = same if not same.empty else main if not main.empty else g
    if use.empty:
        return float("nan"), ""
    return statistics.median(use["tokens_per_s"]), str(use["run"].iloc[0])


def trace_rows(df: pd.DataFrame) -> pd.DataFrame:
    if "traces" not in df.columns:
        return df.iloc[0:0]
    t = df[df["traces"].apply(lambda v: isinstance(v, list) and bool(v))]
    return t.sort_values("repeat").drop_duplicates(["model", "dtype", "method"])


def validation_table(df: pd.DataFrame, folder: Path) -> tuple[list[list[str]], list[float]]:
    """Replayed against measured tokens/s per (model, dtype, method, concurrency) on the measured surface."""
    rows, errors = [], []
    for _, tr in trace_rows(df).iterrows():
        surface_file = folder / f"surface-{tr['model']}-{tr['dtype']}.json"
        if not surface_file.is_file():
            continue
        grid = json.loads(surface_file.read_text())
        surface = grid_surface(grid["nodes"], {int(k): v for k, v in grid["seconds"].items()})
        traces = traces_of(tr.to_dict())
        for c in sorted(df["concurrency"].unique()):
            measured, run = measured_rate(df, tr["model"], tr["dtype"], tr["method"], int(c), tr["run"])
            if measured != measured:
                continue
            predicted = replay(traces, int(c), surface)
            errors.append(predicted / measured - 1)
            rows.append(
                [
                    tr["model"],
                    tr["dtype"],
                    tr["method"],
                    str(int(c)),
                    f"{measured:.1f} ({run})",
                    f"{predicted:.1f}",
                    f"{100 * errors[-1]:+.0f}%",
                ]
            )
    return rows, errors


def gpu_curve(records: Path) -> tuple[str, list[int], list[float], list[int], list[float]] | None:
    """(device, sizes, seconds, prefill lengths, prefill seconds) of the newest GPU record's 7B-shape graph
    curve at KV 512, or None."""
    for path in sorted(records.glob("gpu/*/gpu_check.json"), reverse=True):
        timing = json.loads(path.read_text()).get("stages", {}).get("timing", {}).get(GPU_SHAPE, {})
        curve = (timing.get("graphs") or {}).get("cost_curve", {}).get("512") or timing.get(
            "cost_curve", {}
        ).get("512")
        prefill = timing.get("prefill")
        if curve and prefill:
            return path.parent.name, curve["sizes"], curve["seconds"], prefill["lengths"], prefill["seconds"]
    return None


def projection_table(df: pd.DataFrame, records: Path) -> tuple[list[list[str]], str]:
    """Each method's replayed tokens/s over AR's on the GPU record's curve, t(k, n) = t1(k · n)."""
    gpu = gpu_curve(records)
    traced = trace_rows(df)
    if gpu is None or traced.empty:
        return [], ""
    device, sizes, seconds, lengths, prefill_s = gpu
    surface = rows_surface(sizes, seconds)

    def prefill(trace) -> float:
        return interpolate(lengths, prefill_s, trace.prompt_tokens)

    rows = []
    for (model, dtype), g in traced.groupby(["model", "dtype"]):
        ar = g[g["method"] == "ar"]
        if ar.empty:
            continue
        ar_traces = traces_of(ar.iloc[0].to_dict())
        for _, tr in sorted(g.iterrows(), key=lambda item: method_rank(item[1]["method"])):
            traces = traces_of(tr.to_dict())
            cells = []
            for c in PROJECTED_CONCURRENCY:
                need = max(2 * c, len(traces))
                many, many_ar = (
                    [traces[i % len(traces)] for i in range(need)],
                    [ar_traces[i % len(ar_traces)] for i in range(need)],
                )
                cells.append(
                    f"{replay(many, c, surface, prefill) / replay(many_ar, c, surface, prefill):.2f}×"
                )
            rows.append([model, dtype, tr["method"], *cells])
    return rows, device


def build(res: Results, out: Path) -> Output:
    folder = res.records_dir() / "studies" / "batching"
    df = batching_rows(folder)
    if df.empty:
        raise Skip(f"no batching rows under {folder}: run `make batching`")
    rows, curves = table(df)
    header = [
        "model",
        "dtype",
        "run",
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
    rows = goodput_table(df)
    if rows:
        output.files += write_table(
            out,
            "goodput",
            [
                "model",
                "dtype",
                "run",
                "method",
                "concurrency",
                "TPOT target (ms)",
                "requests meeting it",
                "goodput (requests/s)",
                "× AR (same concurrency)",
            ],
            rows,
            caption=(
                "Goodput: requests per second whose TPOT meets a target set at a multiple of batch-1 AR's median "
                "TPOT (median [min, max] over repeats)"
            ),
        )
    rows, errors = validation_table(df, folder)
    if rows:
        mean_abs = 100 * statistics.fmean(abs(e) for e in errors)
        output.files += write_table(
            out,
            "replay_validation",
            [
                "model",
                "dtype",
                "method",
                "concurrency",
                "measured tokens/s (run)",
                "replayed tokens/s",
                "error",
            ],
            rows,
            caption="The replay (analysis/studies/batching/replay.py) against the measured runs on this machine's surface",
            notes=[
                f"mean |error| {mean_abs:.1f} % over {len(errors)} cells; worst {100 * max(errors, key=abs):+.1f} %"
            ],
        )
    rows, device = projection_table(df, res.records_dir())
    if rows:
        output.files += write_table(
            out,
            "gpu_projection",
            ["model (traces)", "dtype", "method", *(f"c{c}: × AR" for c in PROJECTED_CONCURRENCY)],
            rows,
            caption=(
                f"A PROJECTION, not a measurement: this machine's per-request traces replayed on {device}'s "
                f"{GPU_SHAPE}-shape forward curve (random weights, timing only), t(k, n) = t1(k · n)"
            ),
            notes=[
                "Acceptance is the small model's on this machine; the host's draft and update time is as measured "
                "here; attention's growth with the batch is ignored (t(k, n) = t1(k · n))."
            ],
        )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
