"""The record of one `make bench` run, built from its rows: the contenders in their order, per prompt and
repeat each contender's tokens and seconds, the outputs' identity to engine AR, the places each contender ran
in, the code states and environments; and each contender's tokens/s per repeat from it. Torch-free: the
bench driver (experiments/bench/) summarises its run with it and analysis/ turns it into the wall-clock
tables, so that both read a run the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from goose.records.code_state import code_states
from goose.records.degenerate import row_degenerate
from goose.records.paper import PAPER_BENCHMARKS


def spread(values: list[float]) -> str:
    """median [min, max] of per-repeat ratios."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def ratios(per_repeat: dict[str, list[float]], name: str, baseline: str) -> list[float]:
    """Per-repeat tokens/s of `name` over `baseline`."""
    return [a / b for a, b in zip(per_repeat[name], per_repeat[baseline], strict=True) if b > 0]


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


def contender_name(method: str, verifier: str | None = "auto") -> str:
    """A bench row's contender: goose_auto -> engine:goose:auto, hf_pld -> hf:pld, ar -> engine:ar,
    stand_chain verified by block -> engine:stand_chain@block."""
    if method.startswith("hf_"):
        return f"hf:{method.removeprefix('hf_')}"
    name = f"engine:{method.removesuffix('_auto')}" + (":auto" if method.endswith("_auto") else "")
    return name + (f"@{verifier}" if verifier not in (None, "auto") else "")


def _first_diff(a: list[int], b: list[int]) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


GATE_KEY = "auto_gate_decay"  # in a row's method_config when its budget=auto ran with the draft gate


def record_from_rows(
    rows: Iterable[dict[str, Any]], name: str, floor: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The rows of one `make bench` run as the fields the tables read: `args` (the bench's
    protocol), the contenders in their order, per prompt and repeat each contender's tokens and
    seconds (None where its row failed), the outputs' identity to engine AR in the first repeat
    (with the rows' near-tie verdicts), the environments that ran each repeat."""
    rows = [r for r in rows if r.get("repeat") is not None]
    if not rows:
        raise ValueError(f"bench run {name}: no rows with a repeat")
    # the run's first invocation names its contenders; a resumed one with more (say --hf) adds none
    protocol = dict(rows[0].get("bench_protocol") or {})
    names = list(
        protocol.get("contenders")
        or dict.fromkeys(contender_name(r["method"], r.get("verifier")) for r in rows)
    )
    repeats = sorted({int(r["repeat"]) for r in rows})
    prompts: dict[tuple[str, str], dict[int, dict[str, dict]]] = {}
    for r in rows:
        slot = prompts.setdefault((r["bench"], str(r["prompt_id"])), {}).setdefault(int(r["repeat"]), {})
        slot.setdefault(contender_name(r["method"], r.get("verifier")), r)  # the first row of a key wins

    def run(r: dict | None, ar: dict | None = None) -> dict | None:
        """A row's tokens and seconds, and what it wrote: `repetition` (its output's repeated-4-gram share)
        and, given the same repeat's engine AR row, `diverged` (its output is not AR's), so that a ratio
        between contenders that wrote different texts can be told apart (half-precision near-ties:
        docs/records.md, `near_tie`)."""
        if r is None or r.get("status", "ok") != "ok":
            return None
        out = {"tokens": r["generated_tokens"], "seconds": r["wall_time_s"]}
        if ar is not None and ar is not r and "output_ids" in r and "output_ids" in ar:
            out["diverged"] = _first_diff(r["output_ids"], ar["output_ids"]) is not None
        if r.get("repeated_4gram_share") is not None:
            out["repetition"] = r["repeated_4gram_share"]
        return out

    order = [b for b in str(protocol.get("benches") or "").split(",") if b] + list(PAPER_BENCHMARKS)
    prompts = dict(
        sorted(prompts.items(), key=lambda kv: order.index(kv[0][0]) if kv[0][0] in order else len(order))
    )
    per_prompt = [
        {
            "bench": b,
            "prompt_id": pid,
            "runs": [
                {n: run(got.get(rep, {}).get(n), got.get(rep, {}).get("engine:ar")) for n in names}
                for rep in repeats
            ],
        }
        for (b, pid), got in prompts.items()
    ]
    identical: dict[str, Any] = {}
    done = [
        got[repeats[0]] for got in prompts.values() if all(run(got.get(repeats[0], {}).get(n)) for n in names)
    ]
    for n in names:
        if n == "engine:ar" or "engine:ar" not in names:
            continue
        mismatches = []
        for got in done:
            d = _first_diff(got[n]["output_ids"], got["engine:ar"]["output_ids"])
            if d is not None:
                row = got[n]
                mismatches.append(
                    {"bench": row["bench"], "prompt_id": str(row["prompt_id"]), "first_diff": d}
                    | {k: row.get(k) for k in ("near_tie", "diff_margin")}
                )
        entry = {"identical": len(done) - len(mismatches), "prompts": len(done), "mismatches": mismatches}
        if all(m["near_tie"] is not None for m in mismatches):
            entry["near_tie"] = sum(1 for m in mismatches if m["near_tie"])
            entry["real"] = len(mismatches) - entry["near_tie"]
        identical[n] = entry
    degenerate = [
        {"bench": b, "prompt_id": pid}
        for (b, pid), got in prompts.items()
        if (ar := got.get(repeats[0], {}).get("engine:ar")) is not None and row_degenerate(ar)
    ]
    environments = {}
    for r in sorted(rows, key=lambda r: r.get("timestamp", 0)):
        environments.setdefault((int(r["repeat"]), r.get("session_id")), r)
    return {
        "code_states": code_states(rows),
        # contenders whose budget=auto ran with the draft gate on (their method_config names its settings)
        "gated": sorted(
            {
                contender_name(r["method"], r.get("verifier"))
                for r in rows
                if GATE_KEY in (r.get("method_config") or {})
            }
        ),
        "degenerate": degenerate,
        "mixed_code_allowed": any(r.get("allow_mixed_code") for r in rows),
        "positions": run_positions(prompts, names),
        "args": protocol | {"repeats": len(repeats)},
        "dtype": rows[0].get("dtype"),
        "forward": rows[0].get("forward"),
        "environment": {k: rows[0].get(k) for k in ("hardware", "versions", "git_commit", "session_id")},
        "repeat_environments": [
            [
                {"environment": {"hardware": r.get("hardware", {})}}
                for (k, _), r in environments.items()
                if k == rep
            ]
            for rep in repeats
        ],
        "summary": {
            "tokens_per_s": dict.fromkeys(names),
            "identical_to_engine_ar": identical,
            **({"hardware_floor": floor} if floor else {}),
        },
        "per_prompt": per_prompt,
    }


def run_positions(
    prompts: dict[tuple[str, str], dict[int, dict[str, dict]]], names: list[str]
) -> dict[str, list[int]]:
    """For each contender, how many (prompt, repeat) rounds it ran in 1st, 2nd, ... place (by its rows'
    start times): a contender that always runs first (engine AR before the protocol rotated it) shows
    it, since running first on a prompt costs a little (its prefill warms the caches for the others)."""
    counts = {n: [0] * len(names) for n in names}
    for by_repeat in prompts.values():
        for got in by_repeat.values():
            order = sorted((r.get("timestamp") or 0.0, n) for n, r in got.items() if n in counts)
            for place, (_, n) in enumerate(order):
                counts[n][place] += 1
    return counts


def summary_lines(record: dict[str, Any]) -> list[str]:
    """A run's closing summary as text: each contender's tokens/s over engine:ar's, median [min, max] over
    the repeats, per benchmark and over all prompts, and its outputs identical to engine:ar's (the
    wall-clock tables of `make figures` say the same with their captions)."""
    overall, per_bench = per_repeat_tokens_per_s(record)
    lines = []
    if "engine:ar" in overall:
        lines.append("tokens/s over engine:ar, median [min, max] over the repeats:")

        def over_ar(per_repeat: dict[str, list[float]], name: str) -> str:
            values = ratios(per_repeat, name, "engine:ar")
            return spread(values) if values else "-"

        for name in overall:
            if name == "engine:ar":
                continue
            benches = ", ".join(f"{b} {over_ar(per_bench[b], name)}" for b in per_bench)
            lines.append(f"  {name}: {over_ar(overall, name)} over all prompts ({benches})")
    for name, entry in (record["summary"].get("identical_to_engine_ar") or {}).items():
        verdicts = f" ({entry['near_tie']} near-tie, {entry['real']} real)" if "near_tie" in entry else ""
        lines.append(
            f"  {name}: {entry['identical']}/{entry['prompts']} outputs identical to engine:ar{verdicts}"
        )
    return lines
