"""Side by side in one process: the one-token step with `attend`'s one-query half-precision
attention as GQA rows (goose.engine.forward.lean_forward.GROUP_HALF_QUERY_ROWS, the default) against
sdpa's own GQA (the path before), in interleaved rounds, each round one
`goose.engine.budget.calibration.calibrate` per setting (median of --repeats steps per tree size after a
KV cache of --kv-len tokens). Prints and writes <out-dir>/half_query_ab.{json,md}: per setting and
size the median step over rounds (min-max) and t(n)/t(1).

    python -m experiments.half_query_ab --threads 2 --dtype bfloat16 --kv-lens 256,1024
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
from omegaconf import OmegaConf

from goose.engine.budget.calibration import calibrate
from goose.engine.forward import lean_forward
from goose.engine.forward.choose import verification_engine
from goose.harness.compose import compose_config
from goose.harness.models.load import load_model
from goose.harness.runner import environment, warm_up

SETTINGS = {"gqa rows (now)": True, "sdpa gqa (before)": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kv-lens", default="256,1024")
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out-dir", default="results/half_query_ab")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    cfg = compose_config([f"model={args.model}", f"model.dtype={args.dtype}"])
    loaded = load_model(**OmegaConf.to_container(cfg.model, resolve=True))
    engine = verification_engine(loaded.model, loaded.eos_token_ids, loaded.context_length)
    warm_up(engine, loaded.tokenizer("Warm up the forward pass.").input_ids)
    results: dict[str, dict[str, dict[int, list[float]]]] = {}
    for kv_len in (int(k) for k in args.kv_lens.split(",")):
        per = {name: {n: [] for n in sizes} for name in SETTINGS}
        for r in range(args.rounds):
            for name in list(SETTINGS) if r % 2 == 0 else list(SETTINGS)[::-1]:
                lean_forward.GROUP_HALF_QUERY_ROWS = SETTINGS[name]
                table = calibrate(engine, sizes=sizes, kv_len=kv_len, repeats=args.repeats, update_topk=None)
                for n, s in zip(table.sizes, table.seconds, strict=True):
                    per[name][n].append(s)
        lean_forward.GROUP_HALF_QUERY_ROWS = True
        results[str(kv_len)] = per
    lines = [
        f"# One-token step, one-query attention as GQA rows vs sdpa's GQA: {args.model} {args.dtype}, "
        f"{args.threads} threads, {engine.forward_name}",
        "",
        f"`python -m experiments.half_query_ab --threads {args.threads} --dtype {args.dtype} --kv-lens "
        f"{args.kv_lens} --sizes {args.sizes} --rounds {args.rounds} --repeats {args.repeats}`; "
        f"{args.rounds} interleaved rounds, each the median of {args.repeats} steps per size.",
        "",
        "| KV length | attention | n | step ms, median (min-max over rounds) | t(n)/t(1) |",
        "|---|---|---|---|---|",
    ]
    for kv_len, per in results.items():
        for name, by_n in per.items():
            t1 = statistics.median(by_n[1])
            for n, v in by_n.items():
                m = statistics.median(v)
                lines.append(
                    f"| {kv_len} | {name} | {n} | {1e3 * m:.1f} ({1e3 * min(v):.1f}-{1e3 * max(v):.1f}) | {m / t1:.2f} |"
                )
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "half_query_ab.md").write_text("\n".join(lines) + "\n")
    record = {
        "args": vars(args),
        "environment": environment(),
        "forward": engine.forward_name,
        "results": results,
    }
    (out / "half_query_ab.json").write_text(json.dumps(record, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
