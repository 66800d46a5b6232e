"""The engine's forward variants side by side: one verification step of n nodes, per dtype, against
the machine's hardware floor.

For each dtype the model is loaded once and three engines share it: `transformers` (the model's
own forward), `lean` (goose.engine.forward.lean_forward with plain `F.linear`, the fallback) and
`lean+prepack` (the same with weights reordered once for oneDNN, goose.engine.forward.packed_linear; the
default on a CPU); `--variants ...,lean+compile,lean+prepack+compile` adds the lean forward
through torch.compile (`compile_forward`, goose.engine.forward.compiled_forward; compiled for every size
at an untimed warm-up calibration). Rounds are interleaved (round r measures every variant once, the order of the
variants alternating), each round is one `goose.engine.budget.calibration.calibrate` (median of
--repeats steps per size after a KV cache of --kv-len tokens); the table gives the median over
rounds and the min-max spread, each step as a multiple of its floor (goose.engine.budget.hardware_limit:
the larger of weight + KV bytes / measured bandwidth and FLOPs / measured matmul throughput) and
t(n)/t(1). Writes <out-dir>/<name>.json and .md.

    python -m experiments.forward_speed --threads 2 --dtypes float32,bfloat16 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
from omegaconf import OmegaConf

from goose.engine.budget.calibration import calibrate
from goose.engine.budget.hardware_limit import measure_floor
from goose.engine.forward.choose import verification_engine
from goose.harness.compose import compose_config
from goose.harness.models.load import load_model
from goose.harness.runner import environment, warm_up

VARIANTS = {
    "transformers": {"lean": False},
    "lean": {"prepack": False},
    "lean+prepack": {"prepack": True},
    # torch.compile (goose.engine.forward.compiled_forward); not in the default set (minutes to compile)
    "lean+compile": {"compile_forward": True, "prepack": False},
    "lean+prepack+compile": {"compile_forward": True},
}
DEFAULT_VARIANTS = ("transformers", "lean", "lean+prepack")


def measure(
    model_name: str, dtype: str, variants: list[str], sizes: list[int], kv_len: int, rounds: int, repeats: int
) -> dict:
    """{"floor": ..., "variants": {name: {n: [per-round medians, s]}}} for one dtype."""
    cfg = compose_config([f"model={model_name}", f"model.dtype={dtype}"])
    loaded = load_model(**OmegaConf.to_container(cfg.model, resolve=True))
    engines = {}
    for name in variants:
        engine = verification_engine(
            loaded.model, loaded.eos_token_ids, loaded.context_length, **VARIANTS[name]
        )
        if engine.forward_name != name:  # e.g. no oneDNN: say so instead of timing something else
            print(f"{dtype}: {name} is unavailable here (runs {engine.forward_name}); skipped")
            continue
        warm_up(engine, loaded.tokenizer("Warm up the forward pass.").input_ids)
        if engine.compiled:  # compile for every size now, not inside the first timed round
            calibrate(engine, sizes=sizes, kv_len=kv_len, repeats=1, update_topk=None)
        engines[name] = engine
    per_round: dict[str, dict[int, list[float]]] = {v: {n: [] for n in sizes} for v in engines}
    for r in range(rounds):
        order = list(engines) if r % 2 == 0 else list(engines)[::-1]
        for name in order:
            table = calibrate(engines[name], sizes=sizes, kv_len=kv_len, repeats=repeats, update_topk=None)
            for n, s in zip(table.sizes, table.seconds, strict=True):
                if n in per_round[name]:
                    per_round[name][n].append(s)
    floor = measure_floor(loaded.model)
    return {
        "floor": floor.as_dict(),
        "floor_s": {n: floor.seconds(n, kv_len) for n in sizes},
        "variants": per_round,
    }


def table_md(dtype: str, result: dict, sizes: list[int]) -> list[str]:
    """Markdown rows: variant, n, median ms (min-max), × floor, t(n)/t(1), speed-up over `lean`
    (over `lean+prepack` where `lean` was not measured, else over the first variant)."""
    lines = [
        f"### {dtype}",
        "",
    ]
    variants = result["variants"]
    reference = next((v for v in ("lean", "lean+prepack") if v in variants), next(iter(variants)))
    lines += [
        f"| forward | n | step ms, median (min-max over rounds) | × floor | t(n)/t(1) | speed-up vs {reference} |",
        "|---|---|---|---|---|---|",
    ]
    for name, by_n in variants.items():
        t1 = statistics.median(by_n[sizes[0]])
        for n in sizes:
            med = statistics.median(by_n[n])
            floor = result["floor_s"][n]
            base = variants.get(reference, {}).get(n)
            speedup = f"{statistics.median(base) / med:.2f}×" if base else "—"
            lines.append(
                f"| {name} | {n} | {med * 1e3:.1f} ({min(by_n[n]) * 1e3:.1f}-{max(by_n[n]) * 1e3:.1f}) "
                f"| {med / floor:.2f} | {med / t1:.2f} | {speedup} |"
            )
    fl = result["floor"]
    lines += [
        "",
        f"Floor: bandwidth {fl['bandwidth_gb_s']:.1f} GB/s, matmul {fl['matmul_gflop_s']:.0f} GFLOP/s, "
        f"weights {fl['weight_bytes'] / 1e6:.0f} MB; floor of n = 1: {result['floor_s'][sizes[0]] * 1e3:.1f} ms.",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--kv-len", type=int, default=256)
    ap.add_argument("--sizes", default="1,2,4,16,64")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the spread is over these)")
    ap.add_argument("--repeats", type=int, default=5, help="steps per size and round (their median)")
    ap.add_argument("--out-dir", default="results/forward_speed")
    ap.add_argument("--name", default="forward_speed")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)}; valid: {', '.join(VARIANTS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s} | {1})
    results = {}
    env = environment()
    hw = env["hardware"]
    lines = [
        f"# Forward variants: {args.model}, KV length {args.kv_len}, {torch.get_num_threads()} threads",
        "",
        f"`python -m experiments.forward_speed --threads {torch.get_num_threads()} --dtypes {args.dtypes} "
        f"--variants {args.variants} "
        f"--sizes {args.sizes} --rounds {args.rounds} --repeats {args.repeats} --name {args.name}`; "
        f"{args.rounds} interleaved rounds, each the median of {args.repeats} steps per size.",
        "",
        f"CPU: {hw['cpu']} ({hw['cpu_capability']}; oneDNN bf16 kernels: "
        f"{'yes' if hw['onednn_bf16'] else 'no, so lean+prepack runs bf16 trees of 3+ nodes as fp32 products'}).",
        "",
    ]
    for dtype in [d for d in args.dtypes.split(",") if d]:
        results[dtype] = measure(args.model, dtype, variants, sizes, args.kv_len, args.rounds, args.repeats)
        block = table_md(dtype, results[dtype], sizes)
        print("\n".join(block))
        lines += block
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(
        json.dumps({"args": vars(args), "environment": env, "results": results}, indent=1) + "\n"
    )
    (out / f"{args.name}.md").write_text("\n".join(lines))
    print(f"wrote {out / args.name}.json and .md")
    return results


if __name__ == "__main__":
    main()
