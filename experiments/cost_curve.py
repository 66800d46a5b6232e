"""The cost curve: verification latency against tree size on this machine, per dtype.

Calibrates the verification latency with `goose.engine.budget.calibration` (one verification step
timed over repeats, trees of every n from 1 to 24 nodes, then sparser up to 128, after a KV cache of --kv-len tokens) for each dtype
and writes <out-dir>/<name>.csv (one row per dtype and size, with every sample) and <name>.json (the latency
tables and the environment; `LatencyTable.from_dict` reads each table back, e.g. for
`experiments.bench --latency`), by default under results/cost_curve/; `make figures` (or `make cost-curve`,
which runs this script first) draws <name>.png and .pdf from the JSON (analysis/cost_curve.py).
Each size is also reported as a multiple of its hardware floor (goose.engine.budget.hardware_limit: the
larger of weight + KV bytes / measured bandwidth and FLOPs / measured matmul throughput), so the
curve means the same on any machine.

    python -m experiments.cost_curve --threads 2 --dtypes float32,bfloat16
    python -m experiments.cost_curve --threads 2 --dtypes float32 --temperature 1.0 --name cost_curve_T1.0

With `--temperature` > 0 the steps verify sampled (the warp over the vocabulary and the match against the
draw), as a sampled run's budget=auto curve is measured.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import torch

from experiments.bench.load import model_and_engine
from goose.engine.budget.calibration import DEFAULT_SIZES, calibrate
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.budget.hardware_limit import StepFloor, measure_floor
from goose.engine.core.sampling import SamplingParams
from goose.harness.runner import environment


def main(argv: list[str] | None = None) -> dict[str, LatencyTable]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--kv-len", type=int, default=256)
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--update-topk", type=int, default=10, help="include a drafter's top-K update (0 = off)")
    ap.add_argument("--out-dir", default="results/cost_curve", help="where the JSON and CSV records go")
    ap.add_argument("--name", default="cost_curve")
    ap.add_argument("--temperature", type=float, default=0.0, help="> 0: the steps verify sampled at this T")
    args = ap.parse_args(argv)
    sampling = SamplingParams(temperature=args.temperature) if args.temperature > 0 else None
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables: dict[str, LatencyTable] = {}
    floors: dict[str, StepFloor] = {}
    device = "cpu"
    for dtype in [d for d in args.dtypes.split(",") if d]:
        loaded, engine = model_and_engine(args.model, dtype)
        device = str(engine.device)
        tables[dtype] = table = calibrate(
            engine,
            sizes=sizes,
            kv_len=args.kv_len,
            repeats=args.repeats,
            update_topk=args.update_topk or None,
            sampling=sampling,
        )
        floors[dtype] = floor = measure_floor(engine.model)
        table.meta["floor"] = floor.as_dict()
        table.meta["floor_s"] = [floor.seconds(n, args.kv_len) for n in table.sizes]
        print(
            f"{dtype}: "
            + ", ".join(
                f"n={n} {s * 1e3:.1f} ms ({r:.2f}x; {s / f:.2f}x its floor {f * 1e3:.1f} ms)"
                for n, s, r, f in zip(
                    table.sizes, table.seconds, table.relative(), table.meta["floor_s"], strict=True
                )
            )
        )
        print(
            f"  floor: bandwidth {floor.bandwidth / 1e9:.1f} GB/s, matmul {floor.matmul_flops / 1e9:.0f} GFLOP/s, "
            f"weights {floor.weight_bytes / 1e6:.0f} MB"
        )
        del engine, loaded
    stem = out_dir / args.name
    with stem.with_suffix(".csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "dtype",
                "n",
                "median_s",
                "relative_to_n1",
                "floor_s",
                "times_floor",
                "samples_s",
            ]
        )
        for dtype, t in tables.items():
            for n, s, r, f, samples in zip(
                t.sizes,
                t.seconds,
                t.relative(),
                t.meta["floor_s"],
                t.samples,
                strict=True,
            ):
                w.writerow(
                    [
                        dtype,
                        n,
                        f"{s:.6f}",
                        f"{r:.4f}",
                        f"{f:.6f}",
                        f"{s / f:.3f}",
                        " ".join(f"{x:.6f}" for x in samples),
                    ]
                )
    env = environment()
    record = {"args": vars(args), "environment": env, "tables": {d: t.to_dict() for d, t in tables.items()}}
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1))
    print(f"wrote {stem}.csv, .json (device {device}); `make figures` draws them")
    return tables


if __name__ == "__main__":
    main()
