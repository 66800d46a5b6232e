"""The static delayed tree's shape per setting (`make delayed-grid`): Thomas et al.'s a_base
(arXiv 2602.16994, §5, Def. 5.2) fixes (K, L1, L2), K i.i.d. paths of L2 draws after a trunk of L1, per
model and sampling setting, chosen by a grid search of measured tokens/s on calibration prompts. This
script is that search.

For one model and temperature it runs every delayed-tree method (`--methods`, e.g. STAND and the layer-skip
self-draft) at every (K, L1, L2) of the grid on calibration prompts that the matched evaluation does not
use (`--skip` the first prompts of each benchmark, then `--limit`), side by side with AR sampling in one
process: on each prompt AR first, then the shapes in an order that rotates from prompt to prompt, every
shape with the same seed (common random numbers), one drafter per (method, shape) across the prompts, as
in a bench run. A shape's score is its generated tokens / its wall seconds over the calibration prompts;
the best shape per method is written to `<out>/chosen.json`, which `experiments.bench --method-overrides`
(and `make bench-verifiers`) reads, and every run is a row in `<out>/grid.jsonl`.

    python -m experiments.delayed_grid --model smollm2-135m --temperature 1.0 \
        --out results/studies/delayed_shape/smollm2-135m_T1.0

The same command resumes: (method, shape, prompt) runs already in grid.jsonl are not run again.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import torch

from experiments.bench.load import method_factory, model_and_engine, prompts_past
from goose.engine.core.decode import generate
from goose.engine.core.sampling import SamplingParams, derive_seed
from goose.harness.compose import UserError, compose_config
from goose.harness.rows import environment
from goose.records.delayed_shape import SHAPE_KEYS, choose_shapes, shape_overrides
from goose.records.results import append_line, read_rows

ROOT = Path(__file__).resolve().parents[1]

# Each drafter's names for (K, L1, L2) in its config; a method is accepted when its drafter has one of these.
SHAPE_FIELDS = (("num_paths", "trunk_len", "path_len"), ("paths", "trunk", "path_length"))


def shape_fields(method: str, model: str) -> tuple[str, str, str]:
    """The fields holding K, L1, L2 in conf/method/<method>.yaml (composed with conf/model/<model>.yaml, which
    its values may interpolate), whose drafter must draft a delayed tree."""
    drafter = compose_config([f"model={model}", f"method={method}"]).method.drafter
    fields = next((f for f in SHAPE_FIELDS if all(k in drafter for k in f)), None)
    if drafter.get("shape") != "delayed" or fields is None:
        raise UserError(
            f"--methods: {method} does not draft a delayed tree (its drafter's shape is "
            f"{drafter.get('shape')!r}); use a method whose drafter has shape: delayed, e.g. stand_delayed"
        )
    return fields


def parse_ints(text: str, what: str, low: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise ValueError(f"{what} = {text!r}: comma-separated integers") from None
    if not values or min(values) < low:
        raise ValueError(f"{what} = {text!r}: integers >= {low}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="conf/model/<name>.yaml")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--methods", default="stand_delayed,self_draft_delayed", help="delayed-tree methods")
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (> 0)")
    ap.add_argument("--benches", default="humaneval,mtbench")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--skip", type=int, default=2, help="prompts of each benchmark left to the evaluation")
    ap.add_argument("--limit", type=int, default=1, help="calibration prompts per benchmark after --skip")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--k", default="2,4", help="K, i.i.d. paths at the branching point")
    ap.add_argument("--l1", default="1,2", help="L1, the trunk's draws")
    ap.add_argument("--l2", default="2,4", help="L2, draws per path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", required=True, help="folder of grid.jsonl and chosen.json")
    args = ap.parse_args(argv)
    if args.temperature <= 0:
        ap.error(f"--temperature = {args.temperature}: the delayed tree is a sampled draft; use T > 0")
    if args.skip < 0 or args.limit < 1 or args.max_new_tokens < 1:
        ap.error("--skip must be >= 0, --limit and --max-new-tokens >= 1")
    args.methods = [m for m in args.methods.split(",") if m]
    try:
        k, l1, l2 = (
            parse_ints(args.k, "--k", 1),
            parse_ints(args.l1, "--l1", 0),
            parse_ints(args.l2, "--l2", 1),
        )
        args.fields = {m: shape_fields(m, args.model) for m in args.methods}
    except (ValueError, UserError) as exc:
        ap.error(str(exc))
    args.grid = list(itertools.product(k, l1, l2))
    args.out = Path(args.out)
    return args


def read_grid(path: Path) -> list[dict[str, Any]]:
    """The runs in grid.jsonl so far (sealed or not: `goose.records.seal`), as written (not result rows)."""
    return read_rows(path, migrate=False)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    benches = [b for b in args.benches.split(",") if b]
    prompts = prompts_past(loaded.tokenizer, args.model, benches, args.skip, args.limit, args.data_dir)
    if not prompts:
        raise SystemExit(f"experiments.delayed_grid: no prompt left after --skip {args.skip}")
    sampling = SamplingParams(args.temperature)
    contenders: dict[tuple[str, tuple[int, ...]], Any] = {
        ("ar", ()): method_factory("ar", model=args.model)()
    }
    for method in args.methods:
        for shape in args.grid:
            contenders[(method, shape)] = method_factory(
                method, shape_overrides(args.fields[method], shape), model=args.model
            )()
    for method in ["ar", *args.methods]:  # untimed warm-up of each code path, with throw-away drafters
        generate(
            engine, method_factory(method, model=args.model)(), prompts[0].ids[:64], 8, sampling=sampling
        )
    args.out.mkdir(parents=True, exist_ok=True)
    grid_file = args.out / "grid.jsonl"
    done = {(r["method"], tuple(r["shape"]), r["bench"], r["prompt_id"]) for r in read_grid(grid_file)}
    env = environment()
    others = [key for key in contenders if key[0] != "ar"]
    for k, p in enumerate(prompts):
        shift = k % len(others)
        seed = derive_seed(args.seed, p.bench, p.prompt_id)
        for method, shape in [("ar", ()), *others[shift:], *others[:shift]]:
            if (method, shape, p.bench, p.prompt_id) in done:
                continue
            drafter = contenders[(method, shape)]
            t0 = time.perf_counter()
            g = generate(engine, drafter, p.ids, args.max_new_tokens, sampling=sampling, seed=seed)
            wall = time.perf_counter() - t0
            row = {
                "model": args.model,
                "dtype": args.dtype,
                "temperature": args.temperature,
                "method": method,
                "shape": list(shape),
                "shape_fields": list(args.fields.get(method, ())),
                "bench": p.bench,
                "prompt_id": p.prompt_id,
                "seed": seed,
                "generated_tokens": len(g.output_ids),
                "forward_calls": g.forward_calls,
                "tau": g.tau,
                "wall_time_s": wall,
                "max_new_tokens": args.max_new_tokens,
                "hardware": env["hardware"],
                "versions": env["versions"],
                "git_commit": env["git_commit"],
            }
            append_line(grid_file, (json.dumps(row) + "\n").encode())
        print(f"prompt {k + 1}/{len(prompts)} ({p.bench}/{p.prompt_id}) done")
    rows = [r for r in read_grid(grid_file) if r["temperature"] == args.temperature]
    chosen = choose_shapes(rows)
    (args.out / "chosen.json").write_text(json.dumps(chosen, indent=1) + "\n")
    for method, pick in chosen.items():
        shape = dict(zip(SHAPE_KEYS, pick["shape"], strict=True))
        print(f"{method}: {shape} at {pick['tokens_per_s']:.1f} tok/s ({pick['speedup_over_ar']:.2f}x AR)")
    return chosen


if __name__ == "__main__":
    main()
