"""Wall-clock speed-ups per benchmark from `make bench` (experiments/bench.py): each contender's
tokens/s over engine AR's and over transformers' prompt-lookup `generate` (hf:pld), per benchmark
and over all prompts, median [min, max] over the interleaved repeats, one table per bench record.

Reads the greedy bench records `<out>/bench_<dtype>.json` that `make bench` writes next to the
figures (sampling records, `bench_sampling_*`, are left to their own protocol). The ratio of a
repeat is taken within that repeat (both contenders ran interleaved on the same prompts), then
summarised over repeats: each repeat's tokens/s per benchmark are summed from the record's
per-prompt tokens and seconds, over the prompts every contender completed in every repeat (as the
bench's own summary does). The record's `tokens_per_s*` spreads (median, min, max over repeats)
are never divided: a ratio of medians is not the median of the per-repeat ratios. Wall-clock is
machine-dependent: the caption names the run's CPU, threads and protocol.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from analysis.load import Results, bench_name
from analysis.report import Output, Skip, cli, write_table

DESCRIPTION = __doc__.splitlines()[0]
BASELINES = ("engine:ar", "hf:pld")


def spread(values: list[float]) -> str:
    """median [min, max] of per-repeat ratios."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def ratios(per_repeat: dict[str, list[float]], name: str, baseline: str) -> list[float]:
    """Per-repeat tokens/s of `name` over `baseline`."""
    return [a / b for a, b in zip(per_repeat[name], per_repeat[baseline], strict=True) if b > 0]


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
    """The machine a record was measured on. A `make bench` run resumed in other sessions lists
    in `repeat_environments` which process ran which prompts; where those ran on more than one
    kind of machine, every one is named (" + ") with a warning that its tokens/s mix machines:
    its ratios stay side by side (each prompt's contenders ran in one process), its absolute
    rates do not. Records from before resuming at the prompt (checkpoint format 1) hold one
    environment per repeat instead of a list of segments; both are read."""
    environments = [
        segment["environment"] if "environment" in segment else segment
        for repeat in record.get("repeat_environments") or []
        for segment in ([repeat] if isinstance(repeat, dict) else repeat)
    ]
    names = list(dict.fromkeys(_hardware_name(env.get("hardware", {})) for env in environments))
    if len(names) > 1:
        return " + ".join(names) + " (resumed across machines: compare ratios, not tokens/s)"
    return _hardware_name(record.get("environment", {}).get("hardware", {}))


def per_repeat_tokens_per_s(
    record: dict,
) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """Each contender's tokens/s in each repeat, over all prompts and per benchmark (in the
    record's order), from the record's `per_prompt` runs (module docstring)."""
    names = list(record["summary"]["tokens_per_s"])
    prompts = record["per_prompt"]
    repeats = range(len(prompts[0]["runs"])) if prompts else range(0)
    done = [p for p in prompts if all(p["runs"][r].get(n) is not None for r in repeats for n in names)]

    def rate(rep: int, name: str, bench: str | None) -> float:
        runs = [p["runs"][rep][name] for p in done if bench is None or p["bench"] == bench]
        seconds = sum(run["seconds"] for run in runs)
        return sum(run["tokens"] for run in runs) / seconds if seconds else float("nan")

    benches = list(dict.fromkeys(p["bench"] for p in done))
    overall = {n: [rate(r, n, None) for r in repeats] for n in names}
    per_bench = {b: {n: [rate(r, n, b) for r in repeats] for n in names} for b in benches}
    return overall, per_bench


def bench_records(out: Path) -> list[tuple[Path, dict]]:
    """The greedy `make bench` records in `out`, by file name."""
    records = []
    for path in sorted(out.glob("bench_*.json")):
        if path.name.startswith("bench_sampling"):
            continue
        data = json.loads(path.read_text())
        if "summary" in data and float(data.get("args", {}).get("temperature") or 0) == 0:
            records.append((path, data))
    return records


def build(res: Results, out: Path) -> Output:
    del res  # the records are bench JSONs, not result rows
    records = bench_records(out)
    if not records:
        raise Skip(f"no greedy `make bench` record (bench_<dtype>.json) in {out}")
    output = Output()
    for path, data in records:
        args = data["args"]
        overall, per_bench = per_repeat_tokens_per_s(data)
        benches = list(per_bench)
        cpu = machine(data)
        forward = f", forward {data['forward']}" if data.get("forward") else ""
        protocol = (
            f"{args.get('model')} {data.get('dtype', args.get('dtype'))}, first {args.get('limit')} prompts of each "
            f"benchmark, {args.get('max_new_tokens')} new tokens, raw prompts; {cpu} with "
            f"{args.get('threads')} threads{forward} (`{path.name}`)"
        )
        for baseline in BASELINES:
            if baseline not in overall:
                output.notes.append(f"{path.name}: no {baseline} contender, no table over it")
                continue
            rows = []
            for name in overall:
                if name == baseline:
                    continue
                row = [name]
                for b in benches:
                    row.append(spread(ratios(per_bench[b], name, baseline)))
                row.append(spread(ratios(overall, name, baseline)))
                rows.append(row)
            caption = (
                f"Tokens/s over {baseline}, median [min, max] over {args.get('repeats')} interleaved repeats: "
                + protocol
            )
            stem = f"wall_clock_{path.stem.removeprefix('bench_')}_vs_{baseline.replace(':', '_')}"
            output.files += write_table(
                out,
                stem,
                ["contender", *[bench_name(b) for b in benches], "all prompts"],
                rows,
                caption,
            )
        identical = identity_rows(data)
        if identical:
            output.files += write_table(
                out,
                f"wall_clock_{path.stem.removeprefix('bench_')}_identical_to_engine_ar",
                ["contender", "identical to engine:ar", "near-tie", "real", "largest near-tie margin"],
                identical,
                "Outputs identical to engine:ar in the first repeat, and the verdict on each divergence "
                "(top-2 margin at the first differing token against 2 ulps of the top logit: "
                f"experiments/bench_divergences.py; blank: not classified): {protocol}",
            )
            real = sum(e.get("real", 0) for e in data["summary"]["identical_to_engine_ar"].values())
            if real:
                output.notes.append(f"{path.name}: {real} REAL divergences from engine:ar")
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
