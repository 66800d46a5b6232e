"""Contenders side by side in one process on the same prompts, each prompt run with a fresh drafter and sizer
(a fresh process's state; or one per benchmark, its state learnt over the benchmark's prompts), the
contenders' order rotated every round; engine AR (`ar`) is a contender and the reference. Shared by the
step-cost and prior studies (experiments.failed_step, experiments.prior_effect).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from goose.engine.core.decode import Generation, generate
from goose.engine.core.sizing import Speculator
from goose.records.code_state import code_state

Runs = dict[str, list[list[Generation]]]  # contender -> rounds -> one Generation per prompt


def interleaved_runs(
    engine: Any,
    prompt_ids: Sequence[Sequence[int]],
    makers: dict[str, Callable[[], Speculator]],
    repeats: int,
    max_new_tokens: int,
    log: Callable[[str], None] = print,
    state_per: int | None = None,
) -> Runs:
    """Every contender of `makers` on every prompt, `repeats` rounds; round r starts the order at contender
    r (mod their number). Each contender's code path runs once on the first prompt first, untimed.
    `state_per`: None, a fresh drafter and sizer per prompt (a fresh process's first prompt); k, one per k
    consecutive prompts of a round, its state learnt over them (as `make bench` keeps one per results file)."""
    if state_per is not None and state_per < 1:
        raise ValueError(
            f"state_per = {state_per}: must be ≥ 1 prompts (or None: a fresh drafter per prompt)"
        )
    names = list(makers)
    for make in makers.values():
        sp = make()
        generate(engine, sp.drafter, prompt_ids[0], 16, sizer=sp.sizer)
    runs: Runs = {n: [] for n in names}
    t0 = time.time()
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        done: dict[str, list[Generation]] = {n: [] for n in names}
        live: dict[str, Speculator] = {}
        for i, ids in enumerate(prompt_ids):
            for n in order:
                if state_per is None or i % state_per == 0:
                    live[n] = makers[n]()
                sp = live[n]
                done[n].append(generate(engine, sp.drafter, ids, max_new_tokens, sizer=sp.sizer))
        for n in names:
            runs[n].append(done[n])
        log(f"round {r + 1}/{repeats} done ({time.time() - t0:.0f} s)")
    return runs


def tokens_per_s(rounds: list[list[Generation]], keep: Callable[[int], bool] = lambda i: True) -> list[float]:
    """Per round, Σ tokens / Σ wall seconds over the prompts whose index passes `keep`."""
    out = []
    for rnd in rounds:
        gens = [g for i, g in enumerate(rnd) if keep(i)]
        out.append(sum(len(g.output_ids) for g in gens) / sum(g.wall_time_s for g in gens))
    return out


def speedup(runs: Runs, name: str, keep: Callable[[int], bool] = lambda i: True) -> dict[str, float]:
    """`name`'s tokens/s over AR's, per round (token-weighted), as median, min and max over the rounds."""
    ratios = [
        c / a for c, a in zip(tokens_per_s(runs[name], keep), tokens_per_s(runs["ar"], keep), strict=True)
    ]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def tau(rounds: list[list[Generation]]) -> float:
    """τ over every round and prompt: tokens per target forward."""
    return sum(len(g.output_ids) for rnd in rounds for g in rnd) / sum(
        g.forward_calls for rnd in rounds for g in rnd
    )


def add_common_args(ap: argparse.ArgumentParser, methods: Sequence[str], out: str) -> None:
    """The arguments every side-by-side study takes: model, dtype, tokens, rounds, methods, threads, data, out."""
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default=",".join(methods))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=out)


def write_record(
    summary: dict[str, Any], args: argparse.Namespace, prompt_ids: list[str], cpu: Any, path: Path
) -> None:
    """`summary` with the run's setup (every argument, the prompts, threads, device, code state) as JSON."""
    summary["setup"] = {
        **vars(args),
        "prompts": prompt_ids,
        "threads": torch.get_num_threads(),
        "cpu": cpu,
        "code": code_state(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1))
    print(f"wrote {path}")
