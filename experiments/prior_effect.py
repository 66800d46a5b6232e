"""What the calibrated acceptance priors (goose/data/priors/, `make calibrate-priors`) are worth in wall clock
on a fresh process's first prompt: each budget=auto method with its estimates started from the hand prior
and from the model's calibrated prior, side by side with engine AR (experiments.interleaved: a fresh
drafter and sizer per prompt, the order rotated every round).

Arms per method: `<m>:hand` (every estimate from the hand prior), `<m>:auto` (budget=auto's size rule from the
model's prior, as `run.py` runs it by default) and, for the drafters that size with their own estimator
(OPT-Tree, hw_tree; `acceptance_prior` in their config), `<m>:prior` (that estimator from the model's prior
too: OPT-Tree's `run.py` default; their `:auto` arm keeps it on the hand prior). hw_tree sizes itself, so its
`:auto` arm is its `:hand` arm and is not run.

    python -m experiments.prior_effect --model smollm2-135m --dtype bfloat16 --threads 2 \\
        --out results/studies/priors
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from experiments.bench.load import load_prompts, method_factory, model_and_engine
from experiments.interleaved import Runs, add_common_args, interleaved_runs, speedup, tau, write_record
from goose.engine.budget.auto_budget import AutoBudgetSettings, auto_budget_factory
from goose.engine.budget.calibration import engine_latency
from goose.engine.core.acceptance_prior import HAND
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sizing import Speculator

METHODS = ("suffix", "goose", "opt_tree", "hw_tree")
OWN_ESTIMATOR = ("opt_tree", "hw_tree")  # drafters with an `acceptance_prior` of their own
SELF_SIZED = ("hw_tree",)  # budget=auto's size rule does not cut their trees


def arms(model: str, engine: Any, methods: list[str]) -> dict[str, Callable[[], Speculator]]:
    """engine AR, and per method its arms (module docstring), all at budget=auto on one latency curve."""
    table = engine_latency(engine)
    out: dict[str, Callable[[], Speculator]] = {"ar": lambda: Speculator(ARDrafter())}
    for m in methods:
        own = [f"method.drafter.acceptance_prior={model}"]
        hand = [f"method.drafter.acceptance_prior={HAND}"] if m in OWN_ESTIMATOR else []
        plan = [("hand", HAND, hand)]
        plan += [] if m in SELF_SIZED else [("auto", model, hand)]
        plan += [("prior", model, own)] if m in OWN_ESTIMATOR else []
        for label, sizer_prior, overrides in plan:
            make = method_factory(m, overrides, model=model)
            settings = AutoBudgetSettings(acceptance_prior=sizer_prior)
            out[f"{m}:{label}"] = auto_budget_factory(make, engine, latency=table, settings=settings)
    return out


def summarize(runs: Runs, benches: list[str]) -> dict[str, Any]:
    """Per arm: tokens/s over AR (all prompts and per benchmark: median [min, max] over rounds), τ, and the
    mean size of its drafted trees."""
    out: dict[str, Any] = {}
    per = len(runs["ar"][0]) // len(benches)
    for name, rounds in runs.items():
        sizes = [s.tree_size for rnd in rounds for g in rnd for s in g.steps if s.drafted]
        out[name] = {
            "speedup": speedup(runs, name),
            "per_bench": {
                b: speedup(runs, name, lambda i, j=j: j * per <= i < (j + 1) * per)
                for j, b in enumerate(benches)
            },
            "tau": tau(rounds),
            "mean_tree": statistics.fmean(sizes) if sizes else 1.0,
        }
    return out


def table(summary: dict[str, Any], benches: list[str]) -> str:
    def cell(s: dict[str, float]) -> str:
        return f"{s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}]"

    lines = [
        "| arm | τ | mean tree | all | " + " | ".join(benches) + " |",
        "|---" * (4 + len(benches)) + "|",
    ]
    for name, e in summary.items():
        cells = [cell(e["speedup"]), *(cell(e["per_bench"][b]) for b in benches)]
        lines.append(f"| {name} | {e['tau']:.2f} | {e['mean_tree']:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap, METHODS, "results/studies/priors")
    ap.add_argument("--benches", default="humaneval,gsm8k,mtbench")
    ap.add_argument("--limit", type=int, default=4, help="the first prompts of each benchmark")
    ap.add_argument(
        "--run-long",
        action="store_true",
        help="one drafter and sizer per benchmark and round, learning over its prompts (as make bench), "
        "instead of a fresh one per prompt",
    )
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    benches = [b for b in args.benches.split(",") if b]
    loaded, engine = model_and_engine(args.model, args.dtype)
    prompts = [
        p
        for b in benches
        for p in load_prompts(loaded.tokenizer, args.model, [b], args.limit, args.data_dir, "auto")
    ]
    if len(prompts) != args.limit * len(benches):
        raise SystemExit(
            f"experiments.prior_effect: expected {args.limit} prompts per benchmark, got {len(prompts)}"
        )
    makers = arms(args.model, engine, args.methods.split(","))
    state_per = args.limit if args.run_long else None
    runs = interleaved_runs(
        engine, [p.ids for p in prompts], makers, args.repeats, args.max_new_tokens, state_per=state_per
    )
    summary = {"arms": summarize(runs, benches)}
    print(table(summary["arms"], benches))
    path = Path(args.out) / f"{args.model}-{args.dtype}{'-run_long' if args.run_long else ''}.json"
    write_record(
        summary, args, [p.prompt_id for p in prompts], engine_latency(engine).meta.get("device"), path
    )
    return summary


if __name__ == "__main__":
    main()
