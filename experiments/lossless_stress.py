"""Losslessness under stress: every method on every offline benchmark, each prompt compared token
by token with greedy AR (docs/paper.md, "Lossless").

For each method x bench: the share of prompts whose output is identical to AR's, and for every
mismatch the first differing index, the top-2 logit margin of a teacher-forced forward over AR's
prefix up to that index, and its classification against the near-tie threshold (2 ulps of the top
logit in the model's dtype, at least 1e-4: `goose.harness.runner.near_tie_threshold`). A near-tie is
numerical noise; anything else is a bug, and the script exits with status 1.

Rows go through the same runner as `run.py` (goose.harness.runner.run_cell: the AR reference generated once
per prompt and reused by every method, `lossless_fields` for the verdict, failures recorded as
rows), into <out>/<model>/<bench>.jsonl; a re-run with the same --out resumes. The summary is
printed and written to <out>/summary.json.

    python -m experiments.lossless_stress --data-dir ../shared/data                 # the full run
    python -m experiments.lossless_stress --limit 1 --max-new-tokens 64 \\
        --methods pld,tr,goose --benches humaneval,gsm8k --out /tmp/stress          # a smoke test
    python -m experiments.lossless_stress --device cuda --dtype float32 --set cuda_graphs=true
                                                                  # every method through CUDA graphs
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from goose.harness.compose import (
    UserError,
    benchmark_prompts,
    compose_config,
    drafter_factory,
    load_engine,
    sampling_settings,
)
from goose.harness.runner import Cell, near_tie_threshold, run_cell
from goose.records.metrics import format_table
from goose.records.paper import PAPER_BENCHMARKS
from goose.records.results import read_rows, results_path

CONF = Path(__file__).resolve().parents[1] / "conf"
ALL_METHODS = tuple(sorted(p.stem for p in (CONF / "method").glob("*.yaml") if p.stem != "ar"))


def compose_job(model: str, bench: str, method: str, overrides: list[str]):
    """The validated run.py config of one (model, bench, method) job."""
    return compose_config([f"model={model}", f"bench={bench}", f"method={method}", *overrides])


def summarize(rows: list[dict[str, Any]], method: str) -> dict[str, Any]:
    """Identical share and the mismatches of one method x bench from its result rows."""
    mine = [r for r in rows if r["method"] == method]
    ok = [r for r in mine if r.get("status") == "ok" and r.get("lossless") is not None]
    mismatches = [
        {
            "prompt_id": r["prompt_id"],
            "first_diff": r["first_diff"],
            "tokens_ar_vs_method": r.get("diff_tokens"),
            "top2": r.get("diff_top2"),
            "margin": r["diff_margin"],
            "threshold": r.get("near_tie_threshold"),
            "near_tie": r["near_tie"],
        }
        for r in ok
        if not r["lossless"]
    ]
    return {
        "prompts": len(ok),
        "identical": sum(1 for r in ok if r["lossless"]),
        "identical_share": sum(1 for r in ok if r["lossless"]) / len(ok) if ok else float("nan"),
        "failed": [
            {"prompt_id": r["prompt_id"], "error": r.get("error")} for r in mine if r.get("status") != "ok"
        ],
        "mismatches": mismatches,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument(
        "--methods", default=",".join(ALL_METHODS), help="method configs (conf/method), comma-separated"
    )
    ap.add_argument("--benches", default=",".join(PAPER_BENCHMARKS))
    ap.add_argument(
        "--limit", type=int, default=None, help="first N prompts of each benchmark (default: all)"
    )
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--dtype", default=None, help="override the model's dtype (float32, float16, bfloat16)")
    ap.add_argument("--device", default=None, help="override the model's device (cpu, cuda, cuda:1, ...)")
    ap.add_argument("--data-dir", default="../shared/data", help="folder laid out like ../shared/data")
    ap.add_argument(
        "--out", default="outputs/lossless_stress", help="rows and summary.json go here (not results/)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a run.py override for every job, e.g. cuda_graphs=true (repeatable)",
    )
    args = ap.parse_args(argv)

    methods = [m for m in args.methods.split(",") if m]
    benches = [b for b in args.benches.split(",") if b]
    overrides = [f"max_new_tokens={args.max_new_tokens}", "quick=false", f"data_dir={args.data_dir}"]
    if args.limit is not None:
        overrides.append(f"bench.limit={args.limit}")
    if args.dtype:
        overrides.append(f"model.dtype={args.dtype}")
    if args.device:
        overrides.append(f"model.device={args.device}")
    overrides += args.set
    out = Path(args.out)
    if out.resolve() == (CONF.parent / "results" / "reference").resolve():
        ap.error("--out must not be results/reference/ (the shipped reference runs live there)")
    if args.threads:
        torch.set_num_threads(args.threads)

    # Every config (and every benchmark file) is checked before the model loads.
    try:
        jobs = {(b, m): compose_job(args.model, b, m, overrides) for b in benches for m in methods}
        prompts = {}
        for b in benches:
            _, bench_prompts, source = benchmark_prompts(jobs[(b, methods[0])], args.limit)
            prompts[b] = (bench_prompts, source)
        loaded, engine = load_engine(next(iter(jobs.values())))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dtype = str(loaded.dtype).replace("torch.", "")
    threshold_rule = (
        "max(2 ulps of the top logit in "
        + dtype
        + f", 1e-4); e.g. {near_tie_threshold(20.0, loaded.dtype):.3g} at a top logit of 20"
    )
    print(
        f"lossless stress: model={args.model} dtype={dtype} max_new_tokens={args.max_new_tokens} "
        f"limit={args.limit} methods={','.join(methods)} benches={','.join(benches)} -> {out}\n"
        f"near-tie threshold: {threshold_rule}"
    )

    t0 = time.perf_counter()
    summary: dict[str, dict[str, Any]] = {}
    for b in benches:
        bench_prompts, source = prompts[b]
        file = results_path(out, args.model, b)
        for m in methods:
            cfg = jobs[(b, m)]
            make = drafter_factory(cfg)
            sampling, plan = sampling_settings(cfg)
            cell = Cell(args.model, b, m, make().config(), args.max_new_tokens, dtype, sampling=sampling)
            run_cell(
                engine,
                loaded.tokenizer,
                bench_prompts,
                cell,
                make,
                file,
                extra={"bench_source": source, "experiment": "lossless_stress"},
                log=lambda line: print("  " + line),
                plan=plan,
            )
            ids = {p.prompt_id for p in bench_prompts}
            rows = [
                r
                for r in read_rows(file)
                if r["prompt_id"] in ids
                and r["max_new_tokens"] == args.max_new_tokens
                and r["dtype"] == dtype
                and r["method_config"] == cell.method_config
                and r.get("temperature", 0.0) == sampling.temperature
            ]
            summary.setdefault(m, {})[b] = summarize(_latest(rows), m)

    table = []
    for m in methods:
        for b in benches:
            s = summary[m][b]
            near = sum(1 for x in s["mismatches"] if x["near_tie"])
            table.append(
                [
                    m,
                    b,
                    s["prompts"],
                    s["identical_share"],
                    near,
                    len(s["mismatches"]) - near,
                    len(s["failed"]),
                ]
            )
    print()
    print(format_table(["method", "bench", "prompts", "identical", "near-tie", "real", "failed"], table))
    real = []
    for m in methods:
        for b in benches:
            for x in summary[m][b]["mismatches"]:
                kind = "near-tie" if x["near_tie"] else "REAL"
                print(
                    f"{kind} mismatch: {m} {b} {x['prompt_id']}: first diff at {x['first_diff']}, "
                    f"AR/method tokens {x['tokens_ar_vs_method']}, top-2 {x['top2']}, margin {x['margin']:.3g} "
                    f"(threshold {x['threshold']:.3g})"
                )
                if not x["near_tie"]:
                    real.append(x)
            for f in summary[m][b]["failed"]:
                print(f"failed: {m} {b} {f['prompt_id']}: {f['error']}")
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "model": args.model,
        "dtype": dtype,
        "max_new_tokens": args.max_new_tokens,
        "limit": args.limit,
        "near_tie_threshold": threshold_rule,
        "seconds": time.perf_counter() - t0,
        "summary": summary,
    }
    (out / "summary.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"\n{len(real)} real mismatch(es); summary in {out / 'summary.json'}")
    return 1 if real else 0


def _latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (method, prompt), as the runner reads them: the first "ok" row, else (the
    prompt failed every time) the last failed one."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["method"], r["prompt_id"])
        if key not in best or best[key].get("status") != "ok":
            best[key] = r
    return list(best.values())


if __name__ == "__main__":
    sys.exit(main())
