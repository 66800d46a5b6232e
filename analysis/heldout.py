"""The held-out protocol's tables (`make heldout`, issue 56): for each workload of each held-out run, every
contender's tokens/s over engine AR per Spec-Bench question category or per benchmark and over all prompts,
median [min, max] over the repeats (rounds), beside the best single source and hw_tree:auto over it, with the
cells below the non-degradation floors marked ▼ (for a group where hw_tree:auto is, what each compared
contender wrote: its outputs that are not engine AR's and their repetition); and one verdict table over every run.

Reads results/heldout/<run>/ (experiments/heldout/: spec_bench/, fresh/, heldout.json) through
goose.records.heldout, which also defines the columns and floors: a budget=auto contender ≥ 0.98× engine AR,
hw_tree:auto ≥ 1.0× the best single source (per repeat the faster of suffix:auto and pld). Ratios are taken
within a repeat (token-weighted over the prompts every contender completed), then summarised over repeats.
Writes figures/heldout/heldout_<run>_{spec_bench,fresh}.{md,tex} and heldout_verdicts.{md,tex}.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from analysis.load import Results
from analysis.names import bench_name
from analysis.report import Output, Skip, cli, write_table
from analysis.wall_clock import code_note, gate_note, machine
from goose.records.bench_run import spread
from goose.records.heldout import (
    ALL,
    AUTO_FLOOR,
    BEST_SINGLE,
    COMBINED_FLOOR,
    FRESH,
    SPEC,
    VS_BEST,
    below_floor,
    below_in_every_repeat,
    by_question_category,
    floor_of,
    fresh_record,
    group_ratios,
    read_manifest,
    spec_record,
    texts_line,
    texts_written,
    verdict_lines,
)
from goose.records.spec_bench import SPEC_BENCH_QUESTION_CATEGORIES

DESCRIPTION = __doc__.splitlines()[0]
FOLDER = "heldout"
BELOW = "▼"
# The canonical protocol's MT-Bench prompts (`make bench`: --limit 20, the first twenty question ids), which
# Spec-Bench's writing and roleplay questions are: not held out, marked in the tables.
CANONICAL_MTBENCH_IDS = range(81, 101)
SHARED = {c for c, lo, hi in SPEC_BENCH_QUESTION_CATEGORIES if lo in CANONICAL_MTBENCH_IDS}


def runs(records: Path) -> list[Path]:
    """Every held-out run under <records>/heldout/ (a folder with spec_bench/ or fresh/)."""
    home = records / FOLDER
    found = sorted(p for p in home.iterdir() if p.is_dir()) if home.is_dir() else []
    return [p for p in found if (p / SPEC).is_dir() or (p / FRESH).is_dir()]


def cell(column: str, values: list[float]) -> str:
    """median [min, max] over repeats, marked ▼ where the median falls below the column's floor."""
    if not values:
        return "-"
    return spread(values) + (f" {BELOW}" if below_floor(column, values) else "")


def column_name(column: str) -> str:
    return column.removeprefix("engine:")


def group_counts(record: dict[str, Any]) -> Counter:
    """Prompts per group (the record's `bench`) that every contender completed in every repeat."""
    names = list(record["summary"]["tokens_per_s"])
    done = [
        p for p in record["per_prompt"] if all(run.get(n) is not None for run in p["runs"] for n in names)
    ]
    return Counter(p["bench"] for p in done)


def group_label(group: str, counts: Counter, spec: bool) -> str:
    if group == ALL:
        return f"{ALL} (n = {sum(counts.values())})"
    name = group if spec else bench_name(group)
    return f"{name}{' *' if spec and group in SHARED else ''} (n = {counts[group]})"


def workload_table(
    run: Path, workload: str, record: dict[str, Any]
) -> tuple[str, list[str], list[list[str]], str, list[str]]:
    """(file stem, header, rows, caption, notes) of one workload of one held-out run: one row per group and
    over all prompts, one column per contender but engine AR, then the best single source and hw_tree:auto
    over it."""
    spec = workload == SPEC
    grouped = by_question_category(record) if spec else record
    ratios = group_ratios(grouped)
    counts = group_counts(grouped)
    columns = list(dict.fromkeys(c for cols in ratios.values() for c in cols))
    header = ["category" if spec else "benchmark", *map(column_name, columns)]
    rows = [
        [group_label(g, counts, spec), *[cell(c, cols.get(c, [])) for c in columns]]
        for g, cols in ratios.items()
    ]
    manifest = read_manifest(run)
    args = record.get("args", {})
    repeats = f"{args.get('repeats')} {'interleaved repeats' if spec else 'rounds'}"
    if spec:
        what = (
            f"Spec-Bench, {args.get('per_category') or manifest.get('per_category', '?')} questions of each category in the chat template "
            "(a base model's instruction format), every contender side by side in one process"
        )
    else:
        what = (
            f"fresh processes: each contender in its own `run.py` process per benchmark and round, the first "
            f"{manifest.get('fresh_limit', '?')} prompts, budget=auto's curve set up at each start-up as run.py sets it up"
        )
    caption = (
        f"Held-out, {what}: tokens/s over engine:ar, median [min, max] over {repeats} (a ratio taken within a "
        f"{'repeat' if spec else 'round'}, Σ tokens / Σ seconds); {BELOW}: median below its floor ({AUTO_FLOOR:g}× engine:ar for a "
        f"budget=auto contender, {COMBINED_FLOOR:g}× the best single source for hw_tree:auto; {BEST_SINGLE}: per "
        f"repeat the faster of suffix:auto and pld): {manifest.get('model', args.get('model'))} "
        f"{record.get('dtype')}, {manifest.get('max_new_tokens', args.get('max_new_tokens'))} new tokens; "
        f"{machine(record)} with {args.get('threads') or manifest.get('threads') or 'default'} threads "
        f"(`{run.name}/{workload}`){gate_note(record)}; {code_note(record)}"
    )
    notes = verdict_lines(workload, ratios)
    if spec and SHARED & set(counts):
        notes.append(
            f"* {', '.join(sorted(SHARED & set(counts)))}: MT-Bench questions {CANONICAL_MTBENCH_IDS.start}–"
            f"{CANONICAL_MTBENCH_IDS.stop - 1}, the canonical protocol's mtbench prompts (not held out)"
        )
    below = [g for g, cols in ratios.items() if below_floor(VS_BEST, cols.get(VS_BEST, []))]
    notes += [texts_line(g, texts_written(grouped, g)) for g in below]
    identical = record["summary"].get("identical_to_engine_ar") or {}
    if identical:
        same = ", ".join(f"{column_name(n)} {e['identical']}/{e['prompts']}" for n, e in identical.items())
        notes.append(f"outputs identical to engine:ar in the first repeat: {same}")
    if record.get("degenerate"):
        notes.append(
            f"{len(record['degenerate'])} of {len(record['per_prompt'])} prompts degenerate (engine AR looped)"
        )
    return f"heldout_{run.name}_{workload}", header, rows, caption, notes


def verdict_row(run: Path, workload: str, record: dict[str, Any]) -> list[str]:
    """run, workload, hw_tree:auto over the best single source over all prompts, the groups where its median
    falls below its floor and those where every repeat does (below it beyond the spread), the (group,
    contender) cells of budget=auto contenders below theirs."""
    ratios = group_ratios(by_question_category(record) if workload == SPEC else record)
    combined = [g for g, cols in ratios.items() if below_floor(VS_BEST, cols.get(VS_BEST, []))]
    beyond = [g for g in combined if below_in_every_repeat(VS_BEST, ratios[g][VS_BEST])]
    auto = [
        f"{g}: {column_name(c)} {statistics.median(v):.2f}"
        for g, cols in ratios.items()
        for c, v in cols.items()
        if c != VS_BEST and floor_of(c) == AUTO_FLOOR and below_floor(c, v)
    ]
    overall = ratios.get(ALL, {}).get(VS_BEST)
    return [
        run.name,
        workload,
        cell(VS_BEST, overall) if overall else "-",
        ", ".join(combined) or ("none" if overall else "-"),
        ", ".join(beyond) or ("none" if overall else "-"),
        "; ".join(auto) or "none",
    ]


VERDICT_HEADER = [
    "run",
    "workload",
    "hw_tree:auto / best single, all prompts",
    f"groups below {COMBINED_FLOOR:g}× (median)",
    f"groups below {COMBINED_FLOOR:g}× in every repeat",
    f"budget=auto cells below {AUTO_FLOOR:g}× engine:ar",
]


def records(records_dir: Path) -> list[tuple[Path, str, dict[str, Any]]]:
    """(run, workload, record) of every workload of every held-out run under `records_dir`."""
    found = []
    for run in runs(records_dir):
        for workload, record in ((SPEC, spec_record(run)), (FRESH, fresh_record(run))):
            if record is not None:
                found.append((run, workload, record))
    return found


def verdict_rows(found: list[tuple[Path, str, dict[str, Any]]]) -> list[list[str]]:
    """One `verdict_row` per held-out workload, as the verdict table and the README list them."""
    return [verdict_row(run, workload, record) for run, workload, record in found]


def build(res: Results, out: Path) -> Output:
    found = records(res.records_dir())
    if not found:
        raise Skip(f"no held-out run (`make heldout`) in {FOLDER}/ of the records")
    folder = out / FOLDER
    output = Output()
    for run, workload, record in found:
        stem, header, rows, caption, notes = workload_table(run, workload, record)
        output.files += write_table(folder, stem, header, rows, caption, notes)
    caption = (
        "Held-out verdicts (issue 56): hw_tree:auto against the best single source (per repeat the faster of "
        "suffix:auto and pld), and every budget=auto contender against engine:ar, per category or benchmark; "
        "medians over repeats (rounds); the tables heldout_<run>_<workload> give every cell"
    )
    output.files += write_table(folder, "heldout_verdicts", VERDICT_HEADER, verdict_rows(found), caption)
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
