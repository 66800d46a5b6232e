"""The held-out protocol's records (`make heldout`, experiments/heldout/, issue 56) and the ratios that judge
non-degradation on them, read the same way by the experiment's closing summary and analysis/heldout.py.
Torch-free.

A held-out run's folder holds

    heldout.json                               the command's arguments (contenders, workloads, ...)
    spec_bench/                                a `make bench` run on Spec-Bench's question categories
    fresh/reference/<model>/<bench>.jsonl      engine AR once per prompt, untimed (the outputs' reference)
    fresh/round<r>/<method>/<model>/<bench>.jsonl   one `run.py` process per round, contender and benchmark

Each workload becomes one `goose.records.bench_run` record (the repeats of Spec-Bench, the rounds of the
fresh processes), grouped per Spec-Bench question category (the file's `category` field) or per benchmark.
The claim judged (issue 56): hw_tree at budget=auto ≥ 1.0× the best single source (per repeat the faster of
SuffixDecoding at budget=auto and PLD), and every budget=auto contender ≥ 0.98× engine AR, in every group.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from goose.records.bench_run import per_repeat_tokens_per_s, record_from_rows
from goose.records.results import read_rows
from goose.records.spec_bench import SPEC_BENCH_QUESTION_CATEGORIES, question_category

MANIFEST = "heldout.json"
SPEC = "spec_bench"
FRESH = "fresh"
REFERENCE = "reference"
ROUND = "round"
ALL = "all prompts"

AR = "engine:ar"
COMBINED = "engine:hw_tree:auto"
SINGLE_SOURCES = ("engine:suffix:auto", "engine:pld")
BEST_SINGLE = "best single source"  # per repeat, the faster of SINGLE_SOURCES, over engine AR
VS_BEST = "hw_tree:auto / best single source"
AUTO_FLOOR = 0.98  # every budget=auto contender, over engine AR
COMBINED_FLOOR = 1.0  # hw_tree:auto over the best single source


def round_folder(fresh: Path, r: int) -> Path:
    """Where the processes of round `r` of the fresh-process workload write: fresh/round<r>/."""
    return Path(fresh) / f"{ROUND}{r}"


def read_manifest(run: Path) -> dict[str, Any]:
    """The held-out command's arguments recorded in <run>/heldout.json ({} where absent)."""
    path = Path(run) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {}


def fresh_rows(fresh: Path, protocol: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The timed rows of the fresh-process workload as rows of one `make bench` run: from each
    round<r>/<method>/ folder the rows of that method (the folder also holds the reference rows copied in
    before its process ran), each with `repeat` = r and `bench_protocol` = `protocol` (the contenders'
    order, the benchmarks), so that goose.records.bench_run reads the rounds as repeats."""
    rows = []
    for folder in sorted(Path(fresh).glob(f"{ROUND}*/*/")):
        round_name = folder.parent.name.removeprefix(ROUND)
        if not round_name.isdigit():
            continue
        for r in read_rows(folder):
            if r.get("method") == folder.name:
                rows.append(
                    {**r, "repeat": int(round_name), **({"bench_protocol": protocol} if protocol else {})}
                )
    return rows


def spec_record(run: Path) -> dict[str, Any] | None:
    """The Spec-Bench workload's record (None where the run has none)."""
    folder = Path(run) / SPEC
    rows = read_rows(folder) if folder.is_dir() else []
    if not any(r.get("repeat") is not None for r in rows):
        return None
    return record_from_rows(rows, f"{Path(run).name}/{SPEC}") | {"source": str(folder)}


def fresh_record(run: Path) -> dict[str, Any] | None:
    """The fresh-process workload's record, its contenders and benchmarks in the manifest's order (None
    where the run has none)."""
    manifest = read_manifest(run)
    protocol = {k: manifest[k] for k in ("contenders", "benches") if k in manifest} or None
    if protocol and isinstance(protocol.get("benches"), list):
        protocol["benches"] = ",".join(protocol["benches"])
    rows = fresh_rows(Path(run) / FRESH, protocol)
    if not rows:
        return None
    return record_from_rows(rows, f"{Path(run).name}/{FRESH}") | {"source": str(Path(run) / FRESH)}


def by_question_category(record: dict[str, Any]) -> dict[str, Any]:
    """The record with each prompt's group (`bench`) its Spec-Bench question category, in the file's order."""
    order = [c for c, _, _ in SPEC_BENCH_QUESTION_CATEGORIES]

    def key(p: dict[str, Any]) -> tuple[int, str]:
        cat = question_category(p["prompt_id"])
        return (order.index(cat) if cat in order else len(order), str(p["prompt_id"]))

    per_prompt = [
        {**p, "bench": question_category(p["prompt_id"]) or p["bench"]}
        for p in sorted(record["per_prompt"], key=key)
    ]
    return {**record, "per_prompt": per_prompt}


def group_ratios(
    record: dict[str, Any], group_of: Callable[[dict], dict] | None = None
) -> dict[str, dict[str, list[float]]]:
    """{group: {column: per-repeat ratios}} for each group of the record (its benchmarks, or the groups
    `group_of` relabels it into) and ALL: each contender's tokens/s over engine AR's within a repeat; where
    the single sources ran, BEST_SINGLE (per repeat the larger of their tokens/s, over engine AR's); where
    hw_tree:auto ran too, VS_BEST (its tokens/s over the best single source's, per repeat). Token-weighted:
    Σ tokens / Σ seconds over the prompts every contender completed in every repeat (bench_run)."""
    overall, per_group = per_repeat_tokens_per_s(group_of(record) if group_of else record)
    out = {}
    for group, rates in [*per_group.items(), (ALL, overall)]:
        if AR not in rates:
            continue
        ar = rates[AR]
        columns = {
            n: [a / b for a, b in zip(v, ar, strict=True) if b > 0] for n, v in rates.items() if n != AR
        }
        if all(s in rates for s in SINGLE_SOURCES):
            best = [max(vals) for vals in zip(*(rates[s] for s in SINGLE_SOURCES), strict=True)]
            columns[BEST_SINGLE] = [a / b for a, b in zip(best, ar, strict=True) if b > 0]
            if COMBINED in rates:
                columns[VS_BEST] = [a / b for a, b in zip(rates[COMBINED], best, strict=True) if b > 0]
        out[group] = columns
    return out


def floor_of(column: str) -> float | None:
    """The non-degradation floor a column is judged against: COMBINED_FLOOR for hw_tree over the best
    single source, AUTO_FLOOR for a budget=auto contender over engine AR, None for the others."""
    if column == VS_BEST:
        return COMBINED_FLOOR
    if column.startswith("engine:") and column.endswith(":auto"):
        return AUTO_FLOOR
    return None


def below_floor(column: str, values: list[float]) -> bool:
    """Whether the median over repeats falls below the column's floor."""
    floor = floor_of(column)
    return floor is not None and bool(values) and statistics.median(values) < floor


def below_in_every_repeat(column: str, values: list[float]) -> bool:
    """Whether every repeat falls below the column's floor: below it beyond the run's spread (the issue's
    "≥ the floor within the spread" fails only here)."""
    floor = floor_of(column)
    return floor is not None and bool(values) and max(values) < floor


def verdict_lines(name: str, ratios: dict[str, dict[str, list[float]]]) -> list[str]:
    """The judgement of one workload as sentences: the groups where hw_tree:auto's median falls below
    COMBINED_FLOOR of the best single source, and those where a budget=auto contender's falls below
    AUTO_FLOOR of engine AR's (or that there are none)."""
    lines = []
    if any(VS_BEST in cols for cols in ratios.values()):
        hits = [
            f"{group} ({statistics.median(v):.2f})"
            for group, cols in ratios.items()
            for c, v in cols.items()
            if c == VS_BEST and below_floor(c, v)
        ]
        lines.append(
            f"{name}: hw_tree:auto below {COMBINED_FLOOR:.2f}x the best single source (median over repeats) "
            f"in {', '.join(hits) or 'no group'}"
        )
    auto = [c for cols in ratios.values() for c in cols if c != VS_BEST and floor_of(c) == AUTO_FLOOR]
    if auto:
        hits = [
            f"{group}: {c} ({statistics.median(v):.2f})"
            for group, cols in ratios.items()
            for c, v in cols.items()
            if c in auto and below_floor(c, v)
        ]
        lines.append(
            f"{name}: budget=auto contenders below {AUTO_FLOOR:.2f}x engine:ar (median over repeats) in "
            f"{'; '.join(hits) or 'no group'}"
        )
    return lines


def texts_written(record: dict[str, Any], group: str) -> dict[str, dict[str, float]]:
    """Per contender of the comparison hw_tree:auto is judged on (engine AR, the single sources, hw_tree:auto),
    over every repeat of `group`'s prompts (ALL: every prompt): `runs`, `diverged` (outputs that differ from
    the same repeat's engine AR output) and `repetition` (the mean repeated-4-gram share of its outputs).
    In bf16 a contender's output may leave AR's at a near-tie (docs/records.md, `near_tie`), and a ratio between
    contenders that then write texts of different repetitiveness compares texts as much as speed."""
    out: dict[str, dict[str, float]] = {}
    for name in (AR, *SINGLE_SOURCES, COMBINED):
        runs = [
            got[name]
            for p in record["per_prompt"]
            if group in (ALL, p["bench"])
            for got in p["runs"]
            if got.get(name) is not None
        ]
        if not runs:
            continue
        shares = [r["repetition"] for r in runs if r.get("repetition") is not None]
        out[name] = {
            "runs": len(runs),
            "diverged": sum(1 for r in runs if r.get("diverged")),
            "repetition": statistics.fmean(shares) if shares else float("nan"),
        }
    return out


def texts_line(group: str, texts: dict[str, dict[str, float]]) -> str:
    """One sentence of `texts_written` for a group: per contender its outputs that are not engine AR's and
    their mean repeated-4-gram share (left out where the rows do not record it)."""
    parts = []
    for name, t in texts.items():
        said = [] if name == AR else [f"{t['diverged']}/{t['runs']} outputs not AR's"]
        if not math.isnan(t["repetition"]):
            said.append(f"repeated 4-grams {t['repetition']:.2f}")
        parts.append(f"{name.removeprefix('engine:')} {', '.join(said) or '-'}")
    return f"{group}, what the compared contenders wrote (all repeats): {'; '.join(parts)}"
