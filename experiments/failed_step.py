"""What trying costs where drafts fail: each budget=auto method's failed step and its gated AR step, against
an AR step, side by side on prompts where little is accepted (MT-Bench's writing questions by default).

Per method, with budget_gate on and off, interleaved over `--repeats` rounds (each round rotates the
contenders' order; engine AR is a contender): the mean whole step (draft + verify + update) of
  - AR's steps (the reference, c_ar),
  - drafted steps that accepted nothing (a failed draft: drafting, a wider forward, bookkeeping),
  - drafted steps that proposed nothing (an empty draft: drafting alone),
  - the gate's plain AR steps (what skipping costs),
each as overhead over c_ar, and the run's tokens/s over AR's (median [min, max] over rounds).

    python -m experiments.failed_step --model smollm2-135m --dtype bfloat16 --out results/studies/failed_step
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from experiments.bench.load import load_prompts, method_factory, model_and_engine
from goose.engine.budget.auto_budget import AutoBudgetSettings, auto_budget_factory
from goose.engine.budget.calibration import engine_latency
from goose.engine.budget.draft_gate import DraftGateConfig
from goose.engine.core.decode import Generation, StepRecord, generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sizing import Speculator
from goose.records.code_state import code_state

METHODS = ("pld", "suffix", "tr", "goose", "opt_tree", "hw_tree")


def step_seconds(step: StepRecord) -> float:
    return step.draft_s + step.verify_s + step.update_s


def mean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def contenders(model: str, engine: Any, methods: list[str]) -> dict[str, Callable[[], Speculator]]:
    """engine AR, and each method at budget=auto with the gate on (`<m>:auto`) and off (`<m>:auto:nogate`)."""
    table = engine_latency(engine)
    out: dict[str, Callable[[], Speculator]] = {"ar": lambda: Speculator(ARDrafter())}
    for m in methods:
        make = method_factory(m, model=model)
        for label, gate in ((f"{m}:auto", DraftGateConfig()), (f"{m}:auto:nogate", None)):
            settings = AutoBudgetSettings(gate=gate, acceptance_prior=model)
            out[label] = auto_budget_factory(make, engine, latency=table, settings=settings)
    return out


def summarize(runs: dict[str, list[list[Generation]]]) -> dict[str, Any]:
    """Per contender: step kinds' mean seconds and overhead over AR's step; tokens/s over AR per round."""
    ar_steps = [step_seconds(s) for rnd in runs["ar"] for g in rnd for s in g.steps]
    c_ar = statistics.fmean(ar_steps)
    rate = {
        name: [sum(len(g.output_ids) for g in rnd) / sum(g.wall_time_s for g in rnd) for rnd in rounds]
        for name, rounds in runs.items()
    }
    out: dict[str, Any] = {"ar_step_ms": 1e3 * c_ar, "contenders": {}}
    for name, rounds in runs.items():
        steps = [s for rnd in rounds for g in rnd for s in g.steps]
        kinds = {
            "failed": [
                step_seconds(s) for s in steps if s.drafted and s.tree_size > 1 and s.accepted_len == 0
            ],
            "empty": [step_seconds(s) for s in steps if s.drafted and s.tree_size == 1],
            "skipped": [step_seconds(s) for s in steps if not s.drafted],
        }
        entry: dict[str, Any] = {"steps": len(steps)}
        for kind, seconds in kinds.items():
            m = mean_or_none(seconds)
            entry[kind] = {"count": len(seconds), "overhead": None if m is None else m / c_ar - 1.0}
        ratios = [r / a for r, a in zip(rate[name], rate["ar"], strict=True)]
        entry["speedup"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
        entry["tau"] = sum(len(g.output_ids) for rnd in rounds for g in rnd) / sum(
            g.forward_calls for rnd in rounds for g in rnd
        )
        out["contenders"][name] = entry
    return out


def table(summary: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:+.1f} %"

    lines = [
        f"AR step: {summary['ar_step_ms']:.2f} ms",
        "",
        "| contender | τ | tokens/s over AR | failed draft | empty draft | gated AR step |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in summary["contenders"].items():
        s = e["speedup"]
        cells = [
            f"{pct(e[k]['overhead'])} ({e[k]['count']})" if e[k]["count"] else "—"
            for k in ("failed", "empty", "skipped")
        ]
        lines.append(
            f"| {name} | {e['tau']:.2f} | {s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}] | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--bench", default="mtbench")
    ap.add_argument("--limit", type=int, default=5, help="the first prompts of --bench (MT-Bench: writing)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="results/studies/failed_step")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    prompts = load_prompts(loaded.tokenizer, args.model, [args.bench], args.limit, args.data_dir, "auto")
    makers = contenders(args.model, engine, args.methods.split(","))
    names = list(makers)
    for p in prompts[:1]:  # warm every contender's code path once, untimed
        for make in makers.values():
            sp = make()
            generate(engine, sp.drafter, p.ids, 16, sizer=sp.sizer)
    runs: dict[str, list[list[Generation]]] = {n: [] for n in names}
    t0 = time.time()
    for r in range(args.repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        done: dict[str, list[Generation]] = {n: [] for n in names}
        for p in prompts:
            for n in order:
                sp = makers[n]()  # a fresh drafter and sizer per prompt and round: a fresh process's state
                done[n].append(generate(engine, sp.drafter, p.ids, args.max_new_tokens, sizer=sp.sizer))
        for n in names:
            runs[n].append(done[n])
        print(f"round {r + 1}/{args.repeats} done ({time.time() - t0:.0f} s)", flush=True)
    summary = summarize(runs)
    summary["setup"] = {
        **vars(args),
        "prompts": [p.prompt_id for p in prompts],
        "threads": torch.get_num_threads(),
        "cpu": engine_latency(engine).meta.get("device"),
        "code": code_state(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.model}-{args.dtype}-{args.bench}.json"
    path.write_text(json.dumps(summary, indent=1))
    print(table(summary))
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    main()
