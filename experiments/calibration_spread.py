"""How far apart two fresh processes calibrate budget=auto's cost curve t(n) on one machine.

Runs the start-up calibration (`goose.engine.budget.calibration.calibrate` at its defaults: every size up to
128 nodes at KV 256) in K fresh processes per measurement rule, each with the cache off, interleaved
(plain, robust, plain, robust, ... with the first rule alternating between pairs) so that the machine's
load over the run falls on both alike. Rules: `plain` (the median of 5 rounds, as before
MEASUREMENT_VERSION 2) and `robust` (`SettleRule`: outliers beyond 3·MAD dropped, extra rounds for the
sizes whose median is still uncertain, bounded in time). Per rule it reports:

- the per-size relative spread max/min − 1 of t(n) over the processes: its median over sizes and the
  worst size; the same for the curve's shape (each curve divided by its mean over the sizes), which is
  all a size rule that maximises E[committed | b] / t(b) sees;
- b* of budget=auto's size rule (`AutoBudget.choose` with its prior acceptance rates, on a Goose-like
  tree of 64 nodes) and of chains with geometric acceptance a^i (a = 0.5, 0.7, 0.8, 0.9), per process;
- the calibration's seconds (the start-up cost) and, per process, what a cache hit costs instead (the
  fingerprint, a write and a read of the cache file: `goose.engine.budget.latency_cache`).

    python -m experiments.calibration_spread --model smollm2-135m --dtype bfloat16 --processes 3 --threads 2

writes results/studies/calibration_spread/<model>-<dtype>.json (every curve and sample) and prints the
summary; `make calibration-spread` runs it for the bench's model and dtype.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RULES = ("plain", "robust")
GEOMETRIC = (0.5, 0.7, 0.8, 0.9)
B_MAX = 64


def spread(curves: list[list[float]], sizes: list[int]) -> dict[str, Any]:
    """Per size max/min − 1 over `curves` (one per process): its median over sizes, the worst size."""
    per_size = [max(col) / min(col) - 1 for col in zip(*curves, strict=True)]
    worst = max(range(len(sizes)), key=per_size.__getitem__)
    return {
        "median": statistics.median(per_size),
        "worst": per_size[worst],
        "worst_size": sizes[worst],
        "per_size": dict(zip(map(str, sizes), per_size, strict=True)),
    }


def shape(curve: list[float]) -> list[float]:
    mean = sum(curve) / len(curve)
    return [s / mean for s in curve]


def b_star(table_dict: dict[str, Any]) -> dict[str, int]:
    """b* of budget=auto's rule (its prior rates, a Goose-like tree of B_MAX nodes) and of geometric chains
    (q_i = a^i: b* = argmax_b Σ_{i<b} a^i / t(b), b <= B_MAX) on one calibrated curve."""
    from goose.engine.budget.auto_budget import AutoBudget
    from goose.engine.budget.calibration import calibration_tree
    from goose.engine.budget.cost_model import LatencyTable

    table = LatencyTable.from_dict(table_dict)
    sizer = AutoBudget(table)
    tree = calibration_tree(B_MAX, anchor=0, vocab_size=1 << 20)
    out = {"auto_prior": int(sizer.choose(tree, sizer.acceptance.keys(tree)))}
    t = table.curve(B_MAX)
    for a in GEOMETRIC:
        expected = [(1 - a ** (b)) / (1 - a) for b in range(1, B_MAX + 1)]
        rate = [e / s for e, s in zip(expected, t, strict=True)]
        out[f"chain_a{a:g}"] = max(range(B_MAX), key=rate.__getitem__) + 1
    return out


def child(args: argparse.Namespace) -> None:
    """One fresh process: load the model, calibrate with the cache off under `args.rule`, time a cache
    round trip; one JSON object on stdout's last line."""
    import torch

    from experiments.bench.load import model_and_engine
    from goose.engine.budget.calibration import calibration_settings
    from goose.engine.budget.latency_cache import cached_latency, fingerprint, read_cached, write_cached
    from goose.engine.budget.settle import ROBUST

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    loaded, engine = model_and_engine(args.model, args.dtype)
    loaded_s = time.perf_counter() - t0
    rule = None if args.rule == "plain" else ROBUST
    t0 = time.perf_counter()
    table, origin = cached_latency(engine, cache="off", rule=rule)
    calibrate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    key, components = fingerprint(engine, calibration_settings(rule=rule))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{key}.json"
        write_cached(path, table, key, components)
        written_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        key, components = fingerprint(engine, calibration_settings(rule=rule))
        read_cached(path, key, components)
        hit_s = time.perf_counter() - t0
    record = {
        "rule": args.rule,
        "forward": engine.forward_name,
        "threads": torch.get_num_threads(),
        "fingerprint": origin.fingerprint,
        "load_s": loaded_s,
        "calibrate_s": calibrate_s,
        "cache_write_s": written_s,
        "cache_hit_s": hit_s,
        "table": table.to_dict(),
    }
    print(json.dumps(record))


def run_children(args: argparse.Namespace) -> list[dict[str, Any]]:
    runs = []
    for i in range(args.processes):
        order = args.rules if i % 2 == 0 else args.rules[::-1]
        for rule in order:
            cmd = [sys.executable, "-m", "experiments.calibration_spread", "--child", "--rule", rule]
            cmd += ["--model", args.model, "--dtype", args.dtype]
            cmd += ["--threads", str(args.threads)] if args.threads else []
            load = os.getloadavg()[0]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            if proc.returncode != 0:
                raise SystemExit(f"process {i} ({rule}) failed:\n{proc.stderr[-3000:]}")
            record = json.loads(proc.stdout.strip().splitlines()[-1])
            record["process"] = i
            record["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]  # 1-min, before / after
            runs.append(record)
            print(
                f"process {i} {rule}: calibrated in {record['calibrate_s']:.1f} s "
                f"(cache hit instead: {record['cache_hit_s'] * 1e3:.0f} ms; load average "
                f"{record['load_average'][0]:.1f} -> {record['load_average'][1]:.1f})",
                flush=True,
            )
    return runs


def summarise(runs: list[dict[str, Any]], rules: list[str]) -> dict[str, Any]:
    out = {}
    for rule in rules:
        mine = [r for r in runs if r["rule"] == rule]
        sizes = mine[0]["table"]["sizes"]
        curves = [r["table"]["seconds"] for r in mine]
        out[rule] = {
            "processes": len(mine),
            "spread": spread(curves, sizes),
            "shape_spread": spread([shape(c) for c in curves], sizes),
            "b_star": [b_star(r["table"]) for r in mine],
            "calibrate_s": [round(r["calibrate_s"], 2) for r in mine],
            "cache_hit_s": [round(r["cache_hit_s"], 4) for r in mine],
            "load_average": [r["load_average"] for r in mine],
            "unsettled": [
                m.get("unsettled", [])
                for r in mine
                for m in r["table"]["meta"].get("measurement", {}).values()
            ],
            "extra_rounds": [
                sum(v - r["table"]["meta"]["repeats"] for v in m["rounds"].values())
                for r in mine
                for m in r["table"]["meta"].get("measurement", {}).values()
            ],
            "outliers": [
                sum(m["outliers"].values())
                for r in mine
                for m in r["table"]["meta"].get("measurement", {}).values()
            ],
        }
    return out


def report(summary: dict[str, Any]) -> str:
    lines = []
    for rule, s in summary.items():
        sp, sh = s["spread"], s["shape_spread"]
        lines.append(
            f"{rule:7s} ({s['processes']} processes): t(n) spread median {100 * sp['median']:.1f}%, "
            f"worst {100 * sp['worst']:.1f}% at n={sp['worst_size']}; shape spread median "
            f"{100 * sh['median']:.1f}%, worst {100 * sh['worst']:.1f}% at n={sh['worst_size']}; "
            f"calibration {statistics.mean(s['calibrate_s']):.1f} s "
            f"({', '.join(f'{x:.1f}' for x in s['calibrate_s'])}); cache hit "
            f"{1e3 * statistics.mean(s['cache_hit_s']):.0f} ms"
        )
        if s["extra_rounds"]:
            unsettled = [len(u) for u in s["unsettled"]]
            lines.append(
                f"        extra rounds {s['extra_rounds']}, outliers dropped {s['outliers']}, "
                f"sizes unsettled {unsettled} (a curve with more than a quarter unsettled is never cached)"
            )
        keys = list(s["b_star"][0])
        lines.append("        b*: " + "; ".join(f"{k} {[b[k] for b in s['b_star']]}" for k in keys))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--processes", type=int, default=3, help="fresh processes per rule (K)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rules", default=",".join(RULES), help="plain, robust or both (comma-separated)")
    ap.add_argument("--out", type=Path, default=None, help="JSON record (default: results/studies/...)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rule", choices=RULES, default="robust", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return {}
    args.rules = [r for r in args.rules.split(",") if r]
    if not args.rules or any(r not in RULES for r in args.rules):
        ap.error(f"--rules {','.join(args.rules)}: each must be one of {', '.join(RULES)}")
    if args.processes < 2:
        ap.error("--processes must be >= 2 (a spread needs two curves)")
    out = args.out or Path("results/studies/calibration_spread") / f"{args.model}-{args.dtype}.json"
    runs = run_children(args)
    summary = summarise(runs, args.rules)
    from goose.harness.rows import environment

    record = {
        "model": args.model,
        "dtype": args.dtype,
        "processes": args.processes,
        "threads": args.threads,
        "environment": environment(),
        "summary": summary,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))
    print(report(summary))
    print(f"-> {out}")
    return record


if __name__ == "__main__":
    main()
