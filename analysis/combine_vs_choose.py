"""Combining vs choosing: Goose (merges context n-grams and the model's logits into one tree) against source
selection (verifies the one candidate of PLD / Token Recycling / SuffixDecoding with the best estimated
acceptance) and against each of those sources alone, per benchmark: τ and wall-clock speed-up over AR, with
the answer (which wins where) in one sentence generated from the table.

Rows as analysis/spec_bench_table.py reads them (greedy; each `make bench` run side by side, then the
run.py rows of --results), one table per source of rows × model × prompt form; the benchmarks are the
paper's five and Spec-Bench's six categories (a spec_bench row's category from its question id). τ =
Σ generated / Σ forward calls; speed-up = tokens/s over AR's (median over repeats), on the prompts every
listed method completed.
"""

from __future__ import annotations

import math
from pathlib import Path

from analysis.load import Results
from analysis.names import BENCH_ORDER, bench_name
from analysis.report import Output, Skip, cli, fmt, write_table
from analysis.spec_bench_table import (
    CATEGORY_COLUMNS,
    CATEGORY_KEYS,
    display_name,
    group_metrics,
    plain_or_auto,
    row_sources,
)
from goose.records.spec_bench import SPEC_BENCH, spec_bench_category

DESCRIPTION = __doc__.splitlines()[0]
CONTENDERS = ["goose", "source_select", "pld", "tr", "suffix"]
NEEDED = {"goose", "source_select"}


def group_of(bench: str, prompt_id: str) -> str | None:
    """The benchmark a row counts under: its bench, or for spec_bench its category ("spec_bench:<cat>")."""
    if bench != SPEC_BENCH:
        return bench
    cat = spec_bench_category(prompt_id)
    return None if cat is None else f"{SPEC_BENCH}:{cat}"


def group_label(group: str) -> str:
    if group.startswith(f"{SPEC_BENCH}:"):
        return f"Spec-Bench {CATEGORY_COLUMNS[group.split(':', 1)[1]]}"
    return bench_name(group)


def winners(metrics: dict, groups: list[str], key: str) -> dict[str, str]:
    """Per group, the contender with the largest `key` (ties: the one listed first in CONTENDERS)."""
    out = {}
    for g in groups:
        vals = [(metrics.get((m, g), {}).get(key, math.nan), m) for m in CONTENDERS]
        vals = [(v, m) for v, m in vals if v == v]
        if vals:
            best = max(v for v, _ in vals)
            out[g] = next(m for v, m in vals if v == best)
    return out


def _where(win: dict[str, str]) -> str:
    parts = []
    for m in CONTENDERS:
        groups = [group_label(g) for g, w in win.items() if w == m]
        if groups:
            parts.append(f"{display_name(m)} on {', '.join(groups)}")
    return "; ".join(parts)


def answer(metrics: dict, groups: list[str]) -> str:
    """One sentence: how often combining beats choosing, and which contender wins where, by τ and by wall
    clock (when measured)."""
    by_tau = winners(metrics, groups, "tau")
    by_speed = winners(metrics, groups, "speedup")

    def beats(key: str) -> tuple[int, int]:
        pairs = [
            (metrics[("goose", g)][key], metrics[("source_select", g)][key])
            for g in groups
            if ("goose", g) in metrics and ("source_select", g) in metrics
        ]
        pairs = [(a, b) for a, b in pairs if a == a and b == b]
        return sum(a > b for a, b in pairs), len(pairs)

    won, n = beats("tau")
    text = f"Combining (Goose) beats choosing (source selection) on τ in {won}/{n} benchmarks"
    if by_speed:
        won_s, n_s = beats("speedup")
        text += f" and on wall clock in {won_s}/{n_s}"
    text += f"; the highest τ: {_where(by_tau)}"
    text += f"; the fastest: {_where(by_speed)}." if by_speed else " (wall clock not measured here)."
    return text


def build(res: Results, out: Path) -> Output:
    files, notes = [], []
    index = 0
    for title, df in row_sources(res, set(BENCH_ORDER) | {SPEC_BENCH}):
        df, auto = plain_or_auto(df, ["ar", *CONTENDERS])
        df = df.copy()
        if not NEEDED <= set(df["method"]):
            continue
        df["group"] = [group_of(b, p) for b, p in zip(df["bench"], df["prompt_id"], strict=True)]
        df = df[df["group"].notna()]
        present = set(df["group"])
        groups = [g for g in BENCH_ORDER if g in present]
        groups += [f"{SPEC_BENCH}:{c}" for c in CATEGORY_KEYS if f"{SPEC_BENCH}:{c}" in present]
        # each benchmark on its own common prompts: a method missing one benchmark does not empty the others
        metrics: dict = {}
        for g in groups:
            metrics.update({k: v for k, v in group_metrics(df[df["group"] == g], [g]).items() if k[1] == g})
        if not metrics:
            continue
        index += 1
        rows = []
        for g in groups:
            cells = [metrics.get((m, g), {}) for m in CONTENDERS]
            n = max((c.get("prompts", 0) for c in cells), default=0)
            rows.append(
                [group_label(g), n]
                + [fmt(c.get("tau")) for c in cells]
                + [fmt(c.get("speedup")) for c in cells]
            )
        sentence = answer(metrics, groups)
        header = (
            ["Benchmark", "n"]
            + [f"{display_name(m)} τ" for m in CONTENDERS]
            + [f"{display_name(m)} ×" for m in CONTENDERS]
        )
        files += write_table(
            out,
            f"combine_vs_choose_{index}",
            header,
            rows,
            f"Combining vs choosing sources, τ and wall-clock speed-up over AR: {title}",
            notes=[
                sentence,
                "n = prompts every listed method completed (every repeat); — : no rows, or no AR rows.",
                *(
                    ["At budget=auto (`<method>_auto` rows): " + ", ".join(map(display_name, auto)) + "."]
                    if auto
                    else []
                ),
            ],
        )
        notes.append(f"{title}: {sentence}")
    if not files:
        raise Skip("no greedy rows with both goose and source_select on one benchmark")
    return Output(files, notes)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
