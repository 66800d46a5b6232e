"""The fresh-process workload of the held-out protocol: each contender in its own `python run.py` process per
benchmark and round, as a new user runs it (model load, budget=auto's curve set up at start-up as run.py sets it
up, and the warm-up, each time), rows into <out>/fresh/round<r>/<method>/<model>/<bench>.jsonl.

Engine AR first runs once per benchmark into <out>/fresh/reference/ (untimed). Its rows are copied into a
contender's results file before the contender's process starts: `run.py` resumes by cell key, so it finds
AR's rows there, runs the contender alone and checks its outputs against them, as after an AR run of the
user's own. A process whose rows are all written is done and not run again; one cut short is cleared and
run again whole, since a process is what the workload measures."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.bench.contenders import rotated, row_method
from goose.records.heldout import FRESH, REFERENCE, round_folder
from goose.records.results import read_rows
from goose.records.seal import copy_results_file, tail_path

ROOT = Path(__file__).resolve().parents[2]
LOGS = "logs"


@dataclass(frozen=True)
class Process:
    """One `run.py` process: engine AR's reference (`round` None) or a contender in a round."""

    round: int | None
    bench: str
    contender: str  # engine:suffix:auto
    folder: Path  # its out_dir: fresh/reference or fresh/round<r>/<method>

    @property
    def method(self) -> str:
        """The method its rows carry: suffix_auto, pld, ar."""
        return row_method(self.contender)

    @property
    def label(self) -> str:
        where = "reference" if self.round is None else f"round {self.round}"
        return f"{where} {self.bench} {self.contender}"


def schedule(args: argparse.Namespace) -> list[Process]:
    """Every process of the workload in the order it runs: engine AR's reference per benchmark, then round
    by round and benchmark by benchmark the contenders rotated by r · (benchmarks) + the benchmark's index,
    so that over the rounds each contender starts at other places (engine AR among them)."""
    fresh = args.out / FRESH
    out = [Process(None, b, args.contenders[0], fresh / REFERENCE) for b in args.fresh_benches]
    for r in range(args.rounds):
        for j, bench in enumerate(args.fresh_benches):
            for name in rotated(args.contenders, r * len(args.fresh_benches) + j):
                out.append(Process(r, bench, name, round_folder(fresh, r) / row_method(name)))
    return out


def command(args: argparse.Namespace, p: Process) -> list[str]:
    """`python run.py ...` for process `p`: the method at budget=auto (`:auto`) or its fixed budget, the
    benchmark's first `fresh_limit` prompts, Hydra's run folder beside the rows, W&B off."""
    method = p.method
    overrides = [
        f"model={args.model}",
        f"model.dtype={args.dtype}",
        f"bench={p.bench}",
        f"bench.limit={args.fresh_limit}",
        f"max_new_tokens={args.max_new_tokens}",
        f"method={method.removesuffix('_auto')}",
        f"budget={'auto' if method.endswith('_auto') else 'fixed'}",
        f"data_dir={args.data_dir}",
        f"out_dir={p.folder}",
        "wandb=disabled",
        f"hydra.run.dir={p.folder / LOGS / p.bench}",
    ]
    overrides += [f"threads={args.threads}"] if args.threads else []
    overrides += ["allow_mixed_code=true"] if args.allow_mixed_code else []
    overrides += ["budget_gate=true"] if args.gate else []
    return [sys.executable, str(ROOT / "run.py"), *overrides]


def written(p: Process) -> set[str]:
    """The prompt ids process `p`'s method has rows for in its folder."""
    rows = read_rows(p.folder) if p.folder.is_dir() else []
    return {str(r["prompt_id"]) for r in rows if r.get("bench") == p.bench and r.get("method") == p.method}


def done(p: Process, limit: int) -> bool:
    return len(written(p)) >= limit


def clear(p: Process) -> None:
    """Remove what a cut-short process `p` left for its benchmark: its results file (every part), its
    drafter checkpoints, its logs."""
    for model_folder in [f for f in p.folder.iterdir() if f.is_dir() and f.name != LOGS]:
        for path in model_folder.glob(f"{p.bench}.*"):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    shutil.rmtree(p.folder / LOGS / p.bench, ignore_errors=True)


def seed_reference(p: Process, reference: Path) -> None:
    """Copy engine AR's reference rows of `p`'s benchmark into `p`'s results file (one per model folder)."""
    for src in sorted(reference.glob(f"*/{p.bench}.jsonl*")):
        dst = tail_path(p.folder / src.parent.name / f"{p.bench}.jsonl")
        if not dst.exists() or not read_rows(dst):
            copy_results_file(src, dst)


def run(args: argparse.Namespace, p: Process, log=print) -> float | None:
    """Run process `p` unless it is done: cleared first if cut short, seeded with the reference rows (a
    contender's), its output into <folder>/logs/<bench>/stdout.txt. Returns its wall seconds (None: skipped);
    SystemExit with the log's tail when it fails."""
    if done(p, args.fresh_limit):
        log(f"fresh: {p.label}: done, skipped")
        return None
    if p.folder.is_dir() and written(p):
        log(f"fresh: {p.label}: cut short before, cleared and run again whole")
        clear(p)
    if p.round is not None and p.method != "ar":
        seed_reference(p, args.out / FRESH / REFERENCE)
    logs = p.folder / LOGS / p.bench
    logs.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(logs / "stdout.txt", "w") as fh:
        rc = subprocess.run(command(args, p), cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    if rc != 0 or not done(p, args.fresh_limit):
        tail = "\n".join((logs / "stdout.txt").read_text(errors="replace").splitlines()[-15:])
        raise SystemExit(
            f"experiments.heldout: {p.label} failed (exit {rc}); {logs / 'stdout.txt'} ends:\n{tail}"
        )
    log(f"fresh: {p.label}: {seconds:.0f} s")
    return seconds
