"""The bench's command line: its arguments, checked before any model loads (contenders, verifiers,
--method-overrides, --latency-kv), as `python -m experiments.bench --help` lists them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import experiments.bench
from experiments import batching
from experiments.bench.contenders import check_contenders, contender_names
from goose.engine.core.sampling import SamplingParams
from goose.harness.compose import UserError
from goose.records.paper import PAPER_BENCHMARKS
from goose.records.spec_bench import SPEC_BENCH, SPEC_BENCH_QUESTION_CATEGORIES
from goose.validation import check_int_list

ROOT = Path(__file__).resolve().parents[2]


def kv_lens_arg(text: str) -> list[int]:
    """--latency-kv 1024[,2048]: the config's budget_kv_lens, checked as run.py checks it."""
    try:
        lens = [int(k) for k in text.split(",") if k]
        return lens and list(
            check_int_list("--latency-kv", lens, low=1, distinct=False, why="cache lengths, e.g. 1024")
        )
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def categories_arg(text: str) -> list[str]:
    """--categories writing,qa | all: values of Spec-Bench's `category` field, each known, in file order."""
    known = [c for c, _, _ in SPEC_BENCH_QUESTION_CATEGORIES]
    names = known if text.strip() == "all" else [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in names if c not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown Spec-Bench categor{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown) or '(none)'}; "
            f"choose from all, {', '.join(known)}"
        )
    return [c for c in known if c in names]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.bench",
        description=experiments.bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--model", default="smollm2-135m", help="conf/model/<name>.yaml")
    ap.add_argument(
        "--dtype", default=None, choices=("float32", "bfloat16", "float16"), help="override the model's dtype"
    )
    ap.add_argument("--benches", default=",".join(PAPER_BENCHMARKS), help="comma-separated benchmark names")
    ap.add_argument(
        "--data-dir", default=str(ROOT.parent / "shared" / "data"), help="files for mbpp / classeval"
    )
    ap.add_argument("--limit", type=int, default=20, help="prompts per benchmark")
    ap.add_argument(
        "--per-category",
        type=int,
        default=None,
        help="spec_bench: N prompts of each of its 6 categories, spread over each (instead of --limit); "
        "with --categories, of each category named there",
    )
    ap.add_argument(
        "--categories",
        type=categories_arg,
        default=None,
        help="spec_bench: only the questions of these values of question.jsonl's `category` field "
        f"(comma-separated, or all: {','.join(c for c, _, _ in SPEC_BENCH_QUESTION_CATEGORIES)})",
    )
    ap.add_argument(
        "--chat-template",
        default="false",
        choices=("auto", "true", "false"),
        help="bench.chat_template (default false: raw prompts, as in the paper presets)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument(
        "--prepack",
        default="auto",
        choices=("auto", "true", "false"),
        help="the engine's prepack setting (false: the plain F.linear lean forward, the fallback)",
    )
    ap.add_argument(
        "--compile",
        action="store_true",
        help="the engine's compile setting: the verification steps' lean forward through torch.compile",
    )
    ap.add_argument(
        "--device",
        default=None,
        help="model.device: where the model runs (cpu, cuda, cuda:1, mps; default: the model config's)",
    )
    ap.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="cuda_graphs=true: the verification steps replayed from CUDA graphs (CUDA only; captures are "
        "recorded apart from the timed steps: graph_captures, graph_capture_s)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--methods", default="goose,goose:auto", help="engine methods besides AR; suffix :auto = budget=auto"
    )
    ap.add_argument(
        "--latency-kv",
        type=kv_lens_arg,
        default=[],
        help="budget_kv_lens: more cache lengths for :auto's cost curve, t(n, kv) (e.g. 1024; default: KV 256 only)",
    )
    ap.add_argument(
        "--in-run-cost",
        action="store_true",
        help="budget_in_run_cost: :auto's cost curve corrected by each contender's measured steps",
    )
    ap.add_argument(
        "--gate",
        action="store_true",
        help="budget_gate=true: :auto contenders take plain AR steps while drafting does not pay (default off, as run.py)",
    )
    ap.add_argument(
        "--acceptance-prior",
        default="auto",
        help="budget_acceptance_prior: where :auto's acceptance rates start (auto: the model's calibrated prior; hand)",
    )
    ap.add_argument(
        "--no-price-bookkeeping",
        action="store_true",
        help="budget_price_bookkeeping=false: :auto's size rule prices the verification forward only",
    )
    ap.add_argument(
        "--hf",
        default=None,
        help="transformers contenders: greedy, pld (default both; none with --concurrency)",
    )
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument(
        "--latency", default=None, help="latency table JSON for :auto (budget_profile; default: calibrate)"
    )
    ap.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0 = greedy)")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="the sampling group's seed")
    ap.add_argument(
        "--method-overrides",
        default=None,
        help="JSON file {method: [Hydra overrides] or {overrides: [...]}} applied to that method's "
        "contenders (e.g. the delayed tree's shape chosen by experiments.delayed_grid: its chosen.json)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="where the rows go (<out>/repeat<k>/<model>/<bench>.jsonl); default "
        "results/runs/bench/<model>[_<dtype>]",
    )
    ap.add_argument(
        "--concurrency",
        default="1",
        help="requests in flight: 1 (this protocol, one request at a time) or a comma-separated list such as "
        "1,2,4,8 (continuous batching, experiments.batching's protocol: engine AR and each engine contender "
        "serve the prompts through the batched engine at each concurrency, AR at the same concurrency the "
        "reference; rows in <out>/<model>-<dtype>.jsonl)",
    )
    ap.add_argument("--fresh", action="store_true", help="delete <out> first instead of resuming it")
    ap.add_argument(
        "--allow-mixed-code",
        action="store_true",
        help="resume <out> although rows of other code (another commit, other local changes) are in it; "
        "every row written records it and the tables list the code states",
    )
    ap.add_argument(
        "--show-partial",
        action="store_true",
        help="print the summary of the rows in <out> so far and exit: runs nothing, loads no model",
    )
    args = ap.parse_args(argv)
    if (
        args.repeats < 1
        or args.limit < 1
        or args.max_new_tokens < 1
        or (args.per_category is not None and args.per_category < 1)
    ):
        ap.error("--repeats, --limit, --per-category and --max-new-tokens must be >= 1")
    if args.categories is not None and SPEC_BENCH not in args.benches.split(","):
        ap.error(f"--categories selects questions of {SPEC_BENCH}: add it to --benches")
    try:
        levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
        args.concurrency_list = list(check_int_list("--concurrency", levels, low=1, why="e.g. 1,2,4"))
    except ValueError as exc:
        ap.error(str(exc) if "--concurrency" in str(exc) else f"--concurrency {args.concurrency!r}: {exc}")
    batch_1 = args.concurrency_list == [1]
    if args.hf is None:
        args.hf = "greedy,pld" if batch_1 else ""
    if not batch_1:
        unsupported = [
            flag
            for flag, used in (
                ("--hf", bool(args.hf)),
                ("--temperature", args.temperature != 0.0),
                ("--per-category", args.per_category is not None),
                ("--categories", args.categories is not None),
                ("--method-overrides", args.method_overrides is not None),
                ("--latency", args.latency is not None),
            )
            if used
        ]
        if unsupported:
            ap.error(
                f"--concurrency {args.concurrency}: the batched protocol (experiments.batching) does not take "
                f"{', '.join(unsupported)}; leave {'it' if len(unsupported) == 1 else 'them'} out"
            )
    try:
        args.sampling = SamplingParams(args.temperature, args.top_p, args.top_k)
    except ValueError as exc:
        ap.error(str(exc).replace("sampling.", "--").replace("_", "-"))
    try:
        args.contenders = contender_names(args.methods, args.hf, args.sampling.greedy)
        args.overrides = read_method_overrides(args.method_overrides)
        checked = args.contenders
        if not batch_1:  # suffixes there name the budget policy (@batch) and the batch state (+shared)
            bad = [
                n
                for n in args.contenders
                if n.removesuffix(batching.SHARED).partition("@")[2] not in ("", "batch")
            ]
            if bad:
                raise ValueError(
                    f"--concurrency {args.concurrency}: {', '.join(bad)}: the batched protocol takes no "
                    "verifier; '@batch' names its batch-level budget policy, '+shared' its shared drafter state"
                )
            checked = [batching.base_contender(n) for n in args.contenders]
        check_contenders(checked, args.sampling, args.overrides, model=args.model)
    except (ValueError, UserError) as exc:
        ap.error(str(exc))
    args.out = Path(
        args.out or ROOT / "results" / "runs" / "bench" / "_".join(filter(None, [args.model, args.dtype]))
    )
    return args


def read_method_overrides(path: str | None) -> dict[str, list[str]]:
    """{method: Hydra overrides} from `path` (see --method-overrides); `check_contenders` composes them."""
    if path is None:
        return {}
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--method-overrides {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"--method-overrides {path}: a JSON object {{method: [overrides]}}")
    table = {m: v["overrides"] if isinstance(v, dict) else v for m, v in raw.items()}
    for method, overrides in table.items():
        if not (isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)):
            raise ValueError(
                f"--method-overrides {path}: {method}: a list of Hydra overrides, got {overrides!r}"
            )
    return table
