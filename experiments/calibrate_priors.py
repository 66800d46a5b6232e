"""Acceptance priors calibrated offline (`make calibrate-priors`): the prior file a fresh process's acceptance
estimates start from (goose.engine.core.acceptance_prior), so that its first prompt is sized as a learnt run's.

For one model it runs the budget=auto drafters (`--methods`: Goose, SuffixDecoding, TR, OPT-Tree, hw_tree),
greedy, each as `make bench` runs it (`goose.harness.job` builds budget=auto on the same latency curve; one
fresh drafter and sizer per benchmark, carried across its prompts) on calibration prompts that the canonical
protocol does not use: `--skip` the first prompts of each benchmark (the protocol's 20), then `--limit`,
passing over any prompt that the held-out protocol's Spec-Bench sample holds (`make heldout`: Spec-Bench
contains MT-Bench's 80 questions, so MT-Bench's 21st and later prompts are in it; `--avoid-heldout`).
Every estimator counts every observation undecayed beside its decayed counts (`DecayedCounts.keep_totals`):
budget=auto's sizer (`auto_budget`, for the drafters it cuts; hw_tree sizes itself), OPT-Tree's own
(`opt_tree`) and hw_tree's (`hw_tree`). Summed over the benchmarks, per method and pooled (`all`, where a
table has several), the counts update each estimator's hand prior into the calibrated prior, `cap`
pseudo-observations at most per cell (`acceptance_prior.calibrate`); the file records how it was made. The drafters run with the hand prior
(`acceptance_prior=hand` where the method has the field), so a calibration never starts from an earlier one.

    python -m experiments.calibrate_priors --model smollm2-135m --dtype bfloat16 --threads 2 \\
        --latency results/protocol/smollm2-135m-bfloat16-v6/budget_latency.json

writes goose/data/priors/smollm2-135m-bfloat16.json (`--out` for elsewhere).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.hw_tree import HwTreeDrafter
from baselines.opt_tree import OptTreeDrafter
from experiments.bench.load import BenchPrompt, load_prompts, method_factory, model_and_engine
from goose.engine.budget.auto_budget import auto_budget_factory
from goose.engine.core.acceptance import DecayedCounts
from goose.engine.core.acceptance_prior import (
    DEFAULT_CAP,
    HAND,
    POOLED,
    PRIORS_DIR,
    prior_document,
    table_document,
    write_prior,
)
from goose.engine.core.decode import generate
from goose.engine.core.sampling import GREEDY, derive_seed
from goose.engine.core.sizing import Speculator
from goose.harness.compose import benchmark_prompts, compose_config
from goose.harness.job import latency_table, warm_generation
from goose.harness.rows import environment
from goose.records.code_state import code_state
from goose.records.paper import PAPER_BENCHMARKS
from goose.records.spec_bench import SPEC_BENCH, per_category_sample, question_category

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("goose", "suffix", "tr", "opt_tree", "hw_tree")
PROTOCOL_PROMPTS = 20  # make bench: the first 20 prompts of each benchmark (Makefile BENCH_ARGS)
HELDOUT_PER_CATEGORY = (
    3  # make heldout: Spec-Bench questions of each category (experiments.heldout --per-category)
)
# Per table: its axes, and the hand prior as the file describes it.
AXES = {"auto_budget": ("source", "depth", "rank"), "opt_tree": ("source", "depth", "rank")}
AXES["hw_tree"] = ("mask", "depth_bucket", "conf_bin")
HAND_PRIOR_TEXT = {
    "auto_budget": "goose.engine.core.acceptance.AcceptanceModel (budget=auto's sizer): 0.6 spine, "
    "0.35 / (rank + 1) otherwise, strength 2",
    "opt_tree": "goose.engine.core.acceptance.AcceptanceModel (OPT-Tree's, candidate ranks): OptTreeConfig's "
    "spine_prior, branch_prior / (rank + 1), prior_strength",
    "hw_tree": "baselines.hw_tree.acceptance.AcceptanceEstimator's fine prior (source_priors of HwTreeConfig's "
    "ctx/alt/suf/adj/run_prior, chain_gain), prior_strength",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="conf/model/<name>.yaml")
    ap.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--methods", default=",".join(METHODS), help="methods run under budget=auto")
    ap.add_argument("--benches", default=",".join(PAPER_BENCHMARKS), help="comma-separated benchmark names")
    ap.add_argument(
        "--data-dir", default=str(ROOT.parent / "shared" / "data"), help="files for mbpp / classeval"
    )
    ap.add_argument(
        "--skip", type=int, default=PROTOCOL_PROMPTS, help="prompts of each benchmark left to the protocol"
    )
    ap.add_argument("--limit", type=int, default=10, help="calibration prompts per benchmark after --skip")
    ap.add_argument(
        "--avoid-heldout",
        type=int,
        default=HELDOUT_PER_CATEGORY,
        help="pass over the prompts of the held-out Spec-Bench sample of this many questions per category "
        "(make heldout's; 0: none)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--cap", type=float, default=DEFAULT_CAP, help="pseudo-observations of a cell, at most")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument(
        "--latency", default=None, help="budget=auto's latency table JSON (default: calibrated at start-up)"
    )
    ap.add_argument(
        "--out", default=None, help="the prior file (default goose/data/priors/<model>-<dtype>.json)"
    )
    args = ap.parse_args(argv)
    if args.skip < 0 or args.avoid_heldout < 0 or args.limit < 1 or args.max_new_tokens < 1 or args.cap <= 0:
        ap.error("--skip and --avoid-heldout must be >= 0, --limit and --max-new-tokens >= 1, --cap > 0")
    args.methods = [m for m in args.methods.split(",") if m]
    args.benches = [b for b in args.benches.split(",") if b]
    args.name = f"{args.model}-{args.dtype}"
    args.out = Path(args.out) if args.out else PRIORS_DIR / f"{args.name}.json"
    return args


def hand_overrides(method: str, model: str) -> list[str]:
    """The override that keeps `method`'s drafter on its hand prior, where its config has the field."""
    drafter = compose_config([f"model={model}", f"method={method}"]).method.drafter
    return [f"method.drafter.acceptance_prior={HAND}"] if "acceptance_prior" in drafter else []


def learners(spec: Speculator) -> dict[str, DecayedCounts]:
    """The estimators of one contender whose counts a prior file holds, by table, each now keeping totals:
    budget=auto's sizer (unless the drafter sizes itself), OPT-Tree's and hw_tree's own."""
    out: dict[str, DecayedCounts] = {}
    if not spec.drafter.sizes_itself:
        out["auto_budget"] = spec.sizer.acceptance  # type: ignore[attr-defined]
    if isinstance(spec.drafter, OptTreeDrafter):
        out["opt_tree"] = spec.drafter.acceptance
    if isinstance(spec.drafter, HwTreeDrafter):
        out["hw_tree"] = spec.drafter.estimator
    for counts in out.values():
        if getattr(counts, "prior_name", HAND) != HAND:
            raise RuntimeError(
                f"{spec.drafter.name}: its estimator runs prior {counts.prior_name}, not the hand one"
            )
        counts.keep_totals()
    return out


def heldout_texts(model: str, data_dir: str, per_category: int) -> set[str]:
    """The texts of the held-out protocol's Spec-Bench sample (`per_category` questions of each category, as
    experiments.heldout draws them); empty for 0."""
    if per_category == 0:
        return set()
    cfg = compose_config([f"model={model}", f"bench={SPEC_BENCH}", f"data_dir={data_dir}"])
    _, prompts, _ = benchmark_prompts(cfg, None)
    return {p.text.strip() for p in per_category_sample(prompts, per_category, category=question_category)}


def by_bench(
    prompts: list[BenchPrompt], benches: list[str], skip: int, limit: int, avoid: set[str]
) -> tuple[dict[str, list[tuple[int, BenchPrompt]]], dict[str, list[str]]]:
    """Per benchmark its first `limit` prompts from index `skip` on whose text is not in `avoid`, each with
    its index in the benchmark; and the ids of those passed over."""
    out, avoided = {}, {}
    for b in benches:
        mine = [(i, p) for i, p in enumerate(q for q in prompts if q.bench == b) if i >= skip]
        kept = [(i, p) for i, p in mine if p.prompt.text.strip() not in avoid][:limit]
        if len(kept) < limit:
            raise SystemExit(
                f"experiments.calibrate_priors: {b} has {len(kept)} usable prompts after --skip {skip}"
            )
        avoided[b] = [p.prompt_id for i, p in mine if i <= kept[-1][0] and p.prompt.text.strip() in avoid]
        out[b] = kept
    return out, avoided


def plain(value: Any) -> Any:
    """`value` as JSON holds it (a config's tuples, numpy scalars)."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v)))


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    t_start = time.perf_counter()
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    avoid = heldout_texts(args.model, args.data_dir, args.avoid_heldout)
    slack = len(avoid)  # enough prompts past --skip + --limit to replace every one passed over
    every = load_prompts(
        loaded.tokenizer, args.model, args.benches, args.skip + args.limit + slack, args.data_dir, "false"
    )
    indexed, avoided = by_bench(every, args.benches, args.skip, args.limit, avoid)
    prompts = {b: [p for _, p in ps] for b, ps in indexed.items()}
    table, latency_record = latency_table(engine, args.latency)
    makers = {
        m: auto_budget_factory(
            method_factory(m, hand_overrides(m, args.model), model=args.model), engine, latency=table
        )
        for m in args.methods
    }
    first = prompts[args.benches[0]][0]
    for make in makers.values():  # untimed warm-up of each code path, with throw-away drafters
        warm_generation(engine, make(), first.ids[:64], GREEDY)

    counts: dict[str, dict[str, list[np.ndarray]]] = {}  # table -> method -> [reached, accepted]
    hand: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    tokens = dict.fromkeys(args.methods, 0)
    steps = dict.fromkeys(args.methods, 0)
    configs: dict[str, Any] = {}
    for bench, bench_prompts in prompts.items():
        for method, make in makers.items():
            spec = make()
            configs.setdefault(method, plain(spec.config()))
            tables = learners(spec)
            for name, learner in tables.items():
                hand.setdefault(name, learner.cell_prior())  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            for p in bench_prompts:
                seed = derive_seed(args.seed, p.bench, p.prompt_id)
                g = generate(
                    engine,
                    spec.drafter,
                    p.ids,
                    args.max_new_tokens,
                    sampling=GREEDY,
                    seed=seed,
                    sizer=spec.sizer,
                )
                tokens[method] += len(g.output_ids)
                steps[method] += g.forward_calls
            for name, learner in tables.items():
                assert learner.total_reached is not None and learner.total_accepted is not None
                acc = counts.setdefault(name, {}).setdefault(method, [0.0, 0.0])
                acc[0] = acc[0] + learner.total_reached
                acc[1] = acc[1] + learner.total_accepted
            print(
                f"{bench} {method}: {len(bench_prompts)} prompts in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )

    documents = {}
    for name, sections in counts.items():
        pooled = [sum(s[0] for s in sections.values()), sum(s[1] for s in sections.values())]
        documents[name] = table_document(
            AXES[name],
            {"estimator": HAND_PRIOR_TEXT[name]},
            {
                **{m: (r, a) for m, (r, a) in sections.items()},
                **({POOLED: tuple(pooled)} if len(sections) > 1 else {}),
            },
            *hand[name],
            args.cap,
        )
    env = environment()
    provenance = {
        "model": args.model,
        "hf_id": loaded.hf_id,
        "dtype": args.dtype,
        "device": str(engine.device),
        "threads": torch.get_num_threads(),
        "benchmarks": {
            b: {
                "indices": [i for i, _ in ps],
                "prompt_ids": [p.prompt_id for _, p in ps],
                "passed_over": avoided[b],
            }
            for b, ps in indexed.items()
        },
        "protocol_prompts": f"the first {PROTOCOL_PROMPTS} of each benchmark (make bench): not used here",
        "heldout_prompts": f"make heldout's Spec-Bench sample ({args.avoid_heldout} per category): passed over",
        "chat_template": False,
        "drafters": {m: {"contender": f"engine:{m}:auto", "config": configs[m]} for m in args.methods},
        "max_new_tokens": args.max_new_tokens,
        "sampling": "greedy",
        "seed": args.seed,
        "tokens": tokens,
        "steps": steps,
        "latency": latency_record["source"],
        "command": " ".join(
            ["python -m experiments.calibrate_priors", *(sys.argv[1:] if argv is None else argv)]
        ),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "code_state": code_state(),
        "hardware": env["hardware"],
        "versions": env["versions"],
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    path = write_prior(args.out, prior_document(args.name, args.model, args.cap, provenance, documents))
    print(f"experiments.calibrate_priors: {path} ({provenance['wall_s']:.0f} s)")
    return path


if __name__ == "__main__":
    main()
