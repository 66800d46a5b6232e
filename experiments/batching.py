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
import json
import statistics
import time
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
from goose.engine.core.tree import DraftTree
from goose.harness.rows import environment
from goose.harness.verdicts import lossless_fields
from goose.records.code_state import check_one_code_state
from goose.records.results import append_row, read_rows

SHARED = "+shared"


def base_contender(name: str) -> str:
    """The method and its :auto without the budget policy (@batch) or the batch state (+shared) suffix."""
    return name.removesuffix(SHARED).partition("@")[0]


def contender_factory(name: str, model: str, engine) -> Any:
    """`method`, `method:auto` (budget=auto: each request's tree sized alone on the batch-1 cost curve) or
    `method:auto@batch` (then every tree cut to the batch's common cap, goose.engine.batch.budget); a
    `+shared` suffix shares the run-long drafter state across the batch (`batch_state`)."""
    method, _, auto = base_contender(name).partition(":")
    make = method_factory(method, model=model)
    if auto == "auto" and method != "ar":
        return auto_budget_factory(make, engine)
    return lambda: Speculator.of(make())


def row_method(name: str) -> str:
    """goose:auto -> goose_auto, goose:auto@batch -> goose_auto_batch, tr:auto+shared -> tr_auto_shared."""
    return name.replace(":auto", "_auto").replace("@", "_").replace(SHARED, "_shared")


def budget_policy(name: str) -> str:
    """The contender's budget policy: per_request (budget=auto alone), batch (@batch) or fixed."""
    name = name.removesuffix(SHARED)
    if "@" in name:
        return name.partition("@")[2]
    return "per_request" if ":auto" in name else "fixed"


def batch_state(name: str) -> str:
    """Where the contender's run-long drafter state lives: shared (+shared) or isolated."""
    return "shared" if name.endswith(SHARED) else "isolated"


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


def traces(served: Served, requests: list[Request]) -> list[dict[str, Any]]:
    """Per request, what a replay needs (analysis/studies/batching/replay.py): its prompt length, prefill
    seconds and, per step, [nodes verified, tokens committed, the request's own draft + update ms]."""
    return [
        {
            "prompt_tokens": len(r.prompt_ids),
            "prefill_s": round(g.prefill_s, 6),
            "steps": [[s.tree_size, s.new_tokens, round(1e3 * (s.draft_s + s.update_s), 4)] for s in g.steps],
        }
        for g, r in zip(served.generations, requests, strict=True)
    ]


SURFACE_NODES = (1, 2, 4, 8, 16, 32, 64)
SURFACE_BATCHES = (1, 2, 4, 8)  # whatever --concurrency runs: the replay interpolates between them
SURFACE_REPEATS = 5


def write_surface(batch: BatchEngine, requests: list[Request], dtype: str, path: Path, env: dict) -> None:
    """t(k, n): a batched verification's seconds (inputs, forward, walks, compaction) for k requests each
    verifying a chain of n nodes, median of SURFACE_REPEATS after one warm-up, at the requests' own prompt lengths."""
    seconds: dict[str, list[float]] = {}
    for k in SURFACE_BATCHES:
        for _ in range(k):
            batch.admit(
                requests[_ % len(requests)].prompt_ids, 4 * SURFACE_REPEATS * len(SURFACE_NODES), False
            )
        row = []
        for n in SURFACE_NODES:
            times = []
            for rep in range(SURFACE_REPEATS + 1):
                trees = [DraftTree.chain(0, [1] * (n - 1)) for _ in range(k)]
                t0 = time.perf_counter()
                batch.verify(trees, [n + 1] * k)
                if rep:
                    times.append(time.perf_counter() - t0)
            row.append(statistics.median(times))
        seconds[str(k)] = row
        for slot in reversed(range(k)):
            batch.release(slot)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "dtype": dtype,
        "nodes": list(SURFACE_NODES),
        "seconds": seconds,
        "forward": batch.forward_name,
    }
    path.write_text(
        json.dumps(payload | {"code_state": env["code_state"], "hardware": env["hardware"]}, indent=1)
    )


def rotated(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


def run_dtype(args: argparse.Namespace, dtype: str, out: Path, env: dict[str, Any]) -> None:
    loaded, engine = model_and_engine(args.model, dtype)
    prompts = load_prompts(
        loaded.tokenizer, args.model, args.benches.split(","), args.limit, args.data_dir, "auto"
    )
    requests = [Request(tuple(p.ids), args.max_new_tokens) for p in prompts]
    contenders = args.methods.split(",")
    factories = {name: contender_factory(name, args.model, engine) for name in contenders}  # calibrates
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    batch = BatchEngine(engine, max(*concurrencies, *(SURFACE_BATCHES if args.surface else ())))
    serve(batch, factories[contenders[0]], requests[: max(concurrencies)], max(concurrencies))  # warm-up
    if args.surface:
        write_surface(batch, requests, dtype, out / f"surface-{args.model}-{dtype}.json", env)
        if args.surface_only:
            return
    refs = [generate(engine, ARDrafter(), list(r.prompt_ids), r.max_new_tokens).output_ids for r in requests]
    run = args.tag or "main"
    path = out / f"{args.model}-{dtype}{'-' + args.tag if args.tag else ''}.jsonl"
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
                    batch_state=batch_state(name),
                )
                row = {
                    "study": "batching",
                    "run": run,
                    "model": args.model,
                    "dtype": dtype,
                    "method": row_method(name),
                    "concurrency": concurrency,
                    "repeat": r,
                    "position": position,
                    "benches": args.benches,
                    "max_new_tokens": args.max_new_tokens,
                    "batch_state": batch_state(name),
                    "budget_policy": policy,
                    "forward": batch.forward_name,
                    **summary(served),
                    **identity(engine, requests, served, refs),
                    **env,
                }
                if args.traces and concurrency == 1:
                    row["traces"] = traces(served, requests)
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
    parser.add_argument(
        "--tag", default="", help="a name for this run's rows file (<model>-<dtype>-<tag>.jsonl)"
    )
    parser.add_argument(
        "--traces", action="store_true", help="record per-step traces at concurrency 1 (replay)"
    )
    parser.add_argument(
        "--surface", action="store_true", help="measure the batched cost surface t(k, n) first"
    )
    parser.add_argument("--surface-only", action="store_true", help="with --surface: measure it and stop")
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
