"""Wall-clock benchmark (`make bench`): every contender measured side by side in one process, on the
same prompts, on the same machine, in the same session.

Contenders
    engine:ar           the shared engine with a one-node tree per step (goose.engine.core.decode.generate)
    engine:<method>     any configured method (conf/method/<method>.yaml), at its configured budget
    engine:<method>:auto   the same method wrapped by budget=auto (goose.engine.budget.auto_budget), with the
                        latency curve calibrated at start-up on this machine (goose.engine.budget.cost_model)
    hf:greedy           transformers `generate(do_sample=False)`
    hf:pld              transformers `generate(do_sample=False, prompt_lookup_num_tokens=10)`

Protocol: warm-up first (the engine's warm-up step, then every contender once on a short prompt,
untimed); then `--repeats` rounds, each running every contender on every prompt, interleaved
prompt by prompt (the contenders' order rotates from prompt to prompt, so that no contender
always runs first or after the same neighbour), so that drifts of the machine's speed hit all
contenders alike. Tokens/s of a contender in a round = its generated tokens / its wall seconds,
summed over the prompts every contender completed (prefill included, as in SPEC). Reported:
tokens/s per contender, and each ratio as median [min, max] over the rounds; the share of each
engine method's step time spent drafting and on bookkeeping (draft + walk/compaction + drafter
update, i.e. everything but the verification forward); how many outputs equal engine AR's
(fp32 must be all; in bf16 each mismatch is reported with its first differing position and
classified, after the timed rounds, as a near-tie or a real mismatch by the top-2 margin there:
experiments/bench_divergences.py).

Sampling (`--temperature T`, `--top-p`, `--top-k`, `--seed`): every engine contender samples
with the same settings and, per prompt, the same seed (derived from --seed and the prompt id), so
deterministic drafters must reproduce engine:ar's sample token for token (the identity check
holds at T > 0 too; STAND, which samples its drafts, is exact in distribution only); the
transformers contenders sample too (`do_sample=True`, named hf:sample and hf:pld).

Resume: with --out, every finished prompt is kept in <out>.partial, and the same command resumes a
run cut short at the prompt where it stopped (experiments/bench_checkpoint.py; --fresh starts
over). The same command with --show-partial prints what the finished repeats measured so far,
without running anything. A progress bar per repeat (stderr) shows the prompts done and the time left.

For final numbers run it on a quiet machine (nothing else running; `--threads` = physical cores):

    python -m experiments.bench --threads 2 --dtype bfloat16 --out bench_bf16.json
    python -m experiments.bench --threads 2 --dtype float32 --out bench_fp32.json
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import asdict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from experiments.bench_checkpoint import BenchCheckpoint, CheckpointMismatch, measuring_code_digest  # noqa: E402
from experiments.bench_divergences import classify_against_ar, mismatched_prompts  # noqa: E402
from experiments.bench_summary import (  # noqa: E402
    REFERENCE,
    BenchPrompt,
    Run,
    print_summary,
    summarise,
)
from goose.engine.budget.auto_budget import wrap_auto_budget  # noqa: E402
from goose.engine.budget.cost_model import LatencyTable, calibrate  # noqa: E402
from goose.engine.budget.hardware_limit import measure_floor  # noqa: E402
from goose.engine.core.decode import generate  # noqa: E402
from goose.engine.core.drafter import Drafter  # noqa: E402
from goose.engine.core.sampling import GREEDY, SamplingParams, derive_seed  # noqa: E402
from goose.engine.core.verifier import VerificationEngine, sync_clock  # noqa: E402
from goose.harness.benchmarks import PAPER_BENCHMARKS  # noqa: E402
from goose.harness.chat import encode_prompt  # noqa: E402
from goose.harness.compose import (  # noqa: E402
    benchmark_prompts,
    chat_template_decision,
    compose_config,
    drafter_factory,
    load_engine,
    release_engines,
)
from goose.harness.models import LoadedModel  # noqa: E402
from goose.harness.runner import environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


# ------------------------------------------------------------------------------------ loading
def method_factory(name: str, overrides: Sequence[str] = ()) -> Callable[[], Drafter]:
    """A factory of the drafter of conf/method/<name>.yaml (validated)."""
    return drafter_factory(compose_config([f"method={name}", *overrides]))


def model_and_engine(
    name: str, dtype: str | None = None, prepack: str = "auto", compile_forward: bool = False
) -> tuple[LoadedModel, VerificationEngine]:
    """conf/model/<name>.yaml, optionally in another dtype, and its warmed-up engine with the
    config's `prepack` and `compile` settings, through the harness's loader (the one `run.py`
    uses)."""
    release_engines()  # one model in memory at a time
    overrides = [f"model={name}", f"prepack={prepack}", f"compile={str(compile_forward).lower()}"]
    overrides += [f"model.dtype={dtype}"] if dtype else []
    return load_engine(compose_config(overrides))


def load_prompts(
    tokenizer: Any, model: str, benches: list[str], limit: int, data_dir: str | None, chat_template: str
) -> list[BenchPrompt]:
    """The first `limit` prompts of each benchmark, composed and tokenized as run.py does it
    (goose.harness.compose), with bench.chat_template = `chat_template` (auto | true | false)."""
    out = []
    for bench in benches:
        cfg = compose_config(
            [f"model={model}", f"bench={bench}", f"bench.chat_template={chat_template}"]
            + ([f"data_dir={data_dir}"] if data_dir else [])
        )
        spec, prompts, _ = benchmark_prompts(cfg, limit)
        apply_chat, _ = chat_template_decision(cfg, spec, tokenizer)
        out += [
            BenchPrompt(bench, str(p.prompt_id), encode_prompt(tokenizer, p.text, apply_chat))
            for p in prompts
        ]
    return out


# ------------------------------------------------------------------------------------ contenders
HF_CONTENDERS = ("greedy", "pld")


def contender_names(methods: str, hf: str, greedy: bool) -> list[str]:
    """The contenders' names for comma-separated --methods and --hf, in the order they are built:
    engine:ar, the engine methods, the transformers ones (hf:greedy is hf:sample when sampling).
    ValueError names an unknown --hf contender and the valid ones."""
    names = [REFERENCE] + [f"engine:{m}" for m in methods.split(",") if m and m != "ar"]
    for h in [h for h in hf.split(",") if h]:
        if h not in HF_CONTENDERS:
            raise ValueError(f"unknown --hf contender {h!r}; choose from {', '.join(HF_CONTENDERS)}")
        names.append(hf_name(h, greedy))
    return list(dict.fromkeys(names))


def hf_name(contender: str, greedy: bool) -> str:
    """The name of --hf `contender`: hf:greedy samples (hf:sample) at temperature > 0."""
    return f"hf:{'sample' if contender == 'greedy' and not greedy else contender}"


Contender = Callable[[list[int], int, int], Run]  # (prompt ids, max_new_tokens, seed)


def hf_contender(
    model: Any, eos: list[int], sampling: SamplingParams = GREEDY, **generate_kwargs: Any
) -> Contender:
    """transformers' generate, timed from before the call to after it (CUDA-synchronised); at
    temperature > 0 it samples (do_sample, same temperature / top_p / top_k; torch's global seed
    set from the prompt's seed, outside the timed region)."""
    if not sampling.greedy:
        generate_kwargs = {
            **generate_kwargs,
            "do_sample": True,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k or None,
        }
    else:
        generate_kwargs = {"do_sample": False, **generate_kwargs}

    def run(ids: list[int], max_new: int, seed: int = 0) -> Run:
        x = torch.tensor([ids], device=model.device)
        torch.manual_seed(seed)
        t0 = sync_clock(model.device)
        out = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=max_new,
            eos_token_id=eos,
            pad_token_id=eos[0],
            **generate_kwargs,
        )
        t1 = sync_clock(model.device)
        return Run(out[0, len(ids) :].tolist(), t1 - t0)

    return run


def engine_contender(
    engine: VerificationEngine, drafter: Drafter, sampling: SamplingParams = GREEDY
) -> Contender:
    """goose.engine.core.decode.generate with one drafter object across prompts (as in a run)."""

    def run(ids: list[int], max_new: int, seed: int = 0) -> Run:
        g = generate(engine, drafter, ids, max_new, sampling=sampling, seed=seed)
        return Run(
            g.output_ids, g.wall_time_s, g.time_split(), len(g.steps), sum(s.tree_size for s in g.steps)
        )

    return run


def floor_report(
    engine: VerificationEngine, summary: dict[str, Any], prompts: list[BenchPrompt], max_new: int
) -> dict[str, Any]:
    """Each engine contender's mean verification step against its floor (goose.engine.budget.hardware_limit:
    weight + KV bytes at the measured bandwidth, or FLOPs at the measured matmul throughput, for
    its mean tree size after the mean KV length of a step), so the figure means the same on any
    machine. Measured after the timed rounds."""
    floor = measure_floor(engine.model)
    kv_len = round(sum(len(p.ids) for p in prompts) / len(prompts) + max_new / 2)
    out: dict[str, Any] = {"floor": floor.as_dict(), "mean_kv_len": kv_len, "contenders": {}}
    for name, o in summary["overhead"].items():
        split = o["split_s_repeat1"]
        n_steps = o.get("steps_repeat1")
        if not n_steps or not split:
            continue
        step = split.get("forward_s", 0.0) / n_steps
        n = max(1, round(o["mean_tree_nodes"]))
        bound = floor.seconds(n, kv_len)
        out["contenders"][name] = {
            "mean_tree_nodes": o["mean_tree_nodes"],
            "forward_ms": 1e3 * step,
            "floor_ms": 1e3 * bound,
            "times_floor": step / bound,
            "bound_by": floor.bound(n, kv_len),
        }
    return out


# ------------------------------------------------------------------------------------ driver
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        help="the engine's compile setting: the verification steps' lean forward through torch.compile "
        "(goose/engine/forward/compiled_forward.py; compiles for minutes at the warm-up)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--methods", default="goose,goose:auto", help="engine methods besides AR; suffix :auto = budget=auto"
    )
    ap.add_argument("--hf", default="greedy,pld", help="transformers contenders: greedy, pld")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--latency", default=None, help="latency table JSON for :auto (default: calibrate now)")
    ap.add_argument("--calibration-repeats", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0 = greedy)")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="per-prompt seeds are derived from it")
    ap.add_argument("--out", default=None, help="write everything measured as JSON here")
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="discard <out>.partial (what an interrupted run finished) instead of resuming it",
    )
    ap.add_argument(
        "--show-partial",
        action="store_true",
        help="print the summary of the finished repeats in <out>.partial and exit: runs nothing, loads "
        "no model, leaves the checkpoint to be resumed",
    )
    args = ap.parse_args(argv)
    if args.show_partial and not args.out:
        ap.error("--show-partial reads <out>.partial: give --out")
    if args.repeats < 1 or args.limit < 1 or args.max_new_tokens < 1:
        ap.error("--repeats, --limit and --max-new-tokens must be >= 1")
    try:
        args.sampling = SamplingParams(args.temperature, args.top_p, args.top_k)
    except ValueError as exc:
        ap.error(str(exc).replace("sampling.", "--").replace("_", "-"))
    try:
        contender_names(args.methods, args.hf, args.sampling.greedy)
    except ValueError as exc:
        ap.error(str(exc))
    return args


def fingerprint_of(
    args: argparse.Namespace, prompts: list[BenchPrompt], env: dict[str, Any]
) -> dict[str, Any]:
    """What a checkpoint of this run is pinned to (BenchCheckpoint.fingerprint_of)."""
    keys = [(p.bench, p.prompt_id) for p in prompts]
    return BenchCheckpoint.fingerprint_of(args, keys, measuring_code_digest(), env["versions"])


def open_checkpoint(
    args: argparse.Namespace, prompts: list[BenchPrompt], env: dict[str, Any]
) -> BenchCheckpoint | None:
    """What an interrupted run with these settings finished (experiments.bench_checkpoint),
    or None: no --out, nothing to resume, or --fresh. Settings that differ from the checkpoint's
    end the run with a message naming them (nothing is deleted)."""
    if not args.out:
        return None
    path = BenchCheckpoint.path_for(args.out)
    if args.fresh:
        path.unlink(missing_ok=True)
        return None
    if not path.is_file():
        return None
    fingerprint = fingerprint_of(args, prompts, env)
    try:
        return BenchCheckpoint.load(path, fingerprint)
    except CheckpointMismatch as exc:
        raise SystemExit(f"experiments.bench: {exc}") from None


def runs_of_repeat(saved: list[dict[str, Any]]) -> list[dict[str, Run | None]]:
    """One repeat's saved prompts as [prompt][contender] -> Run (None: failed)."""
    return [{n: None if r is None else Run(**r) for n, r in got.items()} for got in saved]


def runs_of(ckpt: BenchCheckpoint) -> list[list[dict[str, Run | None]]]:
    """The checkpoint's finished repeats as runs[repeat][prompt][contender]."""
    return [runs_of_repeat(rep_runs) for rep_runs in ckpt.runs]


def show_partial(out: str) -> dict[str, Any]:
    """Print and return the summary of the repeats finished so far in `<out>.partial` (the bench
    whose record `out` will be, still running or cut short). No hardware floor: that is measured
    after the last repeat. The checkpoint is only read."""
    path = BenchCheckpoint.path_for(out)
    if not path.is_file():
        raise SystemExit(f"experiments.bench: no finished repeats to show: {path} does not exist")
    try:
        ckpt = BenchCheckpoint.read(path)
    except CheckpointMismatch as exc:
        raise SystemExit(f"experiments.bench: {exc}") from None
    fp = ckpt.fingerprint
    runs = runs_of(ckpt)
    prompts = [BenchPrompt(bench, prompt_id, []) for bench, prompt_id in fp["prompts"]]
    in_progress = f"; repeat {len(runs) + 1}: {len(ckpt.current)} of {len(prompts)} prompts done"
    if not runs:
        raise SystemExit(f"experiments.bench: {path} holds no finished repeat yet{in_progress}")
    names = contender_names(fp["methods"], fp["hf"], greedy=fp["temperature"] == 0)
    summary = summarise([n for n in names if n in runs[0][0]], prompts, runs)
    machines = "; ".join(
        f"repeat {r + 1}: "
        + ", ".join(
            f"from prompt {s['first_prompt'] + 1} {s['environment']['hardware'].get('cpu')} "
            f"(session {s['environment'].get('session_id')})"
            for s in segments
        )
        for r, segments in enumerate(ckpt.environments)
    )
    commits = sorted({s["environment"].get("git_commit", "?") for segs in ckpt.environments for s in segs})
    header = (
        f"{len(runs)} finished repeat(s) in {path}{in_progress if ckpt.current else ''}, measuring code "
        f"{fp['code']} (git commits {', '.join(commits)}): model={fp['model']} dtype={fp['dtype']} threads={fp['threads']} "
        f"benches={fp['benches']} prompts/bench<={fp['limit']} max_new_tokens={fp['max_new_tokens']}\n"
        f"ran on {machines}"
    )
    print_summary(summary, header)
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.show_partial:
        return show_partial(args.out)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype, args.prepack, args.compile)
    model, eos = loaded.model, list(loaded.eos_token_ids)
    prompts = load_prompts(
        loaded.tokenizer,
        args.model,
        [b for b in args.benches.split(",") if b],
        args.limit,
        args.data_dir,
        args.chat_template,
    )

    env = environment()
    ckpt = open_checkpoint(args, prompts, env)
    methods = [m for m in args.methods.split(",") if m and m != "ar"]
    latency: LatencyTable | None = None
    if any(m.endswith(":auto") for m in methods):
        if ckpt and ckpt.latency_table:
            latency = LatencyTable.from_dict(ckpt.latency_table)
            print("budget=auto reuses the latency curve of the checkpoint's first repeats")
        elif args.latency:
            latency = LatencyTable.load(args.latency)
        else:
            t = time.perf_counter()
            latency = calibrate(engine, repeats=args.calibration_repeats)
            print(f"calibrated the latency curve in {time.perf_counter() - t:.1f} s")
        print(
            "latency vs tree size: "
            + ", ".join(
                f"{n}: {s * 1e3:.1f} ms ({r:.2f}x)"
                for n, s, r in zip(latency.sizes, latency.seconds, latency.relative(), strict=True)
            )
        )

    sampling = args.sampling
    drafters: dict[str, Drafter] = {REFERENCE: method_factory("ar")()}
    for m in methods:
        base = m.removesuffix(":auto")
        drafter = method_factory(base)()
        if m.endswith(":auto"):
            drafter = wrap_auto_budget(drafter, engine, latency=latency)
        drafters[f"engine:{m}"] = drafter
    contenders: dict[str, Contender] = {n: engine_contender(engine, d, sampling) for n, d in drafters.items()}
    hf_kwargs = {"greedy": {}, "pld": {"prompt_lookup_num_tokens": 10}}
    for h in [h for h in args.hf.split(",") if h]:
        contenders[hf_name(h, sampling.greedy)] = hf_contender(model, eos, sampling, **hf_kwargs[h])
    names = list(contenders)

    for fn in contenders.values():  # untimed warm-up of every code path
        fn(prompts[0].ids[:64], 16, 0)

    ckpt = ckpt or BenchCheckpoint(
        fingerprint_of(args, prompts, env),
        latency.to_dict() if latency else None,
    )
    for n, state in ckpt.drafter_states.items():  # after the warm-up, which may touch drafter state
        drafters[n].restore_run_state(state)
    runs = runs_of(ckpt)
    errors: list[dict[str, str]] = ckpt.errors
    if runs or ckpt.current:
        print(
            f"resuming {BenchCheckpoint.path_for(args.out)}: {len(runs)} of {args.repeats} repeats finished, "
            f"repeat {len(runs) + 1} at prompt {len(ckpt.current) + 1} of {len(prompts)}"
        )
    for rep in range(len(runs), args.repeats):
        t_rep = time.perf_counter()
        rep_runs = runs_of_repeat(ckpt.current)
        if len(ckpt.environments) <= rep:
            ckpt.environments.append([])
        ckpt.environments[rep].append({"first_prompt": len(rep_runs), "environment": env})
        progress = tqdm(
            range(len(rep_runs), len(prompts)),
            total=len(prompts),
            initial=len(rep_runs),
            desc=f"repeat {rep + 1}/{args.repeats}",
            unit="prompt",
            mininterval=30,
        )
        for i in progress:  # the bar updates between prompts, outside every timed call
            p = prompts[i]
            k = (i + rep) % len(names)
            order = names[k:] + names[:k]
            got: dict[str, Run | None] = {}
            for n in order:
                try:
                    got[n] = contenders[n](p.ids, args.max_new_tokens, derive_seed(args.seed, p.prompt_id))
                except (RuntimeError, ValueError) as exc:  # a failed prompt is reported, not fatal
                    got[n] = None
                    errors.append({"repeat": rep, "prompt": p.prompt_id, "contender": n, "error": repr(exc)})
                    traceback.print_exc()
            rep_runs.append(got)
            ckpt.current.append({n: None if r is None else asdict(r) for n, r in got.items()})
            if args.out:  # the drafters' state is only taken for a checkpoint
                ckpt.drafter_states = {n: d.run_state() for n, d in drafters.items() if d.carries_run_state}
                ckpt.save(BenchCheckpoint.path_for(args.out))
        runs.append(rep_runs)
        done = [i for i, g in enumerate(rep_runs) if all(g[n] is not None for n in names)]
        line = ", ".join(
            f"{n} {sum(len(rep_runs[i][n].output_ids) for i in done) / max(sum(rep_runs[i][n].seconds for i in done), 1e-9):.1f}"
            for n in names
        )
        print(f"repeat {rep + 1}/{args.repeats} ({time.perf_counter() - t_rep:.0f} s): tokens/s {line}")
        ckpt.runs.append(ckpt.current)
        ckpt.current = []
        if args.out:
            ckpt.save(BenchCheckpoint.path_for(args.out))

    summary = summarise(names, prompts, runs)
    summary["hardware_floor"] = floor_report(engine, summary, prompts, args.max_new_tokens)
    if sampling.greedy and mismatched_prompts(summary):  # each divergence's top-2 margin, after the timing
        ids = {(p.bench, p.prompt_id): p.ids for p in prompts}
        ar_outputs = {
            (p.bench, p.prompt_id): runs[0][i][REFERENCE].output_ids
            for i, p in enumerate(prompts)
            if runs[0][i].get(REFERENCE) is not None  # a failed prompt has no mismatch to classify
        }
        classify_against_ar(summary, engine, ids, ar_outputs, sampling, args.seed, {"when": "in the run"})
    header = (
        f"model={args.model} dtype={str(loaded.dtype).replace('torch.', '')} device={engine.device} "
        f"forward={engine.forward_name} "
        f"threads={torch.get_num_threads()} benches={args.benches} prompts/bench<={args.limit} "
        f"max_new_tokens={args.max_new_tokens} repeats={args.repeats} "
        f"sampling={'greedy' if sampling.greedy else sampling.as_dict()} seed={args.seed}"
    )
    print_summary(summary, header)
    record = {
        "args": vars(args),
        "environment": env,
        "repeat_environments": ckpt.environments,
        "dtype": str(loaded.dtype).replace("torch.", ""),
        "forward": engine.forward_name,
        "latency_table": latency.to_dict() if latency else None,
        "summary": summary,
        "errors": errors,
        "per_prompt": [
            {
                "bench": p.bench,
                "prompt_id": p.prompt_id,
                "runs": [
                    {
                        n: None
                        if runs[r][i][n] is None
                        else {
                            "tokens": len(runs[r][i][n].output_ids),
                            "seconds": runs[r][i][n].seconds,
                            "split": runs[r][i][n].split,
                            "steps": runs[r][i][n].steps,
                            "tree_nodes": runs[r][i][n].tree_nodes,
                        }
                        for n in names
                    }
                    for r in range(len(runs))
                ],
            }
            for i, p in enumerate(prompts)
        ],
    }
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1, default=str))
        BenchCheckpoint.path_for(args.out).unlink(missing_ok=True)
        print(f"\nwrote {args.out}")
    return record


if __name__ == "__main__":
    main()
