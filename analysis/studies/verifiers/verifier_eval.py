"""Verifiers of sampled drafts, matched evaluation (issue 32; VERIFY.md; arXiv 2602.16994, 2602.16961): τ and,
where AR sampling was timed in the same run, the wall-clock speedup over it, per model × benchmark ×
temperature × drafter × draft shape × verifier; and whether the papers' orderings show here.

Rows: the sampled rows under `<records>/studies/verifiers` (the side-by-side runs of `make bench-verifiers`)
where there are any, else `Results.sampled_rows`; of them the drafters that carry their proposal q (STAND,
the self-draft), every `sampling.verifier`. The draft shape is the method config's `shape` (tree when absent);
the drafter is the method's name without its shape suffix. τ = Σ generated / Σ forward calls over every
prompt and sample of the cell; every cell of one (model, bench, temperature) is restricted to the
(prompt, seed) pairs all of them completed. `auto` on these drafters is recursive rejection sampling
without replacement (`rrs`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.load import Results, cells, load
from analysis.names import bench_name
from analysis.report import Output, Skip, cli, fmt, save_figure, write_table
from analysis.studies.verifiers.delayed_shape import write_shape_tables

DESCRIPTION = __doc__.splitlines()[0]
DRAFTERS = ("stand", "self_draft")  # drafters whose drafts carry q
SHAPES = ["tree", "chain", "iid", "delayed"]
VERIFIERS = ["auto", "rrs", "rrs_iid", "traversal", "block", "gbv"]
KEYS = ["model", "bench", "temperature"]


def drafter_and_shape(method: str, config: dict | None) -> tuple[str, str]:
    """(drafter, draft shape) of a method: `stand_chain` -> (stand, chain); `_auto` (budget=auto) kept."""
    shape = str((config or {}).get("shape", "tree"))
    name = method[: -len("_auto")] if method.endswith("_auto") else method
    if name.endswith("_" + shape):
        name = name[: -len(shape) - 1]
    return name + ("_auto" if method.endswith("_auto") else ""), shape


def sampled_rows(res: Results) -> pd.DataFrame:
    """The matched evaluation's rows: those under <records>/studies/verifiers where there are any, else the results'
    own sampled rows."""
    folder = res.records_dir() / "studies" / "verifiers"
    if folder.is_dir():
        rows = load(folder).sampled_rows
        if not rows.empty:
            return rows
    return res.sampled_rows


def sample_keys(df: pd.DataFrame) -> pd.Series:
    """Each row's (prompt, sample seed) as one string "<prompt_id>#<seed>": the unit a sampled cell is
    compared over."""
    seeds = df["sample_seed"].map(lambda s: "" if s is None or s != s else str(int(s)))
    return df["prompt_id"].astype(str) + "#" + seeds


def _rows(res: Results) -> pd.DataFrame:
    df = sampled_rows(res)
    if df.empty:
        raise Skip("no sampled rows (temperature > 0): run +experiment=cpu_verifiers")
    df = df.copy()
    df["verifier"] = df["verifier"].fillna("auto") if "verifier" in df else "auto"
    pairs = [drafter_and_shape(m, c) for m, c in zip(df["method"], df["method_config"], strict=True)]
    df["drafter"] = [d for d, _ in pairs]
    df["shape"] = [s for _, s in pairs]
    base = df["drafter"].str.replace("_auto", "", regex=False)
    drafts = df[base.isin(DRAFTERS)]
    if drafts.empty or (drafts["verifier"] == "auto").all() and drafts["shape"].eq("tree").all():
        raise Skip("no rows of other verifiers or draft shapes: run +experiment=cpu_verifiers")
    return pd.concat([df[df["method"] == "ar"], drafts])


def grid(res: Results) -> pd.DataFrame:
    """One row per (model, bench, temperature, drafter, shape, verifier): n, τ, speedup (NaN unless AR ran
    in the same session)."""
    df = _rows(res)
    frames = []
    for _, g in df.groupby(KEYS, sort=False):
        drafts = g[g["method"] != "ar"]
        if drafts.empty:
            continue
        keys = sample_keys(g)
        groups = drafts.groupby(["method", "config_hash", "verifier"], sort=False).groups
        shared = set.intersection(*(set(keys[idx]) for idx in groups.values()))
        g = g[keys.isin(shared)]
        c = cells(g[g["method"] != "ar"], ar_source=g)
        meta = g.drop_duplicates(["method", "config_hash", "verifier"]).set_index(
            ["method", "config_hash", "verifier"]
        )
        c["drafter"] = [
            meta.loc[(m, h, v), "drafter"]
            for m, h, v in zip(c["method"], c["config_hash"], c["verifier"], strict=True)
        ]
        c["shape"] = [
            meta.loc[(m, h, v), "shape"]
            for m, h, v in zip(c["method"], c["config_hash"], c["verifier"], strict=True)
        ]
        c["n"] = [len(shared)] * len(c)
        c.loc[c["ar_same_session"] < 1.0, "speedup"] = float("nan")
        frames.append(c)
    if not frames:
        raise Skip("no sampled-draft cells with AR rows")
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(
        by=["model", "bench", "temperature", "drafter", "shape", "verifier"],
        key=lambda s: (
            s.map({v: i for i, v in enumerate(SHAPES)})
            if s.name == "shape"
            else (s.map({v: i for i, v in enumerate(VERIFIERS)}) if s.name == "verifier" else s)
        ),
    ).reset_index(drop=True)


def _tau(sub: pd.DataFrame, shape: str, verifiers: tuple[str, ...]) -> tuple[float, str] | None:
    for v in verifiers:
        hit = sub[(sub["shape"] == shape) & (sub["verifier"] == v)]
        if not hit.empty:
            return float(hit["tau"].iloc[0]), v
    return None


# (claim, (shape, verifiers) of the left side, (shape, verifiers) of the right side)
ORDERINGS = [
    ("Traversal ≥ RRS on trees", ("tree", ("traversal",)), ("tree", ("rrs", "auto"))),
    ("Block ≥ token-level on chains", ("chain", ("block",)), ("chain", ("rrs", "auto"))),
    ("GBV (K ≥ 2 paths) > BV (one chain)", ("iid", ("gbv",)), ("chain", ("block",))),
    ("delayed ≥ root i.i.d. (Traversal)", ("delayed", ("traversal",)), ("iid", ("traversal",))),
    ("delayed ≥ root i.i.d. (GBV)", ("delayed", ("gbv",)), ("iid", ("gbv",))),
]


def orderings(g: pd.DataFrame) -> list[list[str]]:
    rows = []
    for (model, bench, temp, drafter), sub in g.groupby(
        ["model", "bench", "temperature", "drafter"], sort=False
    ):
        for claim, left, right in ORDERINGS:
            a, b = _tau(sub, *left), _tau(sub, *right)
            if a is None or b is None:
                continue
            holds = a[0] >= b[0] if "≥" in claim else a[0] > b[0]
            rows.append(
                [
                    model,
                    bench_name(bench),
                    f"{float(temp):g}",
                    drafter,
                    claim,
                    fmt(a[0]),
                    fmt(b[0]),
                    f"{100 * (a[0] / b[0] - 1):+.1f}%" if b[0] else "—",
                    "yes" if holds else "no",
                ]
            )
    return rows


def _figure(g: pd.DataFrame, out: Path) -> list[Path]:
    panels = list(g.groupby(["model", "bench", "temperature", "drafter"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.4), squeeze=False)
    for ax, ((model, bench, temp, drafter), sub) in zip(axes[0], panels, strict=True):
        shapes = [s for s in SHAPES if s in set(sub["shape"])]
        verifiers = [v for v in VERIFIERS if v in set(sub["verifier"])]
        width = 0.8 / max(len(verifiers), 1)
        for j, v in enumerate(verifiers):
            xs, ys = [], []
            for i, s in enumerate(shapes):
                hit = sub[(sub["shape"] == s) & (sub["verifier"] == v)]
                if not hit.empty:
                    xs.append(i + (j - (len(verifiers) - 1) / 2) * width)
                    ys.append(float(hit["tau"].iloc[0]))
            ax.bar(xs, ys, width=width, label=v)
        ax.set_xticks(range(len(shapes)), shapes)
        ax.set_title(f"{model} · {bench_name(bench)} · T={float(temp):g} · {drafter}", fontsize=8)
        ax.set_ylabel("τ (tokens / forward call)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][-1].legend(fontsize=7, title="verifier", title_fontsize=7)
    fig.suptitle("Verifiers of sampled drafts: τ per draft shape", fontsize=10)
    return save_figure(fig, out, "verifier_eval")


def scope(g: pd.DataFrame) -> str:
    """The sampled rows' scope in words (Results.scope describes the greedy rows)."""
    lengths = ", ".join(str(int(x)) for x in sorted(set(g["max_new_tokens"].dropna())))
    return (
        f"Sampled runs: {', '.join(sorted(set(g['model'])))}; up to {int(g['n'].max())} (prompt, seed) pairs "
        f"per cell; max_new_tokens {lengths}"
    )


def build(res: Results, out: Path) -> Output:
    g = grid(res)
    table = [
        [
            r["model"],
            bench_name(r["bench"]),
            f"{float(r['temperature']):g}",
            r["drafter"],
            r["shape"],
            r["verifier"],
            int(r["n"]),
            fmt(r["tau"]),
            fmt(r["speedup"]),
        ]
        for _, r in g.iterrows()
    ]
    files = write_table(
        out,
        "verifier_eval",
        ["Model", "Bench", "T", "Drafter", "Shape", "Verifier", "n", "τ", "speedup vs AR sampling"],
        table,
        "Verifiers of sampled drafts: τ and speedup against AR sampling (same prompt, settings, seed)",
        notes=[
            "n = (prompt, seed) pairs every cell of the (model, bench, T) completed; auto = rrs (without replacement).",
            "speedup only where AR sampling ran in the same session (else —); τ does not depend on timing.",
            scope(g),
        ],
    )
    files += write_table(
        out,
        "verifier_orderings",
        ["Model", "Bench", "T", "Drafter", "Claim (papers)", "τ left", "τ right", "difference", "holds"],
        orderings(g),
        "The papers' orderings of verifiers and draft shapes, as measured here",
        notes=[
            "GBV against Block compares K i.i.d. paths with one chain of the drafter's own length.",
            scope(g),
        ],
    )
    files += _figure(g, out)
    shapes = write_shape_tables(
        res.records_dir() / "studies" / "delayed_shape", out
    )  # the delayed shape per setting
    return Output(files + ([shapes] if shapes else []))


if __name__ == "__main__":
    cli(build, DESCRIPTION)
