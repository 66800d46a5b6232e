"""The Spec-Bench workload of the held-out protocol: one `make bench` run (experiments.bench) on N questions
of each Spec-Bench category (question.jsonl's `category` field) in the chat template, every contender side by
side in one process, interleaved repeats with the contenders' places rotated; rows in <out>/spec_bench/."""

from __future__ import annotations

import argparse
import sys

from goose.records.heldout import SPEC
from goose.records.spec_bench import SPEC_BENCH


def bench_argv(args: argparse.Namespace) -> list[str]:
    """`experiments.bench`'s arguments for the held-out run `args` (experiments.heldout.cli)."""
    methods = ",".join(c.removeprefix("engine:") for c in args.contenders[1:])
    argv = ["--model", args.model, "--dtype", args.dtype, "--benches", SPEC_BENCH]
    argv += ["--categories", ",".join(args.categories), "--per-category", str(args.per_category)]
    argv += ["--chat-template", "auto", "--max-new-tokens", str(args.max_new_tokens)]
    argv += ["--repeats", str(args.repeats), "--methods", methods, "--hf", "", "--data-dir", args.data_dir]
    argv += ["--threads", str(args.threads)] if args.threads else []
    argv += ["--allow-mixed-code"] if args.allow_mixed_code else []
    argv += ["--gate"] if args.gate else []
    return [*argv, "--out", str(args.out / SPEC)]


def command(args: argparse.Namespace) -> list[str]:
    """The Spec-Bench run as a process: `python -m experiments.bench ...`."""
    return [sys.executable, "-m", "experiments.bench", *bench_argv(args)]
