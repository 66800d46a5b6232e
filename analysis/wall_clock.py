"""Wall-clock speed-ups per benchmark from `make bench` (experiments/bench/): each contender's
tokens/s over engine AR's and over transformers' prompt-lookup `generate` (hf:pld), per benchmark
and over all prompts, median [min, max] over the interleaved repeats, one table per bench run.

Reads the greedy bench runs where `run_folders` finds them: the rows `make bench` writes into
<run>/repeat<k>/<model>/<bench>.jsonl (one table set per <run>), under results/protocol/ (the
canonical runs, tables in figures/protocol/) and results/studies/<study>/ (figures/studies/<study>/).
Sampled runs are left to their own protocol. The ratio of a repeat is taken within that repeat (both
contenders ran interleaved on the same prompts), then summarised over repeats: each repeat's tokens/s per
benchmark are summed from the record's per-prompt tokens and seconds, over the prompts every contender
completed in every repeat (as the bench's own summary does). The record's `tokens_per_s*` spreads
(median, min, max over repeats) are never divided: a ratio of medians is not the median of the per-repeat
ratios. Wall-clock is machine-dependent: the caption names the run's CPU, threads and protocol.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from analysis.load import Results
from analysis.names import bench_name
from analysis.report import Output, Skip, cli, write_table
from goose.records.bench_run import per_repeat_tokens_per_s, ratios, record_from_rows, spread
from goose.records.results import read_rows
from goose.records.spec_bench import spec_bench_category

DESCRIPTION = __doc__.splitlines()[0]
BASELINES = ("engine:ar", "hf:pld")


def _hardware_name(hw: dict) -> str:
    """A CPU with its vector ISA and oneDNN bf16 support where the record names them (records
    from before those fields name only the ISA family), or the GPU."""
    if hw.get("gpu"):
        return str(hw["gpu"])
    cpu = str(hw.get("cpu"))
    if hw.get("cpu_capability"):
        cpu = f"{cpu} ({hw['cpu_capability']}, {'with' if hw.get('onednn_bf16') else 'no'} oneDNN bf16)"
    return cpu


def machine(record: dict) -> str:
    """The machine a record was measured on. A `make bench` run resumed in other processes lists
    in `repeat_environments` which process ran which prompts; where those ran on more than one
    kind of machine, every one is named (" + ") with a warning that its tokens/s mix machines:
    its ratios stay side by side (each prompt's contenders ran in one process), its absolute
    rates do not."""
    environments = [
        segment["environment"] for repeat in record.get("repeat_environments") or [] for segment in repeat
    ]
    names = list(dict.fromkeys(_hardware_name(env.get("hardware", {})) for env in environments))
    if len(names) > 1:
        return " + ".join(names) + " (resumed across machines: compare ratios, not tokens/s)"
    return _hardware_name(record.get("environment", {}).get("hardware", {}))


def positions_note(record: dict, name: str = "engine:ar") -> str:
    """How often `name` ran in each place, as a caption says it: "engine:ar ran 1st in 100 of 100 rounds"
    or "engine:ar ran in places 1-7: 15/14/15/14/14/14/14 rounds"."""
    counts = (record.get("positions") or {}).get(name)
    if not counts or not sum(counts):
        return ""
    total = sum(counts)
    if counts[0] == total:
        return f"{name} ran 1st in all {total} rounds (not rotated)"
    return f"{name} ran in places 1–{len(counts)}: {'/'.join(map(str, counts))} rounds"


def code_note(record: dict) -> str:
    """The code state(s) that wrote a record's rows; a mix is said loudly (goose.records.code_state)."""
    states = record.get("code_states") or {}
    if len(states) <= 1:
        return f"code {next(iter(states), 'unknown')}"
    listed = ", ".join(f"{s} ({n} rows)" for s, n in states.items())
    return f"MIXED CODE: {listed}" + (" (allowed on purpose)" if record.get("mixed_code_allowed") else "")


def gate_note(record: dict) -> str:
    """'; ... draft gate on' where a record's budget=auto contenders ran with the draft gate (off by default),
    else nothing."""
    gated = record.get("gated") or []
    return f"; budget=auto's draft gate on for {', '.join(gated)}" if gated else ""


RUN_HOMES = (("protocol", "protocol"), ("studies", "studies"), ("bench", ""))
"""(folder under the records, figures subfolder) where `make bench` runs live: the canonical protocol
runs, results/protocol/<name>-v<k>/ (tables in figures/protocol/); the studies' runs,
results/studies/<study>/.../<run>/ (figures/studies/<study>/); runs of your own, <records>/bench/<run>/."""


# Studies whose runs are read for acceptance only (τ, exact expectations), not timed: their cores may have
# been shared with other work, so no wall-clock table is built from them.
UNTIMED_STUDIES = ("verifier_claims",)


def run_folders(records: Path) -> list[tuple[str, Path, str]]:
    """(name, folder, figures subfolder) of every `make bench` run (a folder holding repeat0/) under
    `records`, by RUN_HOMES, but the UNTIMED_STUDIES."""
    found = []
    for home, figures in RUN_HOMES:
        base = records / home
        for repeat0 in sorted(base.rglob("repeat0")) if base.is_dir() else []:
            folder = repeat0.parent
            if home == "studies" and folder.relative_to(base).parts[0] in UNTIMED_STUDIES:
                continue
            sub = f"{figures}/{folder.relative_to(base).parts[0]}" if home == "studies" else figures
            found.append((folder.name, folder, sub))
    return found


def bench_records(records: Path) -> list[tuple[str, dict]]:
    """(name, record) of every greedy `make bench` run under `records` (`run_folders`), each record
    with its `source` (the folder under the records) and `figures` (the subfolder its tables go to)."""
    found: dict[str, dict] = {}
    for name, run_dir, figures in run_folders(records):
        rows = read_rows(run_dir)
        if rows:
            floor_file = run_dir / "hardware_floor.json"
            floor = json.loads(floor_file.read_text()) if floor_file.is_file() else None
            found[name] = record_from_rows(rows, name, floor) | {
                "source": str(run_dir.relative_to(records)),
                "figures": figures,
            }
    return [
        (name, data)
        for name, data in sorted(found.items())
        if float(data.get("args", {}).get("temperature") or 0) == 0
    ]


def category_counts(per_prompt: list[dict[str, Any]]) -> str:
    """How many prompts of each Spec-Bench category the rows hold, as a caption says it."""
    counts: dict[str, int] = {}
    for p in per_prompt:
        cat = spec_bench_category(p["prompt_id"])
        if cat is not None:
            counts[cat] = counts.get(cat, 0) + 1
    lo, hi = min(counts.values(), default=0), max(counts.values(), default=0)
    return (
        f"{lo} prompts of each Spec-Bench category"
        if lo == hi
        else f"{lo}–{hi} prompts per Spec-Bench category"
    )


def prompts_label(record: dict) -> str:
    """Which prompts a bench run's rows hold, as its captions say it."""
    if record["args"].get("per_category"):
        return category_counts(record["per_prompt"])
    counts = set(Counter(p["bench"] for p in record["per_prompt"]).values())
    n = counts.pop() if len(counts) == 1 else record["args"].get("limit")  # a run extended by --limit
    return f"first {n} prompts of each benchmark"


def tables(name: str, data: dict) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(file stem, header, rows, caption) of each table of one bench run."""
    args = data["args"]
    overall, per_bench = per_repeat_tokens_per_s(data)
    benches = list(per_bench)
    forward = f", forward {data['forward']}" if data.get("forward") else ""
    prompts = prompts_label(data)
    template = {"true": "chat template", "auto": "chat template, or a base model's instruction format"}.get(
        str(args.get("chat_template")).lower(), "raw prompts"
    )
    order = "; ".join(filter(None, [positions_note(data), degenerate_note(data), code_note(data)]))
    protocol = (
        f"{args.get('model')} {data.get('dtype', args.get('dtype'))}, {prompts}, "
        f"{args.get('max_new_tokens')} new tokens, {template}; {machine(data)} with "
        f"{args.get('threads')} threads{forward} (`{data.get('source', name)}`); {order}"
    )
    out = []
    for baseline in BASELINES:
        if baseline not in overall:
            continue
        caption = (
            f"Tokens/s over {baseline}, median [min, max] over {args.get('repeats')} interleaved repeats; "
            f"{RATIO_NOTE}: " + protocol
        )
        header = ["contender", *[bench_name(b) for b in benches], "all prompts", "per-prompt mean"]
        rows = ratio_rows(overall, per_bench, baseline, prompt_mean_ratios(data, baseline))
        out.append((f"wall_clock_{name}_vs_{baseline.replace(':', '_')}", header, rows, caption))
    subsets = (
        (
            same_text(data),
            "same_text",
            "on the prompts where every contender's output is engine:ar's (first repeat), so that all of "
            "them generate the same text there",
        ),
        (
            without_degenerate(data),
            "nondegenerate",
            f"without the {len(data.get('degenerate') or [])} degenerate prompts (engine AR's output ran to "
            "max_new_tokens with more than half of its 4-grams repeated, goose.records.degenerate)",
        ),
    )
    for subset, label, which in subsets:
        if subset is not None:
            out.append(subset_table(subset, f"wall_clock_{name}_{label}_vs_engine_ar", which, protocol))
    identical = identity_rows(data)
    if identical:
        out.append(
            (
                f"wall_clock_{name}_identical_to_engine_ar",
                ["contender", "identical to engine:ar", "near-tie", "real", "largest near-tie margin"],
                identical,
                "Outputs identical to engine:ar in the first repeat, and the verdict on each divergence "
                "(top-2 margin at the first differing token against 2 ulps of the top logit, "
                f"`goose.harness.runner.lossless_fields`; blank: not classified): {protocol}",
            )
        )
    return out


def subset_table(
    subset: dict, stem: str, which: str, protocol: str
) -> tuple[str, list[str], list[list[str]], str]:
    """The table over engine:ar of a record restricted to some prompts (`which` says which, in the
    caption), with each benchmark's prompt count in its column head."""
    overall, per_bench = per_repeat_tokens_per_s(subset)
    counts = Counter(p["bench"] for p in subset["per_prompt"])
    header = ["contender", *[f"{bench_name(b)} (n = {counts[b]})" for b in per_bench], "all prompts"]
    header += ["per-prompt mean"]
    caption = (
        f"Tokens/s over engine:ar {which}; median [min, max] over {subset['args'].get('repeats')} interleaved "
        f"repeats; {RATIO_NOTE}: {protocol}"
    )
    rows = ratio_rows(overall, per_bench, "engine:ar", prompt_mean_ratios(subset, "engine:ar"))
    return stem, header, rows, caption


def ratio_rows(
    overall: dict[str, list[float]],
    per_bench: dict[str, dict[str, list[float]]],
    baseline: str,
    prompt_means: dict[str, list[float]] | None = None,
) -> list[list[str]]:
    """One row per contender but `baseline`: its tokens/s over the baseline's per benchmark and overall
    (token-weighted), and where given the per-prompt mean ratio over all prompts."""
    return [
        [contender, *[spread(ratios(per_bench[b], contender, baseline)) for b in per_bench]]
        + [spread(ratios(overall, contender, baseline))]
        + ([spread(prompt_means[contender])] if prompt_means and prompt_means.get(contender) else [])
        for contender in overall
        if contender != baseline
    ]


RATIO_NOTE = (
    "a ratio is token-weighted (Σ tokens / Σ seconds of the contender over the baseline's, per repeat), "
    "the last column the mean over prompts of each prompt's tokens/s ratio"
)


def prompt_mean_ratios(record: dict, baseline: str) -> dict[str, list[float]]:
    """Per repeat, the mean over the prompts every contender completed of each prompt's tokens/s over
    `baseline`'s: every prompt weighs alike, where the token-weighted ratio lets long outputs weigh more."""
    names = list(record["summary"]["tokens_per_s"])
    prompts = record["per_prompt"]
    repeats = range(len(prompts[0]["runs"])) if prompts else range(0)
    done = [p for p in prompts if all(p["runs"][r].get(n) is not None for r in repeats for n in names)]
    if baseline not in names or not done:
        return {}

    def rate(run: dict) -> float:
        return run["tokens"] / run["seconds"] if run["seconds"] else float("nan")

    return {
        n: [
            statistics.fmean(rate(p["runs"][r][n]) / rate(p["runs"][r][baseline]) for p in done)
            for r in repeats
        ]
        for n in names
        if n != baseline
    }


def degenerate_note(record: dict) -> str:
    """How many prompts are degenerate (engine AR's output looped to max_new_tokens), as a caption says it."""
    if "degenerate" not in record:
        return ""
    n, total = len(record["degenerate"]), len(record["per_prompt"])
    return f"{n} of {total} prompts degenerate" + (
        " (the run's `*_nondegenerate_*` table leaves them out)" if n else ""
    )


def without_degenerate(record: dict) -> dict | None:
    """The record without its degenerate prompts; None when it has none (or none would be left)."""
    drop = {(d["bench"], str(d["prompt_id"])) for d in record.get("degenerate") or []}
    if not drop or "engine:ar" not in record["summary"]["tokens_per_s"]:
        return None
    kept = [p for p in record["per_prompt"] if (p["bench"], str(p["prompt_id"])) not in drop]
    return {**record, "per_prompt": kept} if kept else None


def same_text(record: dict) -> dict | None:
    """The record restricted to the prompts on which every contender wrote engine AR's output (first repeat);
    None when no output diverges (fp32: the full tables already compare the same texts) or none is left.
    Where outputs diverge (bf16 near-ties), contenders generate different texts, which speculate unequally."""
    identical = record["summary"].get("identical_to_engine_ar") or {}
    differ = {(m["bench"], str(m["prompt_id"])) for e in identical.values() for m in e.get("mismatches", [])}
    if not differ or "engine:ar" not in record["summary"]["tokens_per_s"]:
        return None
    kept = [p for p in record["per_prompt"] if (p["bench"], str(p["prompt_id"])) not in differ]
    return {**record, "per_prompt": kept} if kept else None


def build(res: Results, out: Path) -> Output:
    records = bench_records(res.records_dir())
    if not records:
        raise Skip(f"no greedy `make bench` run in {res.records_dir() / 'bench'}")
    output = Output()
    for name, data in records:
        folder = out / data.get("figures", "")
        folder.mkdir(parents=True, exist_ok=True)
        for stem, header, rows, caption in tables(name, data):
            output.files += write_table(folder, stem, header, rows, caption)
        for baseline in BASELINES:
            if baseline not in data["summary"]["tokens_per_s"]:
                output.notes.append(f"{name}: no {baseline} contender, no table over it")
        real = sum(e.get("real", 0) for e in (data["summary"].get("identical_to_engine_ar") or {}).values())
        if real:
            output.notes.append(f"{name}: {real} REAL divergences from engine:ar")
    return output


def identity_rows(record: dict) -> list[list[str]]:
    """One row per contender: identical / prompts, near-ties, real mismatches and the largest
    near-tie margin, from the record's `summary.identical_to_engine_ar` (blank verdict columns
    where the divergences were not classified)."""
    rows = []
    for name, entry in (record["summary"].get("identical_to_engine_ar") or {}).items():
        if "identical" not in entry:
            continue
        classified = "near_tie" in entry
        margins = [m["diff_margin"] for m in entry["mismatches"] if m.get("near_tie")]
        rows.append(
            [
                name,
                f"{entry['identical']}/{entry['prompts']}",
                str(entry["near_tie"]) if classified else "",
                str(entry["real"]) if classified else "",
                f"{max(margins):.3g}" if margins else "",
            ]
        )
    return rows


if __name__ == "__main__":
    cli(build, DESCRIPTION)
