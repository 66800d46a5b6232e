"""The bench's run (`python -m experiments.bench`, the protocol in experiments/bench/__init__.py): the
contenders built, warmed up untimed, engine AR's reference pass, the rotated rounds, the hardware floor, the
rows sealed and a short summary printed."""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from experiments.bench.cli import parse_args
from experiments.bench.contenders import (
    Contender,
    Segment,
    Setting,
    contender_verifier,
    engine_contender,
    reference_pass,
    rotated,
    row_method,
)
from experiments.bench.hf import HF_KWARGS, hf_contender, hf_generate
from experiments.bench.load import load_prompts, method_factory, model_and_engine
from goose.engine.budget.auto_budget import AutoBudgetSettings
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.budget.draft_gate import DraftGateConfig
from goose.engine.budget.hardware_limit import measure_floor
from goose.engine.core.verifier import VerificationEngine
from goose.harness.compose import UserError
from goose.harness.job import auto_budget, warm_generation
from goose.harness.models.load import LoadedModel
from goose.harness.runner import SamplingPlan
from goose.records.bench_run import contender_name, record_from_rows, summary_lines
from goose.records.code_state import MixedCodeError, check_one_code_state, code_state
from goose.records.results import read_rows
from goose.records.seal import seal_tree

LATENCY_FILE = "budget_latency.json"


def show_partial(out: Path) -> dict[str, Any]:
    """Print and return the summary of the rows in `out` so far (runs nothing)."""
    rows = read_rows(out) if out.is_dir() else []
    if not rows:
        raise SystemExit(f"experiments.bench: no rows to show in {out}")
    record = record_from_rows(rows, out.name) | {"source": str(out)}
    print("\n".join(summary_lines(record)))
    return record


Warm = Callable[[list[int]], object]
"""An untimed, unrecorded run of a contender's code path on a short prompt."""


def auto_settings(args: argparse.Namespace) -> AutoBudgetSettings:
    """budget=auto's switches from the command line (the run config's budget_* keys)."""
    return AutoBudgetSettings(
        in_run_cost=args.in_run_cost,
        price_bookkeeping=not args.no_price_bookkeeping,
        gate=DraftGateConfig() if args.gate else None,
        acceptance_prior=args.model if args.acceptance_prior == "auto" else args.acceptance_prior,
    )


def build_contenders(
    args: argparse.Namespace, loaded: LoadedModel, engine: VerificationEngine
) -> tuple[dict[str, Contender], dict[str, Warm], dict[str, Any] | None]:
    """(the measured contenders, their warm-ups with throw-away drafters, the budget=auto curve as
    recorded in each row). budget=auto is set up as `run.py` does it (`goose.harness.job.auto_budget`),
    from --latency, else from the curve an earlier run of this bench saved in <out>, else
    calibrated now and saved there."""
    saved = args.out / LATENCY_FILE
    profile = args.latency or (str(saved) if saved.is_file() else None)
    latency_record = None
    measured: dict[str, Contender] = {}
    warm: dict[str, Warm] = {}
    model, eos = loaded.model, list(loaded.eos_token_ids)
    for name in args.contenders:
        method = row_method(name)
        if name.startswith("hf:"):
            kwargs = HF_KWARGS["greedy" if name == "hf:sample" else name.removeprefix("hf:")]
            measured[name] = hf_contender(model, eos, method, **kwargs)
            warm[name] = lambda ids, kw=kwargs: hf_generate(
                model, ids, 16, eos, 0, {"do_sample": False, **kw}
            )
            continue
        verifier = contender_verifier(name)
        base = method.removesuffix("_auto")
        make = method_factory(base, args.overrides.get(base, ()), model=args.model)
        if method.endswith("_auto"):
            make, latency_record = auto_budget(
                make, engine, profile, args.latency_kv, auto_settings(args), sampling=args.sampling
            )
            if profile is None:  # a resume drafts with the same curve
                saved.parent.mkdir(parents=True, exist_ok=True)
                LatencyTable.from_dict(latency_record).save(saved)
                profile = str(saved)
        measured[name] = engine_contender(method, make, verifier)
        sampling = replace(args.sampling, verifier=verifier)
        warm[name] = lambda ids, make=make, sampling=sampling: warm_generation(engine, make(), ids, sampling)
    return measured, warm, latency_record


def hardware_floor(engine: VerificationEngine, rows: list[dict[str, Any]], max_new: int) -> dict[str, Any]:
    """Each engine contender's mean verification forward per step (repeat 0) against its floor
    (goose.engine.budget.hardware_limit: weight + KV bytes at the measured bandwidth, or FLOPs at
    the measured matmul throughput) for its mean tree size after the mean KV length of a step.
    Measured after the timed rounds; written to <out>/hardware_floor.json."""
    floor = measure_floor(engine.model)
    first = [r for r in rows if r.get("repeat") == 0 and r.get("status") == "ok" and "forward_s" in r]
    if not first:
        return {}
    kv_len = round(sum(r["prompt_tokens"] for r in first) / len(first) + max_new / 2)
    out: dict[str, Any] = {"floor": floor.as_dict(), "mean_kv_len": kv_len, "contenders": {}}
    for method, verifier in dict.fromkeys((r["method"], r.get("verifier", "auto")) for r in first):
        mine = [r for r in first if r["method"] == method and r.get("verifier", "auto") == verifier]
        steps = sum(len(r.get("step_tree_size") or []) for r in mine)
        if not steps:
            continue
        step = sum(r["forward_s"] for r in mine) / steps
        nodes = sum(sum(r["step_tree_size"]) for r in mine) / steps
        bound = floor.seconds(max(1, round(nodes)), kv_len)
        out["contenders"][contender_name(method, verifier)] = {
            "mean_tree_nodes": nodes,
            "forward_ms": 1e3 * step,
            "floor_ms": 1e3 * bound,
            "times_floor": step / bound,
            "bound_by": floor.bound(max(1, round(nodes)), kv_len),
        }
    return out


def batched(args: argparse.Namespace) -> dict[str, Any]:
    """--concurrency above 1: the same prompts and engine contenders through experiments.batching's protocol
    (each contender serves every prompt at each concurrency, rounds rotated, AR at the same concurrency the
    reference); returns {"source": its rows file, "rows": how many it holds}."""
    from experiments import batching

    methods = ["ar", *(name.removeprefix("engine:") for name in args.contenders if name != "engine:ar")]
    dtype = args.dtype or "float32"  # every conf/model default
    argv = ["--model", args.model, "--dtypes", dtype, "--methods", ",".join(methods)]
    argv += ["--concurrency", ",".join(map(str, args.concurrency_list)), "--benches", args.benches]
    argv += ["--limit", str(args.limit), "--max-new-tokens", str(args.max_new_tokens)]
    argv += ["--repeats", str(args.repeats), "--threads", str(args.threads or torch.get_num_threads())]
    argv += ["--out", str(args.out), *(["--data-dir", str(args.data_dir)] if args.data_dir else [])]
    batching.main(argv)
    path = args.out / f"{args.model}-{dtype}.jsonl"
    return {"source": str(path), "rows": len(read_rows(path))}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    out: Path = args.out
    if args.show_partial:
        return show_partial(out)
    if args.concurrency_list != [1]:
        return batched(args)
    if args.fresh and out.exists():
        shutil.rmtree(out)
    try:  # before any model loads: one code state per run unless mixing is asked for
        check_one_code_state(
            read_rows(out) if out.is_dir() else [], code_state(), str(out), args.allow_mixed_code
        )
    except MixedCodeError as exc:
        raise SystemExit(f"experiments.bench: {exc}") from None
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        loaded, engine = model_and_engine(
            args.model, args.dtype, args.prepack, args.compile, args.device, args.cuda_graphs
        )
    except UserError as exc:  # a device or forward setting this machine cannot run
        raise SystemExit(f"experiments.bench: {exc}") from None
    benches = [b for b in args.benches.split(",") if b]
    prompts = load_prompts(
        loaded.tokenizer,
        args.model,
        benches,
        args.limit,
        args.data_dir,
        args.chat_template,
        args.per_category,
        args.categories,
    )
    measured, warm, latency_record = build_contenders(args, loaded, engine)
    names = list(measured)
    provenance = dict(loaded.provenance)
    model_label = provenance.pop("model_label", args.model)
    skip = ("sampling", "out", "fresh", "show_partial", "allow_mixed_code", "concurrency_list")
    protocol = {k: v for k, v in vars(args).items() if k not in skip}
    extra = {
        **({"allow_mixed_code": True} if args.allow_mixed_code else {}),
        "experiment": f"bench:{out.name}",
        "bench_protocol": protocol | {"threads": torch.get_num_threads()},
        "forward": engine.forward_name,
        **({"budget_latency": latency_record} if latency_record else {}),
        **provenance,
    }
    setting = Setting(
        engine,
        loaded.tokenizer,
        model_label,
        str(loaded.dtype).replace("torch.", ""),
        args.max_new_tokens,
        args.sampling,
        SamplingPlan(args.seed),
        out,
        extra,
        allow_mixed_code=args.allow_mixed_code,
    )
    for fn in warm.values():  # untimed warm-up of every code path, nothing recorded
        fn(prompts[0].ids[:64])
    by_bench = [bench_prompts for b in benches if (bench_prompts := [p for p in prompts if p.bench == b])]
    setting.references = reference_pass(setting, by_bench)
    for rep in range(args.repeats):
        t_rep = time.perf_counter()
        bar = tqdm(total=len(prompts), desc=f"repeat {rep + 1}/{args.repeats}", unit="prompt", mininterval=30)
        k = 0
        for bench_prompts in by_bench:
            segment: Segment = (rep, bench_prompts)
            for i in range(len(bench_prompts)):
                for name in rotated(names, k + rep):
                    measured[name](setting, segment, i)
                k += 1
                bar.update()  # between prompts, outside every timed call
        bar.close()
        print(f"repeat {rep + 1}/{args.repeats}: {time.perf_counter() - t_rep:.0f} s")
    seal_tree(out)
    rows = read_rows(out)
    floor = hardware_floor(engine, rows, args.max_new_tokens)
    if floor:
        (out / "hardware_floor.json").write_text(json.dumps(floor, indent=1))
    record = record_from_rows(rows, out.name, floor) | {"source": str(out)}
    print("\n" + "\n".join(summary_lines(record)))
    print(f"\nrows in {out}; `make figures` writes the wall-clock tables from them")
    return record
