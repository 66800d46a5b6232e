"""`make gpu-check`: the engine proven on CUDA, and the paper's setting measured at 7B scale, in one
command; one JSON record, a figure and a table under results/gpu/<the GPU's name>/, and a printed summary.

Stages (`--stages`, default all, in this order; each merges its section into <out>/gpu_check.json,
so that a run can be split over several invocations, e.g. where one command's time is limited;
the timing stage merges shape by shape, so `--shapes` can split it too):

  tests       pytest tests/engine/test_devices.py and test_device_map.py on the device: tiny random
              Llama, Qwen3 and Gemma-3 models in fp32, fp16 and bf16 (tree logits equal sequential
              decoding within each dtype's tolerance, KV compaction exact) and a model split over
              two devices by a device_map (GPU + CPU) decoding as on one device.
  lossless    SmolLM2-135M on the device (experiments.lossless_stress): every method against AR on
              the first --limit prompts of the three packaged benchmarks; fp32 must be identical
              token for token, fp16 and bf16 divergences are classified by their top-2 margin; on
              CUDA once more in fp32 with every step replayed from CUDA graphs (`float32+graphs`:
              every method identical to AR, and AR identical to the eager fp32 AR).
  timing      per shape (conf/shape: Vicuna-7B, Llama-3-8B, Qwen3-8B with random weights, fp16):
              the verification cost curve t(n)/t(1) for n = 1..256 at KV lengths 512 and 2048
              (goose.engine.budget.calibration.calibrate), prefill times, and the engine's AR tokens/s
              against `transformers` `generate` on the same model, interleaved repeats; what
              CUDA graphs would save per step at n = 1, 16, 64 (experiments/gpu/graph_probe.py); the
              engine with its steps replayed from CUDA graphs (`cuda_graphs`,
              goose.engine.forward.static_step): its cost curves and its AR in the same race, kept
              (`keep`) where its AR is > 5% faster than the eager engine's; with --compile also
              the engine with its lean forward through torch.compile.
  sidebyside  SmolLM2-135M's real weights on the device, every contender side by side in wall clock
              (experiments.bench with --device and, on CUDA, --cuda-graphs; 5 prompts each of HumanEval,
              GSM8K and MT-Bench, 128 tokens, 2 interleaved repeats, fp32 and bf16: --side-dtypes picks),
              tokens/s over engine AR, identity to AR, τ and drafting ms per step
              (experiments/gpu/side_by_side.py).
  projection  the per-step tree sizes of the shipped SmolLM2 rows replayed against each shape's cost
              curve plus each method's drafting time (from this run's SmolLM2 rows where the lossless
              stage ran, else from the shipped rows): a projected speed-up per method and benchmark,
              labelled as a projection from SmolLM2's acceptance (experiments/gpu/projection.py).
  figures     <out>/cost_curve.png (t(n)/t(1) per shape and KV length) and <out>/projection.md.

Random weights are fine for timing (latency depends on shapes, not values) and meaningless for
acceptance: every timing section says `random_weights: true`, and no τ comes from them.

Without CUDA the same stages run at toy sizes on the CPU (conf/shape/toy-*, KV 64 and 128, trees up
to 32 nodes, one prompt, 16 tokens) into outputs/gpu-check-cpu/ (not kept), and the summary says that no GPU
was found: this keeps the script working in CI; none of its figures describes a GPU.

    python -m experiments.gpu.check                               # everything (CUDA if present)
    python -m experiments.gpu.check --stages timing,projection,figures --shapes vicuna-7b
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

from experiments.gpu.device_runs import stage_tests, stage_usedby
from experiments.gpu.figures import stage_figures
from experiments.gpu.lossless import lossless_header, lossless_summary, stage_lossless
from experiments.gpu.profile import CPU, GPU, RECORD, ROOT, STAGES, folder_name
from experiments.gpu.projection import stage_projection
from experiments.gpu.record import load_record, save_record
from experiments.gpu.side_by_side import stage_from_rows, stage_side_by_side
from experiments.gpu.summary import failures, summary_lines
from experiments.gpu.timing import stage_timing
from goose.harness.models.devices import DTYPES
from goose.harness.models.random_weights import load_shape
from goose.harness.runner import environment


def gpu_slug(device: str) -> str:
    """`folder_name` of the CUDA device's name; `cuda` where none is visible (a record summarised at home)."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return "cuda"
    return folder_name(torch.cuda.get_device_name(torch.device(device)))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.gpu.check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--stages", default=",".join(STAGES), help=f"any of {', '.join(STAGES)}")
    ap.add_argument("--device", default=None, help="default: cuda if torch sees one, else cpu (toy sizes)")
    ap.add_argument("--shapes", default=None, help="conf/shape names (default: the profile's)")
    ap.add_argument(
        "--out", default=None, help="default: results/gpu/<the GPU's name> (CUDA) or outputs/gpu-check-cpu"
    )
    ap.add_argument("--data-dir", default="../shared/data", help="benchmark files (see run.py's data_dir)")
    ap.add_argument("--results", default="results/reference", help="the SmolLM2 rows to project")
    ap.add_argument("--compile", default=None, choices=("true", "false"), help="time torch.compile too")
    ap.add_argument("--limit", type=int, default=None, help="lossless: prompts per benchmark")
    ap.add_argument("--methods", default=None, help="lossless: comma-separated methods (default: all)")
    ap.add_argument(
        "--jobs", type=int, default=None, help="lossless: processes side by side (default: the profile's)"
    )
    ap.add_argument(
        "--work", default=None, help="scratch (JUnit XML, SmolLM2 rows); default outputs/gpu_check/<device>"
    )
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--sidebyside-rows",
        default=None,
        help="sidebyside: summarise the rows already under DIR/<dtype>/ (copied back from a GPU host) instead "
        "of running",
    )
    ap.add_argument(
        "--side-dtypes", default=None, help="sidebyside: comma-separated dtypes (default: the profile's)"
    )
    ap.add_argument(
        "--lossless-rows",
        default=None,
        help="lossless: summarise the rows already under DIR/<run label>/ (e.g. copied back from a GPU "
        "host) instead of running",
    )
    ap.add_argument(
        "--drafting-rows",
        default=None,
        help="projection: SmolLM2 rows written by one process on the GPU host, for the drafting times",
    )
    ap.add_argument(
        "--tokenizer", default=None, help="used-by: the random model's tokenizer folder (default: SmolLM2's)"
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # a host's time limit (SIGTERM) unwinds like an exception: the lossless stage stops its processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stages = [s for s in args.stages.split(",") if s]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        print(
            f"error: unknown stage(s) {', '.join(unknown)}; valid stages are: {', '.join(STAGES)}",
            file=sys.stderr,
        )
        return 2
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # projection and figures read the record only: they may run anywhere on a GPU run's record
    copied = {"lossless"} if args.lossless_rows else set()
    copied |= {"sidebyside"} if args.sidebyside_rows else set()
    record_only = set(stages) <= {"projection", "figures"} | copied
    if torch.device(device).type == "cuda" and not torch.cuda.is_available() and not record_only:
        print(f"error: --device {device}, but torch sees no CUDA device here", file=sys.stderr)
        return 2
    profile = GPU if torch.device(device).type == "cuda" else CPU
    changes: dict[str, Any] = {"device": device}
    if args.shapes:
        changes["shapes"] = tuple(s for s in args.shapes.split(",") if s)
        for s in changes["shapes"]:
            load_shape(s)  # an unknown name fails here, listing the valid ones
    if args.out:
        changes["out"] = args.out
    if args.compile:
        changes["compile"] = args.compile == "true"
    if args.limit:
        changes["lossless_limit"] = args.limit
    if args.methods:
        changes["lossless_methods"] = args.methods
    if args.side_dtypes:
        changes["side_dtypes"] = tuple(d for d in args.side_dtypes.split(",") if d)
        bad = [d for d in changes["side_dtypes"] if d not in DTYPES]
        if bad:
            print(f"error: --side-dtypes {', '.join(bad)}: choose from {', '.join(DTYPES)}", file=sys.stderr)
            return 2
    if args.jobs is not None:
        if args.jobs < 1:
            print(f"error: --jobs {args.jobs}: must be at least 1", file=sys.stderr)
            return 2
        changes["lossless_jobs"] = args.jobs
    profile = dataclasses.replace(profile, **changes)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(profile.out.format(gpu=gpu_slug(profile.device)))
    work = Path(args.work) if args.work else ROOT / "outputs" / "gpu_check" / profile.device.replace(":", "")
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    path = out / RECORD
    record = load_record(path, profile.device)
    if not (record_only and "environment" in record):
        record["environment"] = environment()
        record["profile"] = dataclasses.asdict(profile)
    if profile.device == "cpu":
        record["note"] = "no GPU found: toy sizes on the CPU; no figure here describes a GPU"
    print(f"gpu-check: device {profile.device}, stages {', '.join(stages)} -> {path}", flush=True)
    for stage in STAGES:
        if stage not in stages:
            continue
        t0 = time.perf_counter()
        print(f"== {stage}", flush=True)
        if stage == "tests":
            result = stage_tests(profile, work)
        elif stage == "usedby":
            result = stage_usedby(profile, work, out, args.data_dir, args.tokenizer)
        elif stage == "lossless" and args.lossless_rows:
            runs = sorted(p for p in Path(args.lossless_rows).iterdir() if p.is_dir())
            result = (
                lossless_header(profile)
                | record["stages"].get("lossless", {})
                | {p.name: lossless_summary(p) for p in runs}
            )
        elif stage == "lossless":
            result = stage_lossless(profile, work, args.data_dir, record, path)
        elif stage == "sidebyside" and args.sidebyside_rows:
            result = stage_from_rows(profile, Path(args.sidebyside_rows), record)
        elif stage == "sidebyside":
            result = stage_side_by_side(profile, work, args.data_dir, record, path)
        elif stage == "timing":
            result = stage_timing(profile, record, path)
        elif stage == "projection":
            result = stage_projection(record, args.results, args.drafting_rows)
        else:
            result = stage_figures(record, out)
        record["stages"][stage] = result
        record.setdefault("stage_seconds", {})[stage] = time.perf_counter() - t0
        save_record(record, path)
    print()
    print("\n".join(summary_lines(record)))
    print(f"record: {path}")
    return 1 if failures(record) else 0


if __name__ == "__main__":
    sys.exit(main())
