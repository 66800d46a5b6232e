"""Continuous batching on this machine (issue 58): does training-free speculation still pay when requests
share the forward? For each dtype, every contender serves the same requests (HumanEval, GSM8K, MT-Bench
prompts) through goose.engine.batch at each concurrency, AR through the same batched engine being the
reference; ≥ 3 interleaved repeats (round r runs every (concurrency, contender) once, both orders rotated by
r). Each request's output is compared with batch-1 AR's (an untimed pass first); a divergence is classified
by its top-2 margin (goose.harness.verdicts). One row per (dtype, contender, concurrency, repeat) with the
batch's output tokens/s, each request's TPOT, the verification waste (nodes verified − accepted − anchors)
and the draft / forward / walk / update split; `make figures` tabulates them
(analysis/studies/batching/throughput.py).

    python -m experiments.batching --model smollm2-135m --dtypes float32,bfloat16 --threads 2 \
        --methods ar,pld,suffix:auto,tr:auto,goose:auto,hw_tree:auto,goose:auto@batch --concurrency 1,2,4,8 \
        --benches humaneval,gsm8k,mtbench --limit 4 --max-new-tokens 64 --repeats 3 \
        --data-dir ../shared/data --out results/studies/batching
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import torch

from experiments.bench.load import load_prompts, method_factory, model_and_engine
from goose.engine.batch.engine import BatchEngine
from goose.engine.batch.serve import Request, Served, serve
from goose.engine.budget.auto_budget import auto_budget_factory
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sizing import Speculator
from goose.harness.rows import environment
from goose.harness.verdicts import lossless_fields
from goose.records.code_state import check_one_code_state
from goose.records.results import append_row, read_rows


def contender_factory(name: str, model: str, engine) -> Any:
    """`method`, `method:auto` (budget=auto: each request's tree sized alone on the batch-1 cost curve) or
    `method:auto@batch` (then every tree cut to the batch's common cap, goose.engine.batch.budget)."""
    method, _, auto = name.partition("@")[0].partition(":")
    make = method_factory(method, model=model)
    if auto == "auto" and method != "ar":
        return auto_budget_factory(make, engine)
    return lambda: Speculator.of(make())


def row_method(name: str) -> str:
    """goose:auto -> goose_auto, goose:auto@batch -> goose_auto_batch."""
    return name.replace(":auto", "_auto").replace("@", "_")


def budget_policy(name: str) -> str:
    """The contender's budget policy: per_request (budget=auto alone), batch (@batch) or fixed."""
    if "@" in name:
        return name.partition("@")[2]
    return "per_request" if ":auto" in name else "fixed"


def summary(served: Served) -> dict[str, Any]:
    """The batch-level fields of one serve."""
    steps = served.steps
    tpot = served.tpot_s()
    return {
        "requests": len(served.generations),
        "output_tokens": served.output_tokens,
        "wall_time_s": served.wall_time_s,
        "tokens_per_s": served.tokens_per_s,
        "tpot_s": tpot,
        "tpot_p50_s": statistics.median(tpot) if tpot else None,
        "tpot_p99_s": sorted(tpot)[min(len(tpot) - 1, int(0.99 * len(tpot)))] if tpot else None,
        "forward_calls": sum(g.forward_calls for g in served.generations),
        "batch_steps": len(steps),
        "mean_active": sum(s.active for s in steps) / len(steps) if steps else 0.0,
        "nodes": sum(s.nodes for s in steps),
        "padded_nodes": sum(s.padded for s in steps),
        "accepted": sum(s.accepted for s in steps),
        "waste_nodes": sum(s.nodes - s.active - s.accepted for s in steps),
        # budget_policy batch: the mean common cap over the steps it capped (those with 2+ requests)
        "mean_cap": statistics.fmean(capped) if (capped := [s.cap for s in steps if s.cap]) else None,
        "draft_s": sum(s.draft_s for s in steps),
        "forward_s": sum(s.forward_s for s in steps),
        "walk_s": sum(s.walk_s for s in steps),
        "update_s": sum(s.update_s for s in steps),
        "prefill_s": sum(g.prefill_s for g in served.generations),
    }


def identity(engine, requests: list[Request], served: Served, refs: list[list[int]]) -> dict[str, Any]:
    """How many outputs equal batch-1 AR's, and each divergence's verdict (top-2 margin, near-tie)."""
    diverged = []
    for i, (req, gen, ref) in enumerate(zip(requests, served.generations, refs, strict=True)):
        if gen.output_ids != ref:
            verdict = lossless_fields(engine, list(req.prompt_ids), gen.output_ids, ref)
            diverged.append(
                {"request": i, **{k: verdict.get(k) for k in ("first_diff", "diff_margin", "near_tie")}}
            )
    return {"identical": len(refs) - len(diverged), "diverged": diverged}


def rotated(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


def run_dtype(args: argparse.Namespace, dtype: str, out: Path, env: dict[str, Any]) -> None:
    loaded, engine = model_and_engine(args.model, dtype)
    prompts = load_prompts(
        loaded.tokenizer, args.model, args.benches.split(","), args.limit, args.data_dir, "auto"
    )
    requests = [Request(tuple(p.ids), args.max_new_tokens) for p in prompts]
    refs = [generate(engine, ARDrafter(), list(r.prompt_ids), r.max_new_tokens).output_ids for r in requests]
    contenders = args.methods.split(",")
    factories = {name: contender_factory(name, args.model, engine) for name in contenders}  # calibrates
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    batch = BatchEngine(engine, max(concurrencies))
    serve(batch, factories[contenders[0]], requests[: max(concurrencies)], max(concurrencies))  # warm-up
    path = out / f"{args.model}-{dtype}.jsonl"
    existing = read_rows(path) if path.exists() else []
    check_one_code_state(existing, env["code_state"], str(path), allow=False)  # a resume never mixes code
    done = {(r["method"], r["concurrency"], r["repeat"]) for r in existing}
    for r in range(args.repeats):
        for ci, concurrency in enumerate(rotated(concurrencies, r)):
            for position, name in enumerate(rotated(contenders, r + ci)):
                if (row_method(name), concurrency, r) in done:
                    continue
                policy = budget_policy(name)
                served = serve(
                    batch,
                    factories[name],
                    requests,
                    concurrency,
                    budget_policy="batch" if policy == "batch" else "per_request",
                )
                row = {
                    "study": "batching",
                    "model": args.model,
                    "dtype": dtype,
                    "method": row_method(name),
                    "concurrency": concurrency,
                    "repeat": r,
                    "position": position,
                    "benches": args.benches,
                    "max_new_tokens": args.max_new_tokens,
                    "batch_state": "isolated",
                    "budget_policy": policy,
                    "forward": batch.forward_name,
                    **summary(served),
                    **identity(engine, requests, served, refs),
                    **env,
                }
                append_row(path, row)
                print(
                    f"{dtype} r{r} c{concurrency} {row['method']:<14} {row['tokens_per_s']:7.1f} tok/s  "
                    f"identical {row['identical']}/{len(requests)}",
                    flush=True,
                )
    del batch, engine, loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--methods", default="ar,pld,suffix:auto,tr:auto,goose:auto,hw_tree:auto")
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--benches", default="humaneval,gsm8k,mtbench")
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default="results/studies/batching")
    args = parser.parse_args(argv)
    if "ar" not in args.methods.split(","):
        parser.error("--methods must include ar: AR at the same concurrency is the reference")
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    env = {
        k: v for k, v in environment().items() if k in ("hardware", "code_state", "versions", "git_commit")
    }
    for dtype in args.dtypes.split(","):
        run_dtype(args, dtype, out, env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
