"""The held-out run (`python -m experiments.heldout`, the protocol in experiments/heldout/__init__.py): the
arguments recorded in <out>/heldout.json, the Spec-Bench run, the fresh processes, the rows sealed, and each
workload's ratios and verdicts printed (goose.records.heldout)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiments.heldout import fresh_process, spec_categories
from experiments.heldout.cli import ROOT, bench_argv_checked, parse_args
from goose.records.bench_run import spread
from goose.records.heldout import (
    FRESH,
    MANIFEST,
    by_question_category,
    fresh_record,
    group_ratios,
    spec_record,
    verdict_lines,
)
from goose.records.seal import seal_tree

# Arguments a resumed run must share with the run in <out> (more repeats or rounds extend it).
SAME_ON_RESUME = ("model", "dtype", "contenders", "categories", "per_category", "benches", "fresh_limit")
SAME_ON_RESUME += ("max_new_tokens", "gate")


def manifest(args) -> dict[str, Any]:
    """What <out>/heldout.json records: the arguments, the fresh benchmarks as `benches`."""
    keep = ("model", "dtype", "threads", "contenders", "workloads", "categories", "per_category", "repeats")
    keep += ("fresh_limit", "rounds", "max_new_tokens", "data_dir", "gate")
    return {k: getattr(args, k) for k in keep} | {"benches": args.fresh_benches}


def check_resume(out: Path, now: dict[str, Any]) -> None:
    """SystemExit where <out> holds a held-out run of other arguments (SAME_ON_RESUME)."""
    path = out / MANIFEST
    if not path.is_file():
        return
    before = {"gate": False, **json.loads(path.read_text())}  # a run recorded before --gate ran without it
    differ = [k for k in SAME_ON_RESUME if k in before and k in now and before[k] != now[k]]
    if differ:
        what = "; ".join(f"{k}: {before[k]} there, {now[k]} now" for k in differ)
        raise SystemExit(
            f"experiments.heldout: {out} holds a held-out run of other arguments ({what}); use another --out"
        )


def summary(out: Path) -> list[str]:
    """Each workload's tokens/s over engine AR per group and over all prompts, and the verdicts."""
    lines = []
    for name, record, group_of in (
        ("spec_bench", spec_record(out), by_question_category),
        ("fresh", fresh_record(out), None),
    ):
        if record is None:
            continue
        ratios = group_ratios(record, group_of)
        lines.append(f"{name}: tokens/s over engine:ar, median [min, max] over repeats:")
        for group, columns in ratios.items():
            cells = ", ".join(f"{c} {spread(v)}" for c, v in columns.items() if v)
            lines.append(f"  {group}: {cells}")
        lines += verdict_lines(name, ratios)
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out
    spec = "spec_bench" in args.workloads
    processes = fresh_process.schedule(args) if "fresh" in args.workloads else []
    if spec:
        try:
            bench_argv_checked(spec_categories.bench_argv(args))
        except ValueError as exc:
            raise SystemExit(f"experiments.heldout: {exc}") from None
    if args.dry_run:
        if spec:
            print(shlex.join(spec_categories.command(args)))
        for p in processes:
            state = "  # done" if fresh_process.done(p, args.fresh_limit) else ""
            print(shlex.join(fresh_process.command(args, p)) + state)
        return 0
    now = manifest(args)
    check_resume(out, now)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps(now, indent=1) + "\n")
    t0 = time.perf_counter()
    if spec:
        print(f"heldout: spec_bench: {shlex.join(spec_categories.command(args))}", flush=True)
        rc = subprocess.run(spec_categories.command(args), cwd=ROOT).returncode
        if rc != 0:
            raise SystemExit(f"experiments.heldout: the Spec-Bench run failed (exit {rc})")
    for p in processes:
        fresh_process.run(args, p, log=lambda s: print(f"heldout: {s}", flush=True))
    if processes:
        seal_tree(out / FRESH)
    print(f"\nheldout: {time.perf_counter() - t0:.0f} s; rows in {out}")
    print("\n".join(summary(out)))
    print(
        "\n`python -m analysis.heldout --records <the folder above heldout/>` (or `make figures`) writes the tables"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
