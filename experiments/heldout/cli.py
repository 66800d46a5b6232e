"""The held-out protocol's command line, checked before anything runs: the contenders (each method composed
with the model, as run.py composes it), the workloads, the Spec-Bench categories, the benchmarks of the
fresh processes, the counts, and that the Spec-Bench run's own arguments pass `experiments.bench`'s checks."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import experiments.heldout
from experiments.bench import cli as bench_cli
from experiments.bench.contenders import contender_names, row_method
from experiments.bench.load import method_factory
from goose.harness.compose import UserError

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("spec_bench", "fresh")
DEFAULT_METHODS = "pld,suffix:auto,tr:auto,goose:auto,hw_tree:auto"
DEFAULT_FRESH_BENCHES = "humaneval,gsm8k,mtbench"
SPEC_BENCH_FILE = Path("spec_bench") / "question.jsonl"  # conf/bench/spec_bench.yaml's data_dir_path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.heldout",
        description=experiments.heldout.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--model", default="smollm2-135m", help="conf/model/<name>.yaml")
    ap.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"), help="the benchmark files")
    ap.add_argument(
        "--methods",
        default=DEFAULT_METHODS,
        help="contenders besides engine AR, as experiments.bench --methods names them (:auto = budget=auto)",
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="spec_bench, fresh (comma-separated)")
    ap.add_argument(
        "--categories",
        default="all",
        help="spec_bench: values of question.jsonl's `category` field (comma-separated), or all",
    )
    ap.add_argument("--per-category", type=int, default=3, help="spec_bench: prompts of each category")
    ap.add_argument("--repeats", type=int, default=3, help="spec_bench: interleaved repeats")
    ap.add_argument(
        "--fresh-benches", default=DEFAULT_FRESH_BENCHES, help="fresh: benchmarks, one process each"
    )
    ap.add_argument("--fresh-limit", type=int, default=6, help="fresh: prompts per process (bench.limit)")
    ap.add_argument("--rounds", type=int, default=3, help="fresh: rounds of one process per contender")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument(
        "--gate",
        action="store_true",
        help="budget_gate=true: the :auto contenders take plain AR steps while drafting does not pay (both "
        "workloads; default off, as run.py runs budget=auto)",
    )
    ap.add_argument("--out", default=None, help="default results/heldout/<model>-<dtype>")
    ap.add_argument(
        "--allow-mixed-code",
        action="store_true",
        help="resume <out> although rows of other code are in it (every row written records it)",
    )
    ap.add_argument(
        "--dry-run", action="store_true", help="print the commands (and which are done); run nothing"
    )
    args = ap.parse_args(argv)
    counts = ("per_category", "repeats", "fresh_limit", "rounds", "max_new_tokens")
    if any(getattr(args, k) < 1 for k in counts) or (args.threads is not None and args.threads < 1):
        ap.error(
            "--per-category, --repeats, --fresh-limit, --rounds, --max-new-tokens and --threads must be >= 1"
        )
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown or not args.workloads:
        ap.error(f"unknown workload {', '.join(unknown) or '(none)'}; choose from {', '.join(WORKLOADS)}")
    if not (ROOT / "conf" / "model" / f"{args.model}.yaml").is_file():
        ap.error(f"--model {args.model}: no conf/model/{args.model}.yaml")
    args.fresh_benches = [b for b in args.fresh_benches.split(",") if b]
    missing = [b for b in args.fresh_benches if not (ROOT / "conf" / "bench" / f"{b}.yaml").is_file()]
    if missing or ("fresh" in args.workloads and not args.fresh_benches):
        ap.error(f"--fresh-benches: no conf/bench/<name>.yaml for {', '.join(missing) or '(none given)'}")
    try:
        args.categories = bench_cli.categories_arg(args.categories)
        args.contenders = check_contenders(args.methods, args.model)
    except (argparse.ArgumentTypeError, ValueError, UserError) as exc:
        ap.error(str(exc))
    args.data_dir = str(Path(args.data_dir).resolve())
    if "spec_bench" in args.workloads and not (Path(args.data_dir) / SPEC_BENCH_FILE).is_file():
        ap.error(f"--data-dir {args.data_dir}: no {SPEC_BENCH_FILE} (Spec-Bench's questions) in it")
    args.out = Path(args.out or ROOT / "results" / "heldout" / f"{args.model}-{args.dtype}").resolve()
    return args


def check_contenders(methods: str, model: str) -> list[str]:
    """The contenders of --methods (engine AR first), each engine method composed with `model` as run.py
    composes it (an unknown method or a bad config fails here); ValueError for a transformers contender or a
    verifier, which neither workload takes (the fresh processes are `run.py`'s, greedy)."""
    names = contender_names(methods, "", greedy=True)
    odd = [n for n in names if "@" in n or not n.startswith("engine:")]
    if odd:
        raise ValueError(
            f"--methods: {', '.join(odd)}: the held-out protocol runs greedy engine contenders only"
        )
    bases = [row_method(n).removesuffix("_auto") for n in names[1:]]
    unknown = [m for m in bases if not (ROOT / "conf" / "method" / f"{m}.yaml").is_file()]
    if unknown:
        known = ", ".join(sorted(p.stem for p in (ROOT / "conf" / "method").glob("*.yaml")))
        raise ValueError(f"--methods: no conf/method/<name>.yaml for {', '.join(unknown)}; methods: {known}")
    for base in bases:
        method_factory(base, model=model)
    return names


def bench_argv_checked(argv: list[str]) -> None:
    """`experiments.bench`'s own checks of the Spec-Bench run's arguments (nothing loads); ValueError with
    its message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            bench_cli.parse_args(argv)
    except SystemExit:
        raise ValueError(f"experiments.bench refuses {' '.join(argv)}: {err.getvalue().strip()}") from None
