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
              (goose.engine.budget.cost_model.calibrate), prefill times, and the engine's AR tokens/s
              against `transformers` `generate` on the same model, interleaved repeats; what
              CUDA graphs would save per step at n = 1, 16, 64 (experiments.graph_probe); the
              engine with its steps replayed from CUDA graphs (`cuda_graphs`,
              goose.engine.forward.static_step): its cost curves and its AR in the same race, kept
              (`keep`) where its AR is > 5% faster than the eager engine's; with --compile also
              the engine with its lean forward through torch.compile.
  projection  analysis.projection: the per-step tree sizes of the shipped SmolLM2 rows replayed
              against each shape's cost curve plus each method's drafting time (from this run's
              SmolLM2 rows where the lossless stage ran, else from the shipped rows): a projected
              speed-up per method and benchmark, labelled as a projection from SmolLM2's acceptance.
  figures     <out>/cost_curve.png (t(n)/t(1) per shape and KV length) and <out>/projection.md.

Random weights are fine for timing (latency depends on shapes, not values) and meaningless for
acceptance: every timing section says `random_weights: true`, and no τ comes from them.

Without CUDA the same stages run at toy sizes on the CPU (conf/shape/toy-*, KV 64 and 128, trees up
to 32 nodes, one prompt, 16 tokens) into outputs/gpu-check-cpu/ (not kept), and the summary says that no GPU
was found: this keeps the script working in CI; none of its figures describes a GPU.

    python -m experiments.gpu_check                               # everything (CUDA if present)
    python -m experiments.gpu_check --stages timing,projection,figures --shapes vicuna-7b
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from analysis.projection import (  # noqa: E402
    CostCurve,
    PrefillCurve,
    host_seconds_per_step,
    markdown,
    project,
    read_rows,
    select_rows,
)
from experiments import graph_probe  # noqa: E402
from experiments.graph_probe import spread  # noqa: E402
from goose.engine.budget.cost_model import LatencyTable, calibrate  # noqa: E402
from goose.engine.core.decode import generate  # noqa: E402
from goose.engine.core.drafter import ARDrafter  # noqa: E402
from goose.engine.core.verifier import VerificationEngine, sync_clock  # noqa: E402
from goose.engine.forward.static_step import StaticStep  # noqa: E402
from goose.harness.models import parse_dtype  # noqa: E402
from goose.harness.random_models import load_shape, random_model  # noqa: E402
from goose.harness.run_state import write_text_atomically  # noqa: E402
from goose.harness.runner import environment  # noqa: E402
from goose.records.results import read_rows as read_result_rows  # noqa: E402
from goose.records.seal import copy_results_file, results_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("tests", "usedby", "timing", "lossless", "projection", "figures")
GRAPHED_FP32 = "float32+graphs"  # the lossless run with cuda_graphs=true (CUDA only)
RECORD = "gpu_check.json"
# The targets at 7B shape in fp16 (checked on a GPU run only).
TARGET_T64 = 1.3  # t(64)/t(1) at most
TARGET_FLOOR = 1.6  # t(1) over its bandwidth floor, at most (tuned engines reach 1.3-1.6 at batch 1)
TARGET_AR_OVER_GENERATE = 2.0  # engine AR tokens/s over eager transformers generate, at least
SAMPLED = "float32@T"  # the lossless run at a temperature: deterministic drafters equal AR's sample


@dataclasses.dataclass(frozen=True)
class Profile:
    """The sizes of one run: `GPU` (the issue's protocol) or `CPU` (toy sizes, same code paths)."""

    device: str
    out: str
    shapes: tuple[str, ...]
    dtype: str  # of the timing models
    kv_lens: tuple[int, ...]
    sizes: tuple[int, ...]
    repeats: int  # cost curve: timed steps per size and KV length (median)
    prefill_lengths: tuple[int, ...]
    prompt_len: int  # AR vs generate: random prompt length
    new_tokens: int
    ar_repeats: int  # interleaved rounds (median [min, max] over them)
    compile: bool
    lossless_dtypes: tuple[str, ...]
    lossless_methods: str | None  # comma-separated; None = every method
    lossless_benches: tuple[str, ...]
    lossless_limit: int
    lossless_tokens: int
    lossless_graphs: bool  # one more fp32 run with every step replayed from CUDA graphs (cuda_graphs)
    lossless_temperature: float | None  # one more fp32 run sampled at this temperature (same seed as AR)
    half_methods: str | None  # the methods of the fp16/bf16 lossless runs (None: lossless_methods)
    lossless_jobs: int  # lossless_stress processes run side by side (the runs' methods dealt over them)
    usedby_model: str  # `python run.py model=<this> model.init=random ...`: the used-by command
    usedby_overrides: tuple[str, ...]
    usedby_methods: str
    usedby_limit: int
    usedby_tokens: int


GPU = Profile(
    device="cuda",
    out="results/gpu/{gpu}",  # {gpu}: the device's name, e.g. nvidia-h100-80gb-hbm3
    shapes=("vicuna-7b", "llama3-8b"),
    dtype="float16",
    kv_lens=(512, 2048),
    sizes=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256),
    repeats=5,
    prefill_lengths=(128, 512, 2048),
    prompt_len=128,
    new_tokens=128,
    ar_repeats=3,
    compile=False,
    lossless_dtypes=("float32", "bfloat16"),
    lossless_methods=None,
    lossless_benches=("humaneval", "mtbench", "gsm8k"),
    lossless_limit=3,
    lossless_tokens=128,
    lossless_graphs=False,
    lossless_temperature=0.7,
    half_methods=None,
    lossless_jobs=9,
    usedby_model="vicuna-7b",
    usedby_overrides=(),
    usedby_methods="ar,pld,goose",
    usedby_limit=2,
    usedby_tokens=128,
)
CPU = Profile(
    device="cpu",
    out="outputs/gpu-check-cpu",
    shapes=("toy-llama", "toy-qwen3"),
    dtype="float32",
    kv_lens=(64, 128),
    sizes=(1, 2, 4, 8, 16, 32),
    repeats=2,
    prefill_lengths=(32, 128),
    prompt_len=32,
    new_tokens=16,
    ar_repeats=2,
    compile=False,
    lossless_dtypes=("float32", "bfloat16"),
    lossless_methods="pld,goose",
    lossless_benches=("humaneval",),
    lossless_limit=1,
    lossless_tokens=16,
    lossless_graphs=False,
    lossless_temperature=0.7,
    half_methods=None,
    lossless_jobs=3,
    usedby_model="vicuna-7b",
    usedby_overrides=("model.shape=toy-llama", "model.device=cpu", "model.dtype=float32"),
    usedby_methods="ar,pld,goose",
    usedby_limit=1,
    usedby_tokens=16,
)


def _relative(path: Path) -> str:
    """`path` relative to the repository where it lies inside it (records travel between machines)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path.resolve())


def folder_name(gpu: str) -> str:
    """A GPU's name as a folder name (`NVIDIA H100 80GB HBM3` -> `nvidia-h100-80gb-hbm3`), so that records
    of different GPUs sit side by side under results/gpu/."""
    return "-".join("".join(c if c.isalnum() else " " for c in gpu.lower()).split()) or "cuda"


def gpu_slug(device: str) -> str:
    """`folder_name` of the CUDA device's name; `cuda` where none is visible (a record summarised at home)."""
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return "cuda"
    return folder_name(torch.cuda.get_device_name(torch.device(device)))


def release(device: str) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------ tests
def stage_tests(profile: Profile, work: Path) -> dict[str, Any]:
    """The device tests through pytest in a subprocess; counts and failed test ids from its JUnit XML."""
    junit = work / "device_tests.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/engine/test_devices.py",
        "tests/engine/test_device_map.py",
        "--device",
        profile.device,
        f"--junitxml={junit}",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed: list[str] = []
    if junit.is_file():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, 0))
            for case in suite.iter("testcase"):
                bad = next((x for x in (case.find("failure"), case.find("error")) if x is not None), None)
                if bad is not None:
                    message = (bad.get("message") or "").splitlines()[:1]
                    failed.append(f"{case.get('name')}: {message[0] if message else ''}"[:300])
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {
        "device": profile.device,
        "command": " ".join(["python", *cmd[1:-1]]),
        "returncode": proc.returncode,
        "passed": passed,
        "failed": counts["failures"] + counts["errors"],
        "skipped": counts["skipped"],
        "failed_tests": failed,
        "output_tail": proc.stdout[-2000:] + proc.stderr[-1000:],
        "seconds": time.perf_counter() - t0,
    }


# ------------------------------------------------------------------------------------ used-by
def stand_in_tokenizer(work: Path) -> Path:
    """SmolLM2's tokenizer saved as a folder: the tokenizer of the random-weight model (the paper
    models' tokenizers are on the Hub, which an offline host cannot reach)."""
    from experiments.gpu_carry import GGUF, write_tokenizer
    from goose.harness.models import locate_gguf

    folder = work / "tokenizer"
    if not (folder / "tokenizer.json").is_file():
        write_tokenizer(locate_gguf(*GGUF), folder)
    return folder


def stage_usedby(profile: Profile, work: Path, out: Path, data_dir: str, tokenizer: str | None) -> dict:
    """`python run.py -m model=<usedby_model> model.init=random bench=mtbench method=...` in a
    subprocess: Hydra, loading, the engine, rows and summary on the device, with random weights of
    the paper model's shape and a stand-in tokenizer (the rows say so). Its rows are copied to
    <out>/usedby_mtbench.jsonl."""
    from goose.records.metrics import cell_summary

    tok = tokenizer or str(stand_in_tokenizer(work))
    run_dir = work / "usedby"
    shutil.rmtree(run_dir, ignore_errors=True)
    args = [
        f"model={profile.usedby_model}",
        "model.init=random",
        f"model.tokenizer={tok}",
        *profile.usedby_overrides,
        "bench=mtbench",
        f"method={profile.usedby_methods}",
        f"bench.limit={profile.usedby_limit}",
        f"max_new_tokens={profile.usedby_tokens}",
        "quick=false",
        f"data_dir={data_dir}",
        f"out_dir={run_dir}",
        "wandb=disabled",
        f"hydra.sweep.dir={work / 'usedby_hydra'}",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "run.py", "-m", *args], cwd=ROOT, capture_output=True, text=True)
    result: dict[str, Any] = {
        "command": "python run.py -m " + " ".join(args),
        "returncode": proc.returncode,
        "seconds": time.perf_counter() - t0,
        "output_tail": (proc.stdout[-3000:] + proc.stderr[-2000:]),
    }
    files = results_files(run_dir, "*/mtbench.jsonl", recursive=False)
    if not files:
        return result
    copy_results_file(files[0], out / "usedby_mtbench.jsonl")
    rows = [r for r in read_result_rows(files[0].parent.parent) if r.get("bench") == "mtbench"]
    ar = [r for r in rows if r["method"] == "ar"]
    methods = sorted({r["method"] for r in rows})
    first = rows[0] if rows else {}
    result.update(
        rows=_relative(out / "usedby_mtbench.jsonl"),
        model=first.get("model"),
        random_weights=first.get("random_weights"),
        weights=first.get("weights"),
        gpu=(first.get("hardware") or {}).get("gpu"),
        summary={m: cell_summary([r for r in rows if r["method"] == m], ar) for m in methods},
    )
    return result


# ------------------------------------------------------------------------------------ lossless
def lossless_shards(methods: list[str], shards: int) -> list[list[str]]:
    """`methods` dealt round-robin into at most `shards` non-empty lists (slow methods spread out)."""
    shards = max(1, min(shards, len(methods)))
    return [methods[k::shards] for k in range(shards)]


def lossless_header(profile: Profile) -> dict[str, Any]:
    """What the lossless stage ran: model, benchmarks, prompts, tokens and processes side by side."""
    return {
        "model": "smollm2-135m",
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
        "rows": _relative(run_dir),
    }


def ar_outputs(run_dir: Path) -> dict[tuple[str, str], list[int]]:
    """AR's output ids per (bench, prompt) in one lossless run's rows."""
    return {
        (r["bench"], r["prompt_id"]): r["output_ids"]
        for r in read_result_rows(run_dir)
        if r.get("method") == "ar" and r.get("status", "ok") == "ok"
    }


# ------------------------------------------------------------------------------------ timing
def random_prompt(vocab: int, length: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def time_prefill(engine: VerificationEngine, vocab: int, lengths: tuple[int, ...], repeats: int = 3) -> dict:
    """Median seconds of a prefill (last row only, as for drafters that do not harvest it)."""
    seconds = []
    for length in lengths:
        prompt = random_prompt(vocab, length, seed=length)
        samples = []
        for r in range(repeats + 1):
            t0 = sync_clock(engine.device)
            engine.prefill(prompt, max_new_tokens=16, all_logits=False)
            t1 = sync_clock(engine.device)
            if r:
                samples.append(t1 - t0)
        seconds.append(statistics.median(samples))
    return {"lengths": list(lengths), "seconds": seconds}


def hf_generate(model: Any, device: str) -> Callable[[list[int], int], list[int]]:
    """transformers greedy `generate` with its default (dynamic) cache, exactly `new` tokens."""
    model.generation_config.eos_token_id = None

    def run(prompt: list[int], new: int) -> list[int]:
        x = torch.tensor([prompt], device=device)
        out = model.generate(
            x, attention_mask=torch.ones_like(x), max_new_tokens=new, do_sample=False, pad_token_id=0
        )
        return out[0, len(prompt) :].tolist()

    return run


def ar_against_generate(
    model: Any, engines: dict[str, VerificationEngine], profile: Profile, vocab: int
) -> dict[str, Any]:
    """Tokens/s of each engine's AR and of `generate` on one random prompt, `ar_repeats` interleaved
    rounds after a warm-up round (the order rotates from round to round); prefill included."""
    prompt = random_prompt(vocab, profile.prompt_len, seed=1)
    contenders: dict[str, Callable[[], list[int]]] = {
        name: (lambda e=engine: generate(e, ARDrafter(), prompt, profile.new_tokens).output_ids)
        for name, engine in engines.items()
    }
    gen = hf_generate(model, profile.device)
    contenders["hf:generate"] = lambda: gen(prompt, profile.new_tokens)
    names = list(contenders)
    tps: dict[str, list[float]] = {n: [] for n in names}
    outputs: dict[str, list[int]] = {}
    for r in range(profile.ar_repeats + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = sync_clock(profile.device)
            outputs[name] = contenders[name]()
            t1 = sync_clock(profile.device)
            if r:
                tps[name].append(len(outputs[name]) / (t1 - t0))
    result: dict[str, Any] = {
        "prompt_tokens": profile.prompt_len,
        "new_tokens": profile.new_tokens,
        "rounds": profile.ar_repeats,
        "tokens_per_s": {n: spread(v) for n, v in tps.items()},
        "identical_to_generate": {n: outputs[n] == outputs["hf:generate"] for n in engines},
    }
    for n in engines:
        result[f"{n}_over_generate"] = spread(
            [a / b for a, b in zip(tps[n], tps["hf:generate"], strict=True)]
        )
    return result


def copy_bandwidth(device: str) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting the bytes read and written (median of
    10 copies of 1 GiB on a GPU, 64 MiB elsewhere)."""
    size = (1 << 30) if torch.device(device).type == "cuda" else (64 << 20)
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    samples = []
    for _ in range(10):
        t0 = sync_clock(device)
        dst.copy_(src)
        samples.append(sync_clock(device) - t0)
    del src, dst
    return 2 * size / statistics.median(samples)


def bandwidth_floor(model: Any, config: dict[str, Any], kv_lens: tuple[int, ...], bandwidth: float) -> dict:
    """The least time a one-token step can take: every weight it reads (all but the input
    embedding, which is only indexed, unless tied to the output head) plus the KV cache at each
    length, over the measured copy bandwidth."""
    embed = model.get_input_embeddings().weight
    tied = model.get_output_embeddings().weight.data_ptr() == embed.data_ptr()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    read = weights - (0 if tied else embed.numel() * embed.element_size())
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    per_token = 2 * int(config["num_hidden_layers"]) * int(config.get("num_key_value_heads") or heads)
    per_token *= head_dim * embed.element_size()
    return {
        "bandwidth_bytes_per_s": bandwidth,
        "weight_bytes_read": read,
        "kv_bytes_per_token": per_token,
        "seconds": {str(kv): (read + per_token * kv) / bandwidth for kv in kv_lens},
    }


def curve_record(table: LatencyTable) -> dict[str, Any]:
    """One calibrated cost curve as the record holds it (t(n), t(n)/t(1), the raw samples)."""
    return {
        "sizes": table.sizes,
        "seconds": table.seconds,
        "relative": table.relative(),
        "samples": table.samples,
    }


def time_shape(name: str, profile: Profile) -> dict[str, Any]:
    """Cost curves, prefill and AR against generate for one random-weight shape."""
    spec = load_shape(name)
    dtype = parse_dtype(profile.dtype)
    t0 = time.perf_counter()
    model = random_model(spec, dtype, profile.device)
    vocab = int(spec.config["vocab_size"])
    # Room for the longest KV length plus the largest tree even where the model's own window is
    # shorter (Vicuna's 2048): RoPE has no limit and the weights are random anyway.
    context = max(
        int(spec.config["max_position_embeddings"]), max(profile.kv_lens) + 2 * max(profile.sizes) + 64
    )
    engine = VerificationEngine(model, eos_token_ids=(), context_length=context)
    result: dict[str, Any] = {
        "shape": name,
        "paper_model": spec.paper_model,
        "architecture": spec.architecture,
        "config": spec.config,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": profile.dtype,
        "random_weights": True,
        "forward": engine.forward_name,
        "build_seconds": time.perf_counter() - t0,
    }
    curves = {}
    for kv in profile.kv_lens:
        table = calibrate(engine, sizes=profile.sizes, kv_len=kv, repeats=profile.repeats)
        curves[str(kv)] = curve_record(table)
    result["cost_curve"] = curves
    floor = bandwidth_floor(model, spec.config, profile.kv_lens, copy_bandwidth(profile.device))
    floor["t1_over_floor"] = {kv: curves[kv]["seconds"][0] / sec for kv, sec in floor["seconds"].items()}
    result["bandwidth_floor"] = floor
    try:  # launch overhead: what a CUDA graph would save per step (experiments.graph_probe)
        sizes = [n for n in (1, 16, 64) if n <= max(profile.sizes)]
        result["cuda_graphs"] = graph_probe.probe(engine, vocab, profile.kv_lens[0], sizes, profile.repeats)
    except Exception as exc:  # a forward that cannot be captured: record why
        result["cuda_graphs"] = {"graphs": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    result["prefill"] = time_prefill(engine, vocab, tuple(x for x in profile.prefill_lengths if x < context))
    engines = {"engine:ar": engine}
    if profile.compile:
        try:
            t1 = time.perf_counter()
            compiled = VerificationEngine(
                model, eos_token_ids=(), context_length=context, compile_forward=True
            )
            generate(compiled, ARDrafter(), random_prompt(vocab, profile.prompt_len, 2), 8)  # compile
            table = calibrate(
                compiled,
                sizes=[s for s in profile.sizes if s <= 64],
                kv_len=profile.kv_lens[0],
                repeats=profile.repeats,
            )
            result["compile"] = {
                "compile_seconds": time.perf_counter() - t1,
                "cost_curve": {str(profile.kv_lens[0]): curve_record(table)},
            }
            engines["engine:ar+compile"] = compiled
        except Exception as exc:  # torch.compile is optional: record why it did not run
            result["compile"] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    result["graphs"], graphed = time_graphed(model, context, profile)
    if graphed is not None:
        engines["engine:ar+graphs"] = graphed
    result["ar_vs_generate"] = ar_against_generate(model, engines, profile, vocab)
    if graphed is not None:
        over = result["ar_vs_generate"]["tokens_per_s"]
        speedup = over["engine:ar+graphs"]["median"] / over["engine:ar"]["median"]
        result["graphs"]["ar_speedup_over_eager"] = speedup
        result["graphs"]["keep"] = result["graphs"]["graphs"] and speedup > 1.05
        result["graphs"]["steps"] = graphed.static.stats()
    if "engine:ar+compile" in engines:
        over = result["ar_vs_generate"]["tokens_per_s"]
        result["compile"]["ar_speedup_over_eager"] = (
            over["engine:ar+compile"]["median"] / over["engine:ar"]["median"]
        )
        result["compile"]["keep"] = result["compile"]["ar_speedup_over_eager"] > 1.05
    del engines, engine, model
    if profile.compile:
        torch._dynamo.reset()  # the compiled graphs hold the model's weights
    release(profile.device)
    return result


def time_graphed(
    model: Any, context: int, profile: Profile
) -> tuple[dict[str, Any], VerificationEngine | None]:
    """The engine with its steps replayed from CUDA graphs (`cuda_graphs=True`,
    goose.engine.forward.static_step): its cost curve at every KV length (tree sizes up to the largest
    bucket; a size between two buckets pays for the larger one, as the graphed engine does) and
    the engine itself for the AR race. Without CUDA the same padded static steps run eagerly
    (nothing to capture), which keeps the code path working; `graphs: false` says so."""
    cuda = torch.device(profile.device).type == "cuda"
    try:
        t0 = time.perf_counter()
        graphed = VerificationEngine(model, eos_token_ids=(), context_length=context, cuda_graphs=cuda)
        if not cuda:
            graphed.static = StaticStep(graphed, capture=False)
        sizes = [s for s in profile.sizes if s <= graphed.static.largest]
        curves = {
            str(kv): curve_record(calibrate(graphed, sizes=sizes, kv_len=kv, repeats=profile.repeats))
            for kv in profile.kv_lens
        }
    except Exception as exc:  # a forward that cannot be captured: record why
        return {"graphs": cuda, "error": f"{type(exc).__name__}: {exc}"[:2000]}, None
    result = {
        "graphs": cuda,
        "forward": graphed.forward_name,
        "seconds": time.perf_counter() - t0,
        "captures": graphed.static.captures,
        "cost_curve": curves,
    }
    if not cuda:
        result["why_no_graphs"] = (
            f"no CUDA device (the run is on {profile.device}): the padded static steps ran eagerly"
        )
    return result, graphed


def stage_timing(profile: Profile, record: dict[str, Any], path: Path) -> dict[str, Any]:
    """Each shape of the profile timed and merged into the record's timing section (the shapes of
    earlier invocations stay), the record saved after each: a call cut short keeps its shapes."""
    timing = record["stages"].setdefault("timing", {})
    for name in profile.shapes:
        timing[name] = time_shape(name, profile)
        save_record(record, path)
    return timing


def ratio(curve: dict[str, Any], n: int) -> float | None:
    sizes = curve["sizes"]
    return curve["relative"][sizes.index(n)] if n in sizes else None


# ------------------------------------------------------------------------------------ projection
def stage_projection(
    record: dict[str, Any], results_dir: str, drafting_rows: str | None = None
) -> dict[str, Any]:
    """Each method's per-step drafting time o_m comes from SmolLM2 rows written by one process on
    this machine's host: `drafting_rows` if given, else this run's fp32 lossless rows when that
    stage ran its methods one process at a time; the shipped rows' (measured on the CPU that
    recorded them) for every method those rows lack. Rows written side by side are never used:
    their drafting times include waits for a GPU the other processes hold."""
    timing = record["stages"].get("timing")
    if not timing:
        return {"error": "no timing stage in the record: run --stages timing first"}
    rows = select_rows(read_rows(results_dir))
    overhead: dict[str, float] = {}
    source = f"the shipped rows ({results_dir}, drafting as measured on the CPU that recorded them)"
    stage = record["stages"].get("lossless", {})
    lossless = stage.get("float32", {})
    host_rows = drafting_rows or (lossless.get("rows") if stage.get("jobs", 1) == 1 else None)
    if host_rows:
        # every *.jsonl below (a lossless run keeps each process's rows in its own shard folder)
        device_rows = select_rows(read_result_rows(ROOT / host_rows), experiments=("lossless_stress",))
        overhead = host_seconds_per_step(device_rows)
        if not overhead:
            return {"error": f"no greedy lossless_stress rows with per-step records under {host_rows}"}
        source = (
            f"SmolLM2 rows written by one process on a GPU machine's host ({host_rows}) for "
            f"{', '.join(sorted(overhead))}; " + source + " otherwise"
        )
    elif lossless.get("rows"):
        source += (
            f"; this run's SmolLM2 rows were written by {stage['jobs']} processes side by side, so "
            "their drafting times are not used"
        )
    out: dict[str, Any] = {"rows": results_dir, "drafting_time_from": source, "shapes": {}}
    for name, shape in timing.items():
        # the engine a user would run: steps replayed from CUDA graphs where they won the AR race
        graphed = (shape.get("graphs") or {}).get("keep", False)
        curves = shape["graphs"]["cost_curve"] if graphed else shape["cost_curve"]
        engine = "the engine with CUDA graphs (cuda_graphs=true)" if graphed else "the eager engine"
        curve = CostCurve(
            curves[next(iter(curves))]["sizes"], {int(kv): c["seconds"] for kv, c in curves.items()}
        )
        table = project(rows, curve, PrefillCurve.from_dict(shape["prefill"]), overhead)
        caption = (
            f"Projected wall-clock speed-up over AR at the {name} shape ({shape['dtype']}, "
            f"{record['environment']['hardware']['gpu'] or 'CPU: no GPU found'}, {engine}): the per-step tree sizes "
            "of the shipped SmolLM2-135M runs (fp32, 128 tokens) replayed against the cost curve "
            "measured with random weights. A projection from SmolLM2's acceptance, not a measurement "
            "of a 7B model (τ in brackets is SmolLM2's)."
        )
        out["shapes"][name] = {"table": table, "caption": caption, "cuda_graphs": graphed}
    return out


# ------------------------------------------------------------------------------------ figures
def stage_figures(record: dict[str, Any], out: Path) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    timing = record["stages"].get("timing") or {}
    if timing:
        fig, axes = plt.subplots(1, len(timing), figsize=(4.2 * len(timing), 3.5), squeeze=False)
        for ax, (name, shape) in zip(axes[0], timing.items(), strict=True):
            for kv, curve in shape["cost_curve"].items():
                ax.plot(curve["sizes"], curve["relative"], marker="o", ms=3, label=f"KV {kv}")
            for kv, curve in (shape.get("compile", {}).get("cost_curve") or {}).items():
                ax.plot(curve["sizes"], curve["relative"], ls="--", label=f"KV {kv}, compiled")
            for kv, curve in (shape.get("graphs", {}).get("cost_curve") or {}).items():
                ax.plot(curve["sizes"], curve["relative"], ls=":", label=f"KV {kv}, CUDA graphs")
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("tree size n (nodes)")
            ax.set_ylabel("t(n) / t(1)")
            ax.set_title(f"{name} ({shape['dtype']}, random weights)", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        device = record["environment"]["hardware"]["gpu"] or "CPU (no GPU found: toy shapes)"
        fig.suptitle(f"Verification cost curve on {device}", fontsize=10)
        fig.tight_layout()
        path = out / "cost_curve.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        written.append(str(path))
    if timing:
        path = out / "gpu_summary.md"
        path.write_text(timing_table(record))
        written.append(str(path))
    projection = record["stages"].get("projection", {}).get("shapes") or {}
    if projection:
        text = "\n".join(markdown(p["table"], p["caption"]) for p in projection.values())
        path = out / "projection.md"
        path.write_text(text)
        written.append(str(path))
    return {"written": written}


def timing_table(record: dict[str, Any]) -> str:
    """The timing stage as markdown: per shape and KV length, t(1) against its bandwidth floor and
    the cost-curve ratios, eager and with CUDA graphs; then AR tokens/s against `generate`."""
    env = record["environment"]
    head = (
        f"Measured by `make gpu-check` on {env['hardware']['gpu'] or 'a CPU (toy shapes)'} (torch "
        f"{env['versions']['torch']}, transformers {env['versions']['transformers']}), random weights "
        "of each shape in its dtype: timing only, no acceptance.\n\n"
        "| shape | KV | floor (ms) | engine | t(1) (ms) | t(1) / floor | t(16)/t(1) | t(64)/t(1) | t(128)/t(1) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines, race = [], []
    for name, shape in record["stages"]["timing"].items():
        floor = shape.get("bandwidth_floor", {}).get("seconds", {})
        engines = [("eager", shape["cost_curve"])]
        if (shape.get("graphs") or {}).get("cost_curve"):
            engines.append(("CUDA graphs", shape["graphs"]["cost_curve"]))
        for kv in shape["cost_curve"]:
            for label, curves in engines:
                c = curves[kv]
                t1 = c["seconds"][0]
                ratios = " | ".join(f"{ratio(c, n):.2f}" if ratio(c, n) else "-" for n in (16, 64, 128))
                over = f"{t1 / floor[kv]:.2f}" if kv in floor else "-"
                low = f"{1e3 * floor[kv]:.2f}" if kv in floor else "-"
                lines.append(f"| {name} | {kv} | {low} | {label} | {1e3 * t1:.2f} | {over} | {ratios} |")
        ar = shape["ar_vs_generate"]
        tps = ar["tokens_per_s"]
        race.append(
            f"| {name} | "
            + " | ".join(
                f"{tps[k]['median']:.1f} [{tps[k]['min']:.1f}, {tps[k]['max']:.1f}]" if k in tps else "-"
                for k in ("engine:ar", "engine:ar+graphs", "hf:generate")
            )
            + f" | {ar['engine:ar_over_generate']['median']:.2f} | "
            + (
                f"{ar['engine:ar+graphs_over_generate']['median']:.2f} |"
                if "engine:ar+graphs_over_generate" in ar
                else "- |"
            )
        )
    first = next(iter(record["stages"]["timing"].values()))["ar_vs_generate"]
    tail = (
        f"\n\nAR, {first['prompt_tokens']}-token random prompt, {first['new_tokens']} new tokens, "
        f"median [min, max] of {first['rounds']} interleaved rounds (tokens/s, prefill included):\n\n"
        "| shape | engine AR | engine AR, CUDA graphs | transformers generate | engine / generate "
        "| graphs / generate |\n|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(lines) + tail + "\n".join(race) + "\n"


# ------------------------------------------------------------------------------------ record
def load_record(path: Path, device: str) -> dict[str, Any]:
    """The record to extend: the existing one if it was made on the same kind of device."""
    if path.is_file():
        record = json.loads(path.read_text())
        if record.get("device") == device:
            return record
    return {"device": device, "stages": {}}


def save_record(record: dict[str, Any], path: Path) -> None:
    write_text_atomically(path, json.dumps(record, indent=1, default=str))


def summary_lines(record: dict[str, Any]) -> list[str]:
    env = record["environment"]
    gpu = env["hardware"]["gpu"]
    lines = [
        f"make gpu-check on {gpu} (torch {env['versions']['torch']}, transformers {env['versions']['transformers']})"
        if gpu
        else "NO GPU FOUND: this is the CPU run of make gpu-check (the same code paths at toy sizes); "
        "none of these figures describes a GPU."
    ]
    st = record["stages"]
    if "tests" in st:
        t = st["tests"]
        lines.append(
            f"device tests ({t['device']}): {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped"
        )
        lines += [f"  FAILED {f}" for f in t["failed_tests"]]
    if "lossless" in st:
        lo = st["lossless"]
        lines.append(
            f"lossless, {lo['model']} on the device, first {lo['limit']} prompts of {', '.join(lo['benches'])}, "
            f"{lo['max_new_tokens']} tokens:"
        )
        for dtype in (d for d in lo if isinstance(lo[d], dict)):
            r = lo[dtype]
            if "error" in r:
                lines.append(f"  {dtype}: not run: {r['error']}")
                continue
            tot = r["totals"]
            if not tot:
                lines.append(f"  {dtype}: no method row was written (the run was cut short)")
                continue
            benches = f" ({', '.join(r['benches'])})" if r.get("benches") else ""
            lines.append(
                f"  {dtype}{benches}: {len(r['methods'])} methods, {tot['identical']}/{tot['prompts']} "
                f"outputs identical to AR; mismatches: {tot['near_tie']} near-tie, {tot['real']} real; "
                f"{tot['failed']} failed"
                + (
                    f"; {tot['no_verdict']} sampled-draft outputs (exact in distribution only)"
                    if tot.get("no_verdict")
                    else ""
                )
            )
            cross = r.get("ar_identical_to_eager")
            if cross:
                lines.append(
                    f"  {dtype}: AR through CUDA graphs identical to eager AR on "
                    f"{cross['identical']}/{cross['prompts']} prompts"
                )
    used = st.get("usedby")
    if used:
        lines.append(f"used-by command (rc {used['returncode']}, {used['seconds']:.0f} s): {used['command']}")
        for m, s in (used.get("summary") or {}).items():
            lines.append(
                f"  {used.get('model')} {m}: {s['prompts']} prompts, tau {s['tau']:.2f}, "
                f"{s['tokens_per_s']:.1f} tok/s, lossless {s['lossless_share']}, "
                f"random_weights {used.get('random_weights')}"
            )
    for name, shape in (st.get("timing") or {}).items():
        parts = []
        for kv, curve in shape["cost_curve"].items():
            rel = ", ".join(f"t({n})/t(1) {ratio(curve, n):.2f}" for n in (16, 64, 128) if ratio(curve, n))
            parts.append(f"KV {kv}: t(1) {curve['seconds'][0] * 1e3:.1f} ms, {rel}")
        lines.append(
            f"{name} ({shape['dtype']}, random weights, {shape['parameters'] / 1e9:.2f}B): "
            + "; ".join(parts)
        )
        floor = shape.get("bandwidth_floor")
        if floor:
            lines.append(
                f"  t(1) over its bandwidth floor ({floor['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s copy, "
                f"{floor['weight_bytes_read'] / 2**30:.2f} GiB of weights): "
                + ", ".join(
                    f"KV {kv}: {1e3 * floor['seconds'][kv]:.2f} ms floor, {x:.2f}x"
                    for kv, x in floor["t1_over_floor"].items()
                )
            )
        ar = shape["ar_vs_generate"]
        tps = ar["tokens_per_s"]
        lines.append(
            "  AR tokens/s: "
            + ", ".join(f"{n} {v['median']:.1f}" for n, v in tps.items())
            + f"; engine AR / generate {ar['engine:ar_over_generate']['median']:.2f}x "
            f"[{ar['engine:ar_over_generate']['min']:.2f}, {ar['engine:ar_over_generate']['max']:.2f}]"
        )
        comp = shape.get("compile")
        if comp:
            lines.append(
                f"  torch.compile: {comp['error']}"
                if "error" in comp
                else f"  torch.compile: AR {comp['ar_speedup_over_eager']:.2f}x eager -> "
                f"{'keep (flag compile_forward)' if comp['keep'] else 'off (does not help)'}"
            )
        if "cuda_graphs" in shape:
            lines.append(graph_probe.summary(shape["cuda_graphs"]))
        lines.append(graphed_summary(shape.get("graphs")))
        if gpu:
            first = next(iter(shape["cost_curve"].values()))
            t64 = ratio(first, 64)
            ok_t64 = t64 is not None and t64 <= TARGET_T64
            ok_ar = ar["engine:ar_over_generate"]["median"] >= TARGET_AR_OVER_GENERATE
            graphed = ar.get("engine:ar+graphs_over_generate")
            with_graphs = (
                f" (with CUDA graphs {graphed['median']:.2f}x: "
                f"{'met' if graphed['median'] >= TARGET_AR_OVER_GENERATE else 'NOT met'})"
                if graphed
                else ""
            )
            over_floor = max((floor or {}).get("t1_over_floor", {}).values(), default=float("inf"))
            lines.append(
                f"  targets: t(1) <= {TARGET_FLOOR}x floor: {'met' if over_floor <= TARGET_FLOOR else 'NOT met'}; "
                f"t(64)/t(1) <= {TARGET_T64}: {'met' if ok_t64 else 'NOT met'}; "
                f"engine AR >= {TARGET_AR_OVER_GENERATE}x generate: {'met' if ok_ar else 'NOT met'}"
                + with_graphs
            )
    for name, proj in ((st.get("projection") or {}).get("shapes") or {}).items():
        by_method: dict[str, list[float]] = {}
        for r in proj["table"]:
            by_method.setdefault(r["method"], []).append(r["projected_speedup"])
        lines.append(
            f"projected speed-up over AR at the {name} shape (from SmolLM2's acceptance; mean over benchmarks): "
            + ", ".join(f"{m} {sum(v) / len(v):.2f}x" for m, v in sorted(by_method.items()) if m != "ar")
        )
    for path in (st.get("figures") or {}).get("written", []):
        lines.append(f"wrote {path}")
    return lines


def graphed_summary(graphs: dict[str, Any] | None) -> str:
    """One line on the engine with CUDA graphs (`time_graphed`)."""
    if not graphs or "error" in graphs:
        return f"  engine with CUDA graphs: not timed: {(graphs or {}).get('error', 'not in this record')}"
    curves = "; ".join(
        f"KV {kv}: t(1) {c['seconds'][0] * 1e3:.1f} ms, "
        + ", ".join(f"t({n})/t(1) {ratio(c, n):.2f}" for n in (16, 64, 128) if ratio(c, n))
        for kv, c in graphs["cost_curve"].items()
    )
    speedup = graphs.get("ar_speedup_over_eager")
    if not graphs["graphs"]:
        return f"  engine with CUDA graphs: not timed: {graphs['why_no_graphs']} ({curves})"
    verdict = "keep (flag cuda_graphs)" if graphs.get("keep") else "off (does not help)"
    race = f"AR {speedup:.2f}x eager -> {verdict}; " if speedup is not None else ""
    return f"  engine with CUDA graphs ({graphs['captures']} captures): {race}{curves}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    record_only = set(stages) <= {"projection", "figures"} or (
        args.lossless_rows is not None and set(stages) <= {"lossless", "projection", "figures"}
    )
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


def failures(record: dict[str, Any]) -> list[str]:
    """What makes the check fail: a failed device test, an fp32 output that differs from AR's, a
    half-precision divergence that is not a near-tie, a prompt that failed."""
    st = record["stages"]
    bad = [f"device test {t}" for t in st.get("tests", {}).get("failed_tests", [])]
    for dtype, r in st.get("lossless", {}).items():
        tot = r.get("totals") if isinstance(r, dict) else None
        if not tot:
            continue
        if dtype.startswith("float32") and tot["identical"] < tot["prompts"]:
            bad.append(f"{dtype}: {tot['prompts'] - tot['identical']} output(s) differ from AR")
        if tot["real"] or tot["failed"]:
            bad.append(f"{dtype}: {tot['real']} real mismatch(es), {tot['failed']} failed prompt(s)")
        cross = r.get("ar_identical_to_eager")
        if cross and cross["identical"] < cross["prompts"]:
            bad.append(
                f"{dtype}: AR through CUDA graphs differs from eager AR on "
                f"{cross['prompts'] - cross['identical']} prompt(s)"
            )
    return bad


if __name__ == "__main__":
    sys.exit(main())
