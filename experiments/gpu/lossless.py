"""The lossless stage of `make gpu-check`: SmolLM2 on the device through experiments.lossless_stress, one run
per dtype (and a sampled fp32 run, and on CUDA one with every step replayed from CUDA graphs), each run's
methods dealt over processes side by side; then per run and method, the outputs identical to AR's and the
verdict on every mismatch."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from experiments.gpu.profile import GRAPHED_FP32, REAL_MODEL, ROOT, SAMPLED, Profile, relative
from experiments.gpu.record import save_record
from goose.records.results import read_rows as read_result_rows


def lossless_shards(methods: list[str], shards: int) -> list[list[str]]:
    """`methods` dealt round-robin into at most `shards` non-empty lists (slow methods spread out)."""
    shards = max(1, min(shards, len(methods)))
    return [methods[k::shards] for k in range(shards)]


def lossless_header(profile: Profile) -> dict[str, Any]:
    """What the lossless stage ran: model, benchmarks, prompts, tokens and processes side by side."""
    return {
        "model": REAL_MODEL,
        "benches": list(profile.lossless_benches),
        "limit": profile.lossless_limit,
        "max_new_tokens": profile.lossless_tokens,
        "jobs": profile.lossless_jobs,
    }


def stage_lossless(
    profile: Profile, work: Path, data_dir: str, record: dict[str, Any], path: Path
) -> dict[str, Any]:
    """SmolLM2 on the device through experiments.lossless_stress: one run per dtype (and the sampled
    fp32 run), every run's methods dealt over subprocesses that run side by side, up to
    `lossless_jobs` at once (a 135M model leaves a GPU mostly idle, so the processes share it well;
    nothing here is timed). Each process writes its rows under <run>/shard<k>/ as it goes, so a run
    cut short keeps every output it finished; the record is saved once they all end."""
    from experiments.lossless_stress import ALL_METHODS

    out: dict[str, Any] = record["stages"].setdefault("lossless", {})
    out |= lossless_header(profile)
    save_record(record, path)  # a run cut short can still be summarised from its rows (--lossless-rows)
    runs = [(dtype, dtype, []) for dtype in profile.lossless_dtypes]
    if profile.lossless_temperature is not None:
        temp = profile.lossless_temperature
        runs.insert(1, (f"{SAMPLED}{temp:g}", "float32", ["--set", f"sampling.temperature={temp}"]))
    if profile.lossless_graphs and torch.device(profile.device).type == "cuda":
        runs.append((GRAPHED_FP32, "float32", ["--set", "cuda_graphs=true"]))
    shards_per_run = max(1, -(-profile.lossless_jobs // len(runs)))
    queue: list[tuple[str, Path, list[str]]] = []
    for label, dtype, extra in runs:
        chosen = (profile.half_methods if dtype != "float32" else None) or profile.lossless_methods
        methods = [m for m in (chosen.split(",") if chosen else ALL_METHODS) if m]
        for k, shard in enumerate(lossless_shards(methods, shards_per_run)):
            shard_dir = work / "lossless" / label / f"shard{k}"
            argv = [
                *extra,
                "--model",
                REAL_MODEL,
                "--device",
                profile.device,
                "--dtype",
                dtype,
                "--limit",
                str(profile.lossless_limit),
                "--max-new-tokens",
                str(profile.lossless_tokens),
                "--benches",
                ",".join(profile.lossless_benches),
                "--data-dir",
                data_dir,
                "--methods",
                ",".join(shard),
                "--threads",
                "1",
                "--out",
                str(shard_dir),
            ]
            queue.append((label, shard_dir, argv))
    t0 = time.perf_counter()
    codes = run_side_by_side(queue, profile.lossless_jobs)
    for label, *_ in runs:
        mine = [(d, codes.get(d)) for lab, d, _ in queue if lab == label]
        bad = [f"{d.name} exited {rc}" for d, rc in mine if rc != 0 and rc != 1]
        missing = [d.name for d, _ in mine if not (d / "summary.json").is_file()]
        if bad or missing:
            logs = "; ".join((d / "log.txt").read_text()[-600:] for d, _ in mine if (d / "log.txt").is_file())
            out[label] = {"error": f"{', '.join(bad + missing)} (see their logs): {logs}"[-3000:]}
            if not any((d / "summary.json").is_file() for d, _ in mine):
                continue
        out[label] = out.get(label, {}) | {
            "returncode": max(rc or 0 for _, rc in mine),
            "seconds": time.perf_counter() - t0,
            **lossless_summary(work / "lossless" / label),
        }
    save_record(record, path)
    if GRAPHED_FP32 in out and "totals" in out[GRAPHED_FP32] and "totals" in out.get("float32", {}):
        eager, graphed = (
            ar_outputs(work / "lossless" / "float32"),
            ar_outputs(work / "lossless" / GRAPHED_FP32),
        )
        shared = sorted(set(eager) & set(graphed))
        same = sum(eager[k] == graphed[k] for k in shared)
        out[GRAPHED_FP32]["ar_identical_to_eager"] = {"identical": same, "prompts": len(shared)}
    return out


def run_side_by_side(queue: list[tuple[str, Path, list[str]]], jobs: int) -> dict[Path, int | None]:
    """`python -m experiments.lossless_stress <argv>` for every queued shard, `jobs` at a time, each
    logging to <shard>/log.txt; returns each shard's exit status. Stopped early (SIGTERM, e.g. a
    host's time limit), it stops every process it started: their rows so far stay."""
    codes: dict[Path, int | None] = {}
    running: list[tuple[Path, subprocess.Popen, Any]] = []
    pending = list(queue)
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                label, shard_dir, argv = pending.pop(0)
                shard_dir.mkdir(parents=True, exist_ok=True)
                log = (shard_dir / "log.txt").open("w")
                cmd = [sys.executable, "-m", "experiments.lossless_stress", *argv]
                running.append((shard_dir, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log), log))
                print(
                    f"  {label}/{shard_dir.name}: started ({argv[argv.index('--methods') + 1]})", flush=True
                )
            time.sleep(0.5)
            for item in list(running):
                shard_dir, proc, log = item
                if proc.poll() is not None:
                    log.close()
                    codes[shard_dir] = proc.returncode
                    running.remove(item)
                    print(f"  {shard_dir.parent.name}/{shard_dir.name}: exit {proc.returncode}", flush=True)
    finally:
        for shard_dir, proc, log in running:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
            codes[shard_dir] = proc.returncode
    return codes


def lossless_summary(run_dir: Path) -> dict[str, Any]:
    """Per method, from the rows under `run_dir` (every benchmark there): outputs identical to AR's,
    mismatches by kind, failed prompts, and outputs with no token-for-token verdict (sampled drafts
    at a temperature: exact in distribution only)."""
    from experiments.lossless_stress import _latest, summarize

    rows = _latest([r for r in read_result_rows(run_dir) if r.get("experiment") == "lossless_stress"])
    methods: dict[str, dict[str, int]] = {}
    mismatches = []
    for method in sorted({r["method"] for r in rows} - {"ar"}):
        agg = {"prompts": 0, "identical": 0, "near_tie": 0, "real": 0, "failed": 0, "no_verdict": 0}
        for bench in sorted({r["bench"] for r in rows if r["method"] == method}):
            mine = [r for r in rows if r["bench"] == bench]
            s = summarize(mine, method)
            agg["prompts"] += s["prompts"]
            agg["identical"] += s["identical"]
            agg["failed"] += len(s["failed"])
            agg["no_verdict"] += sum(
                1
                for r in mine
                if r["method"] == method and r.get("status") == "ok" and r.get("lossless") is None
            )
            for m in s["mismatches"]:
                agg["near_tie" if m["near_tie"] else "real"] += 1
                mismatches.append({"method": method, "bench": bench, **m})
        methods[method] = agg
    totals = {k: sum(m[k] for m in methods.values()) for k in next(iter(methods.values()), {})}
    benches = sorted({r["bench"] for r in rows})
    return {
        "methods": methods,
        "totals": totals,
        "mismatches": mismatches,
        "benches": benches,
        "rows": relative(run_dir),
    }


def ar_outputs(run_dir: Path) -> dict[tuple[str, str], list[int]]:
    """AR's output ids per (bench, prompt) in one lossless run's rows."""
    return {
        (r["bench"], r["prompt_id"]): r["output_ids"]
        for r in read_result_rows(run_dir)
        if r.get("method") == "ar" and r.get("status", "ok") == "ok"
    }
