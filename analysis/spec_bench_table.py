"""The Spec-Bench table: per Spec-Bench category (multi-turn conversation, translation, summarisation, QA,
math reasoning, RAG) and overall, τ and the wall-clock speed-up over AR of the training-free methods, in
Spec-Bench's layout, beside the leaderboard's published training-free rows (other models and GPUs).

Reads the `bench=spec_bench` rows (greedy): the side-by-side `make bench` runs under results/bench/<run>/
(`python -m experiments.bench --benches spec_bench --per-category N`; speed-up per repeat, the median over
repeats) and the run.py rows of --results (each cell timed in its own run: the speed-up is not interleaved).
One table per source of rows × model × prompt form (chat template, a base model's plain instruction format, or
raw). A row's category comes from its prompt id: Spec-Bench's question ids are laid out in fixed ranges per
category (goose.records.spec_bench, data/spec_bench/question.jsonl; Spec-Bench's own speed.py splits by the same
ranges). τ = Σ generated / Σ forward calls; speed-up = tokens/s over AR's on the prompts every listed method
completed (every repeat).

Degenerate prompts: each table's notes count, per category, the prompts whose engine AR output (the
reference every contender's output is checked against) is degenerate (goose.records.degenerate: it ran to
max_new_tokens with more than half its 4-grams repeats; computed from `output_ids` for rows without the
flag), and `<table>_nondegenerate` is the speed-up table again without those prompts: a loop is easy to
draft, so a base model's loops inflate a speed-up that its answers would not show.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from analysis.load import Results
from analysis.names import method_name, model_name
from analysis.report import Output, Skip, cli, fmt, write_table
from analysis.wall_clock import run_folders
from goose.records.degenerate import row_degenerate
from goose.records.results import read_rows
from goose.records.spec_bench import SPEC_BENCH, SPEC_BENCH_CATEGORIES, spec_bench_category

DESCRIPTION = __doc__.splitlines()[0]
PAPER_VALUES = Path(__file__).with_name("paper_values.yaml")
OVERALL = "overall"
CATEGORY_KEYS = [c[0] for c in SPEC_BENCH_CATEGORIES]
CATEGORY_COLUMNS = {c[0]: c[1] for c in SPEC_BENCH_CATEGORIES} | {"overall": "Overall"}
ALL = [*CATEGORY_KEYS, "overall"]
TABLE_METHODS = [
    "ar",
    "pld",
    "lookahead",
    "rest",
    "tr",
    "sam",
    "suffix",
    "logitspec",
    "hierarchy",
    "source_select",
    "opt_tree",
    "goose",
]
NAMES = {"lookahead": "Lookahead", "rest": "REST", "logitspec": "LogitSpec", "hierarchy": "Hierarchy Drafting",
         "source_select": "Source selection", "tr": "Token Recycling"}  # fmt: skip
COLUMNS = ["method", "bench", "prompt_id", "repeat", "generated_tokens", "forward_calls", "wall_time_s"]
FORM = ["model", "chat_template", "prompt_format"]  # a table's model and prompt form


def display_name(method: str) -> str:
    return NAMES.get(method) or method_name(method)


def group_metrics(df: pd.DataFrame, groups: Sequence[str]) -> dict[tuple[str, str], dict[str, float]]:
    """{(method, group): tau, speedup, prompts} for every group of `groups` plus OVERALL, on the prompts
    (`group`, `prompt_id`) every method completed in every repeat; speedup = the median over repeats of
    tokens/s over AR's (NaN without AR rows)."""
    if df.empty:
        return {}
    df = df.assign(repeat=df["repeat"].fillna(0).astype(int))
    methods, repeats = df["method"].unique(), df["repeat"].unique()
    have = df.groupby(["group", "prompt_id"])[["method", "repeat"]].apply(
        lambda g: len(set(zip(g["method"], g["repeat"], strict=True)))
    )
    complete = set(have[have == len(methods) * len(repeats)].index)
    df = df[[(g, p) in complete for g, p in zip(df["group"], df["prompt_id"], strict=True)]]
    out: dict[tuple[str, str], dict[str, float]] = {}
    for group in [*groups, OVERALL]:
        sel = df if group == OVERALL else df[df["group"] == group]
        if sel.empty:
            continue
        rate = sel.groupby(["method", "repeat"])[["generated_tokens", "wall_time_s"]].sum()
        for method, m in sel.groupby("method"):
            fwd = m["forward_calls"].sum()
            ratios = []
            for rep in repeats:
                if "ar" not in methods:
                    break
                mine, ar = rate.loc[(method, rep)], rate.loc[("ar", rep)]
                if mine["wall_time_s"] > 0 and ar["wall_time_s"] > 0 and ar["generated_tokens"] > 0:
                    ratios.append(
                        (mine["generated_tokens"] / mine["wall_time_s"])
                        / (ar["generated_tokens"] / ar["wall_time_s"])
                    )
            out[(method, group)] = {
                "tau": m["generated_tokens"].sum() / fwd if fwd else float("nan"),
                "speedup": statistics.median(ratios) if ratios else float("nan"),
                "prompts": len(set(zip(m["group"], m["prompt_id"], strict=True))),
            }
    return out


def plain_or_auto(df: pd.DataFrame, methods: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """`df`'s rows of `methods`, a method without rows of its own taken from its budget=auto rows
    (`<method>_auto`, e.g. a `make bench` run of `goose:auto`); also the methods so taken."""
    present = set(df["method"])
    auto = [m for m in methods if m not in present and f"{m}_auto" in present]
    df = df.assign(
        method=[m.removesuffix("_auto") if m.removesuffix("_auto") in auto else m for m in df["method"]]
    )
    return df[df["method"].isin(list(methods))], auto


def _frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """The table's columns of `rows` (result rows as read), with each row's `degenerate` flag."""
    columns = [*COLUMNS, *FORM, "degenerate"]
    df = pd.DataFrame.from_records(
        [{**{c: r.get(c) for c in columns}, "degenerate": row_degenerate(r)} for r in rows]
    )
    return df if not df.empty else pd.DataFrame(columns=columns)


def _one_config_per_method(df: pd.DataFrame) -> pd.DataFrame:
    """Per method the config with the most rows (a run.py setting may hold variants)."""
    keep = []
    for _, g in df.groupby("method", sort=False):
        counts = g["config_hash"].value_counts(sort=False)
        keep.append(g[g["config_hash"] == counts.idxmax()])
    return pd.concat(keep) if keep else df


def row_sources(res: Results, benches: set[str]) -> Iterator[tuple[str, pd.DataFrame]]:
    """(what the rows are, their frame) per source × model × prompt form, greedy rows of `benches` only:
    each `make bench` run under the records (`analysis.wall_clock.run_folders`), then the run.py rows of
    --results."""
    runs = [folder for _, folder, _ in run_folders(res.records_dir())]
    for run in runs:
        rows = [
            r
            for r in read_rows(run)
            if r.get("bench") in benches
            and r.get("status", "ok") == "ok"
            and not float(r.get("temperature") or 0.0)
            and r.get("repeat") is not None
        ]
        df = _frame(rows)
        for (model, chat, form), g in df.groupby(FORM, dropna=False, sort=True):
            yield f"`make bench` run {run.name}, {model_name(model)}, {_form(chat, form)}, side by side", g
    frames = [f for f in (res.rows, res.chat_rows, res.formatted_rows) if not f.empty and "bench" in f]
    if not frames:
        return
    df = pd.concat(frames, ignore_index=True)
    df = df[df["bench"].isin(benches)]
    if "repeat" in df:
        df = df[df["repeat"].isna()]  # rows of a bench run are read from its own folder above
    for column in ("prompt_format", "degenerate"):  # frames of rows written before these fields
        df = df if column in df else df.assign(**{column: None})
    keys = [*FORM, "max_new_tokens", "dtype"]
    for (model, chat, form, max_new, dtype), g in df.groupby(keys, dropna=False, sort=True):
        g = _one_config_per_method(g).assign(repeat=0)
        title = f"run.py rows, {model_name(model)}, {_form(chat, form)}, {dtype}, max_new_tokens {max_new}"
        yield title + ", each cell timed in its own run", g[[*COLUMNS, *FORM, "degenerate"]]


def _form(chat: Any, prompt_format: Any = None) -> str:
    """The prompt form in words: chat template, a base model's format (goose.harness.chat), raw prompts."""
    if isinstance(prompt_format, str):
        return f"base-model format {prompt_format!r}"
    return "chat template" if bool(chat) and chat == chat else "raw prompts"


def degenerate_prompts(df: pd.DataFrame) -> set[tuple[str, str]] | None:
    """(group, prompt_id) of the prompts whose AR output is degenerate in any repeat; None without AR rows
    that say (no AR rows, or rows without output_ids)."""
    ar = df[(df["method"] == "ar") & df["degenerate"].notna()]
    if ar.empty:
        return None
    flagged = ar[ar["degenerate"].astype(bool)]
    return set(zip(flagged["group"], flagged["prompt_id"], strict=True))


def degenerate_line(df: pd.DataFrame, degenerate: set[tuple[str, str]] | None, groups: Sequence[str]) -> str:
    """The note counting, per category, the prompts of the table whose AR output is degenerate."""
    if degenerate is None:
        return "Degenerate AR outputs: not known (no AR rows with output_ids)."
    ar = df[df["method"] == "ar"]
    prompts = {g: set(ar.loc[ar["group"] == g, "prompt_id"]) for g in groups}
    prompts[OVERALL] = {p for g in groups for p in prompts[g]}
    bad = {g: {p for gg, p in degenerate if gg == g} for g in groups}
    bad[OVERALL] = {p for g in groups for p in bad[g]}
    counts = ", ".join(
        f"{CATEGORY_COLUMNS.get(g, g)} {len(bad[g] & prompts[g])}/{len(prompts[g])}"
        for g in [*groups, OVERALL]
    )
    return (
        f"Prompts whose engine AR output is degenerate (ran to max_new_tokens, > half its 4-grams repeats; "
        f"goose.records.degenerate): {counts}; `_nondegenerate`: the speed-ups without them."
    )


def speed_rows(metrics: dict[tuple[str, str], dict[str, float]]) -> list[list[str]]:
    """The speed-up table's rows of TABLE_METHODS: per category ×, then overall τ and ×."""
    out = []
    for m in TABLE_METHODS:
        cell = {g: metrics.get((m, g), {}) for g in ALL}
        out.append(
            [display_name(m)]
            + [fmt(cell[g].get("speedup")) for g in CATEGORY_KEYS]
            + [fmt(cell[OVERALL].get("tau")), fmt(cell[OVERALL].get("speedup"))]
        )
    return out


def prompts_line(metrics: dict[tuple[str, str], dict[str, float]]) -> str:
    counts = {g: max((v["prompts"] for (_, gg), v in metrics.items() if gg == g), default=0) for g in ALL}
    return "Prompts per category (every method, every repeat): " + ", ".join(
        f"{CATEGORY_COLUMNS.get(g, g)} {counts[g]}" for g in ALL
    )


def leaderboard(path: Path = PAPER_VALUES) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["spec_bench_leaderboard"]


def published_rows() -> tuple[list[list[str]], list[list[str]], list[str]]:
    """The published training-free rows in the speed-up table's and the τ table's columns, and the notes
    naming their settings and sources."""
    lb = leaderboard()
    speed_rows, tau_rows = [], []
    for entry in lb["rows"]:
        label = f"{entry['method']} (published: {entry['model']}, {entry['gpu']})"
        speed = entry.get("speedup") or {}
        tau = entry.get("tau_by_category") or {}
        if speed:
            speed_rows.append(
                [
                    label,
                    *(fmt(speed.get(k)) for k in CATEGORY_KEYS),
                    fmt(entry.get("tau")),
                    fmt(speed.get(OVERALL)),
                ]
            )
        tau_rows.append([label, *(fmt(tau.get(k)) for k in CATEGORY_KEYS), fmt(entry.get("tau"))])
    return (
        speed_rows,
        tau_rows,
        ["Rows marked published: " + lb["note"], *sorted({e["source"] for e in lb["rows"]})],
    )


def build(res: Results, out: Path) -> Output:
    files, notes = [], []
    pub_speed, pub_tau, pub_notes = published_rows()
    header = ["Method", *(CATEGORY_COLUMNS[g] for g in CATEGORY_KEYS)]
    index = 0
    for title, df in row_sources(res, {SPEC_BENCH}):
        df, auto = plain_or_auto(df, TABLE_METHODS)
        df = df.copy()
        df["group"] = [spec_bench_category(p) for p in df["prompt_id"]]
        dropped = int(df["group"].isna().sum())
        df = df[df["group"].notna()]
        metrics = group_metrics(df, CATEGORY_KEYS)
        if not metrics:
            continue
        index += 1
        tau_rows = [
            [display_name(m)] + [fmt(metrics.get((m, g), {}).get("tau")) for g in ALL] for m in TABLE_METHODS
        ]
        degenerate = degenerate_prompts(df)
        common = ["— : the method has no rows here (or no AR rows for a speed-up)."]
        if auto:
            common.append(
                "At budget=auto (its `<method>_auto` rows): " + ", ".join(map(display_name, auto)) + "."
            )
        if dropped:
            common.append(f"{dropped} rows with a prompt id outside Spec-Bench's ranges left out.")
        counted = [prompts_line(metrics), degenerate_line(df, degenerate, CATEGORY_KEYS), *common]
        name = f"spec_bench_table_{index}"
        files += write_table(
            out,
            name,
            [*header, "τ", "Overall ×"],
            speed_rows(metrics) + pub_speed,
            f"Spec-Bench layout, wall-clock speed-up over AR per category, τ and overall: {title}",
            notes=[*counted, *pub_notes],
        )
        files += write_table(
            out,
            f"{name}_tau",
            [*header, "Overall"],
            tau_rows + pub_tau,
            f"Spec-Bench layout, τ (tokens per forward) per category: {title}",
            notes=[*counted, *pub_notes],
        )
        keep = [
            (g, p) not in (degenerate or set()) for g, p in zip(df["group"], df["prompt_id"], strict=True)
        ]
        clean = group_metrics(df[keep], CATEGORY_KEYS) if degenerate is not None else {}
        if clean:
            files += write_table(
                out,
                f"{name}_nondegenerate",
                [*header, "τ", "Overall ×"],
                speed_rows(clean) + pub_speed,
                "Spec-Bench layout, wall-clock speed-up over AR per category, τ and overall, without the "
                f"prompts whose AR output is degenerate: {title}",
                notes=[
                    prompts_line(clean),
                    degenerate_line(df, degenerate, CATEGORY_KEYS),
                    *common,
                    *pub_notes,
                ],
            )
        notes.append(title)
    if not files:
        raise Skip(
            "no greedy bench=spec_bench rows (run experiments.bench --benches spec_bench --per-category N)"
        )
    return Output(files, notes)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
