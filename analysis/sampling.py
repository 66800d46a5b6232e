"""Sampling (temperature > 0): τ and wall-clock speedup per method, benchmark and temperature, τ
against temperature, and how Goose's advantage over PLD and TR moves with temperature.

Rows: `Results.sampled_rows` (temperature > 0) beside the greedy reference cells (temperature 0).
A sampled row's speedup is against AR *sampling* of the same prompt, settings and seed
(`goose.records.results.sample_key`); τ = Σ generated / Σ forward calls over every prompt and
sample of the cell. Every listed cell of one (bench, temperature) is restricted to the (prompt,
seed) pairs all of them completed. `identical to AR` is the share of rows whose output equals AR's
sample with the same seed (deterministic drafts, sample-and-match); STAND samples its drafts, so
its rows are exact in distribution only (tests/engine/test_sampling_exactness.py) and show "—".
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.load import Results, cells
from analysis.names import BENCH_ORDER, SAMPLING_METHODS, bench_name, method_name, order_key
from analysis.report import Output, Skip, cli, fmt, save_figure, write_table

DESCRIPTION = __doc__.splitlines()[0]


def _shared_samples(df: pd.DataFrame) -> pd.DataFrame:
    """`df` (one bench × temperature) restricted to the (prompt, seed) pairs every method has."""
    seeds = df["sample_seed"].map(lambda s: "" if s is None or s != s else str(int(s)))
    keys = df["prompt_id"].astype(str) + "#" + seeds
    sets = [set(keys[df["method"] == m]) for m in df["method"].unique()]
    return df[keys.isin(set.intersection(*sets))]


def _grid(res: Results, across_temperatures: bool = False) -> pd.DataFrame:
    """One row per (bench, temperature, method) with τ, speedup, n, identity share;
    `across_temperatures`: only the prompts present at every temperature of the bench (so that τ
    against temperature compares the same prompts)."""
    greedy = res.reference(SAMPLING_METHODS)
    sampled = res.sampled_rows
    if sampled.empty:
        raise Skip("no sampled rows (temperature > 0): run +experiment=cpu_sampling")
    sampled = sampled[sampled["method"].isin(SAMPLING_METHODS) & sampled["is_reference"].astype(bool)]
    sampled = sampled[(sampled["top_p"].astype(float) == 1.0) & (sampled["top_k"].astype(int) == 0)]
    sampled = sampled[sampled["verifier"].fillna("auto") == "auto"]  # other verifiers: verifier_eval.py
    if sampled.empty or greedy.empty:
        raise Skip(
            f"no greedy and sampled rows of {', '.join(SAMPLING_METHODS)}: run +experiment=cpu_sampling"
        )
    if across_temperatures:
        keep: set[tuple] = set()
        for (model, bench), g in pd.concat([greedy, sampled]).groupby(["model", "bench"], sort=False):
            sets = [set(t["prompt_id"]) for _, t in g.groupby(["temperature", "method"], sort=False)]
            keep |= {(model, bench, pid) for pid in set.intersection(*sets)}

        def restrict(df: pd.DataFrame) -> pd.DataFrame:
            triples = zip(df["model"], df["bench"], df["prompt_id"], strict=True)
            return df[[t in keep for t in triples]]

        greedy, sampled = restrict(greedy), restrict(sampled)
    frames = []
    for source in (greedy, sampled):
        for (model, bench, _temp, _max_new, _dtype), g in source.groupby(
            ["model", "bench", "temperature", "max_new_tokens", "dtype"], sort=False
        ):
            if bench not in set(sampled["bench"]) or model not in set(sampled["model"]):
                continue
            shared = _shared_samples(g)
            c = cells(shared)
            c["n"] = [len(shared[shared["method"] == m]) for m in c["method"]]
            c["identical"] = [
                float("nan") if m == "stand" and t > 0 else s
                for m, t, s in zip(c["method"], c["temperature"], c["lossless_share"], strict=True)
            ]
            frames.append(c)
    return pd.concat(frames, ignore_index=True)


def _figure(grid: pd.DataFrame, out: Path) -> list[Path]:
    benches = order_key(grid["bench"], BENCH_ORDER)
    fig, axes = plt.subplots(1, len(benches), figsize=(4.2 * len(benches), 3.4), squeeze=False)
    for ax, bench in zip(axes[0], benches, strict=True):
        sub = grid[grid["bench"] == bench]
        for method in order_key(sub["method"], SAMPLING_METHODS):
            if method == "ar":
                continue
            m = sub[sub["method"] == method].sort_values("temperature")
            ax.plot(m["temperature"].astype(float), m["tau"], marker="o", label=method_name(method))
        ax.set_title(bench_name(bench))
        ax.set_xlabel("temperature T")
        ax.set_ylabel("τ (tokens / forward call)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8)
    fig.suptitle("τ against temperature (SmolLM2-135M, lossless speculative sampling)", fontsize=10)
    return save_figure(fig, out, "sampling_tau_vs_temperature")


def build(res: Results, out: Path) -> Output:
    grid = _grid(res)
    rows = []
    for bench in order_key(grid["bench"], BENCH_ORDER):
        for temp in sorted(set(grid[grid["bench"] == bench]["temperature"].astype(float))):
            sub = grid[(grid["bench"] == bench) & (grid["temperature"].astype(float) == temp)]
            sub = sub.set_index("method")
            for method in order_key(sub.index, SAMPLING_METHODS):
                r = sub.loc[method]
                rows.append(
                    [
                        bench_name(bench),
                        f"{temp:g}",
                        method_name(method),
                        int(r["n"]),
                        fmt(r["tau"]),
                        fmt(r["speedup"]),
                        fmt(r["identical"]),
                    ]
                )
    files = write_table(
        out,
        "sampling",
        ["Bench", "T", "Method", "n", "τ", "speedup vs AR sampling", "identical to AR"],
        rows,
        "Lossless speculative sampling: τ and wall-clock speedup against AR sampling (same prompt, settings, seed)",
        notes=[
            "T = 0 rows are the greedy main grid's cells; n = (prompt, seed) pairs; top_p = 1, no top-k.",
            "identical to AR: share of rows equal to AR's sample with the same seed (STAND: exact in distribution only).",
            res.scope(),
        ],
    )
    grid = _grid(res, across_temperatures=True)
    advantage = []
    for bench in order_key(grid["bench"], BENCH_ORDER):
        for temp in sorted(set(grid[grid["bench"] == bench]["temperature"].astype(float))):
            tau = grid[(grid["bench"] == bench) & (grid["temperature"].astype(float) == temp)].set_index(
                "method"
            )["tau"]
            if {"goose", "pld", "tr"} <= set(tau.index):
                best = max(tau["pld"], tau["tr"])
                advantage.append(
                    [
                        bench_name(bench),
                        f"{temp:g}",
                        int(grid[(grid["bench"] == bench) & (grid["method"] == "goose")]["prompts"].max()),
                        fmt(tau["goose"]),
                        fmt(best),
                        f"{100 * (tau['goose'] / best - 1):+.1f}%",
                    ]
                )
    files += write_table(
        out,
        "sampling_goose_advantage",
        ["Bench", "T", "n", "Goose τ", "max(PLD, TR) τ", "Goose advantage"],
        advantage,
        "How Goose's τ advantage over the better of PLD and TR changes with temperature",
        notes=[
            "Per bench, the prompts present at every temperature (as in the figure); n = (prompt, seed) pairs.",
            res.scope(),
        ],
    )
    files += _figure(grid, out)
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
