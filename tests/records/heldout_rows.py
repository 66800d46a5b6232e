"""Hand-built rows of a held-out run (experiments/heldout/), shared by tests/records/test_heldout.py and
tests/analysis/test_heldout.py: every prompt generates 60 tokens, in 60 / rate seconds."""

from __future__ import annotations

import json
from pathlib import Path

from goose.records.results import append_row

TOKENS = 60
# Spec-Bench: tokens/s per repeat, by question category (its one prompt) and contender
SPEC_RATES = {
    ("writing", "81"): {
        "engine:ar": [10, 10, 10],
        "engine:pld": [12, 9, 11],
        "engine:suffix:auto": [11, 11, 8],
        "engine:hw_tree:auto": [13, 10, 9.5],
    },
    ("qa", "321"): {
        "engine:ar": [20, 20, 20],
        "engine:pld": [18, 19, 21],
        "engine:suffix:auto": [19, 19, 19],
        "engine:hw_tree:auto": [24, 22, 20],
    },
}
# fresh processes: tokens/s per round, by benchmark (one prompt) and contender
FRESH_RATES = {
    "humaneval": {
        "engine:ar": [10, 10, 10],
        "engine:pld": [15, 15, 15],
        "engine:suffix:auto": [20, 18, 16],
        "engine:hw_tree:auto": [22, 20, 15],
        "engine:goose:auto": [9, 9.9, 10.5],
    },
    "gsm8k": {
        "engine:ar": [10, 10, 10],
        "engine:pld": [10, 10, 10],
        "engine:suffix:auto": [9.7, 9.7, 9.7],
        "engine:hw_tree:auto": [10, 10, 10],
        "engine:goose:auto": [9, 9, 9],
    },
}
METHODS = {
    "engine:ar": "ar",
    "engine:pld": "pld",
    "engine:suffix:auto": "suffix_auto",
    "engine:hw_tree:auto": "hw_tree_auto",
    "engine:goose:auto": "goose_auto",
}


def row(method: str, bench: str, prompt: str, rate: float, repeat: int | None, t: float, **extra) -> dict:
    return {
        "model": "tiny",
        "bench": bench,
        "method": method,
        "prompt_id": prompt,
        "generated_tokens": TOKENS,
        "wall_time_s": TOKENS / rate,
        "max_new_tokens": TOKENS,
        "dtype": "bfloat16",
        "output_ids": list(range(TOKENS)),
        "status": "ok",
        "repeat": repeat,
        "timestamp": t,
        "hardware": {"cpu": "test-cpu"},
        "code_state": "0123456789ab",
        **extra,
    }


def write_spec_run(run: Path) -> Path:
    """<run>/spec_bench/ as `make bench` writes it: the reference pass (untimed) and three repeats."""
    contenders = list(SPEC_RATES[("writing", "81")])
    protocol = {"model": "tiny", "contenders": contenders, "benches": "spec_bench", "max_new_tokens": TOKENS}
    protocol |= {"per_category": 1, "threads": 1}
    folder = run / "spec_bench"
    t = 0.0
    for (_, prompt), rates in SPEC_RATES.items():
        append_row(
            folder / "reference" / "tiny" / "spec_bench.jsonl", row("ar", "spec_bench", prompt, 1, None, t)
        )
        for rep in range(3):
            for name in contenders:
                t += 1
                r = row(
                    METHODS[name], "spec_bench", prompt, rates[name][rep], rep, t, bench_protocol=protocol
                )
                append_row(folder / f"repeat{rep}" / "tiny" / "spec_bench.jsonl", r)
    return run


def write_fresh_run(run: Path) -> Path:
    """<run>/fresh/ as experiments.heldout's fresh processes write it, with heldout.json: each round<r>/<method>/
    folder holds its method's rows and the reference AR rows copied in before its process ran (10 000 s each:
    never read as the contender's or as engine AR's)."""
    contenders = list(METHODS)
    benches = list(FRESH_RATES)
    manifest = {"model": "tiny", "contenders": contenders, "benches": benches, "fresh_limit": 1, "threads": 2}
    manifest |= {"max_new_tokens": TOKENS}
    run.mkdir(parents=True, exist_ok=True)
    (run / "heldout.json").write_text(json.dumps(manifest))
    t = 0.0
    for bench, rates in FRESH_RATES.items():
        append_row(
            run / "fresh" / "reference" / "tiny" / f"{bench}.jsonl", row("ar", bench, "0", 1e-2, None, t)
        )
        for r in range(3):
            for name in contenders:
                t += 1
                file = run / "fresh" / f"round{r}" / METHODS[name] / "tiny" / f"{bench}.jsonl"
                if name != "engine:ar":
                    append_row(file, row("ar", bench, "0", 1e-2, None, t))  # the seeded reference row
                append_row(file, row(METHODS[name], bench, "0", rates[name][r], None, t))
    return run
