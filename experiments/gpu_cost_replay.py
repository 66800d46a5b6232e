"""Which method would win at GPU cost: per-step trees recorded on this machine, replayed against other cost
curves. A projection, not a measurement.

    python -m experiments.gpu_cost_replay --model smollm2-135m --benches humaneval,gsm8k,mtbench --limit 3 \
        --max-new-tokens 128 --threads 1 --out results/studies/hw_tree/gpu_cost_replay

Recording (greedy, T = 0): every method of --methods at its configured budget, and hw_tree
(baselines/hw_tree/; `--hw-tree-set FIELD=VALUE` changes its config, e.g. a wider adjacency) once per
cost curve, sized with that curve while it runs (as budget=auto sizes it with a machine's), on the same
prompts. Per step a fixed method leaves (tree size, tokens committed); hw_tree leaves its whole best-first
candidate pool before sizing (up to B nodes): each node's estimated P(path accepted), its parent, and
whether it would have been accepted, read off the generated output (at T = 0 a node is accepted iff its
path equals the greedy continuation, and the output equals AR's). hw_tree is recorded per curve because
its trajectory depends on its sizes: steps of larger trees start at other anchors, and every verified node
feeds the adjacency table the next steps draft from, so one recording re-sized for another curve counts
a long copied run again at each of the anchors inside it and misses what larger trees teach the table.

Replay: for a cost curve t(n) (one verification step of n nodes), a fixed method's projected speed-up over
AR is Σ committed · t(1) / Σ t(n_i) over its recorded steps; hw_tree's steps recorded under that curve are
sized again with b* = argmax E[committed | b] / t(b) from its estimates (not from the labels; the sizes it
verified) and commit 1 + the deepest accepted node among the first b* nodes. A curve without its own
recording (a GPU record added after it; `--replay-only`) re-sizes the pools recorded under this machine's
curve, marked as such. Curves: this machine's (calibrated at recording), the committed GPU records
(`results/gpu/<gpu>/gpu_check.json`: random weights with Vicuna-7B's and Llama-3-8B's shapes, eager and
CUDA graphs, KV 512) and Sequoia's published profile t(8)/t(1) = 1.2, t(16)/t(1) = 1.4, t(32)/t(1) = 1.8
(arXiv 2402.12374; linear between and beyond). Assumed: the larger target accepts what SmolLM2 accepted,
step for step, along the recorded trajectory; drafting costs nothing on the GPU host. Writes
<out>/replay.json.xz (the recording, xz-compressed; a plain replay.json is read too) and
<out>/projection.{json,md}.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.hw_tree.pool import best_size, expected_committed
from goose.records.cost_curve import CostCurve
from goose.records.seal import read_json, write_json_xz

ROOT = Path(__file__).resolve().parents[1]
GPU_RECORDS = sorted((ROOT / "results" / "gpu").glob("*/gpu_check.json"))  # one per GPU
SEQUOIA_PUBLISHED = {"sizes": [1, 8, 16, 32], "relative": [1.0, 1.2, 1.4, 1.8]}
DEFAULT_METHODS = "goose,suffix,pld,opt_tree,tr"
HW_TREE = "hw_tree"
THIS_MACHINE = "this machine (CPU; calibrated at recording)"


# ------------------------------------------------------------------------------------ pure replay
def path_labels(
    output: Sequence[int], anchor_at: int, tokens: Sequence[int], parents: Sequence[int]
) -> list[bool]:
    """Per selected node (node 0 the anchor, parents earlier), whether its path of drafted tokens equals the
    output after position `anchor_at` (the anchor's index in `output`); nodes past the output's end: False."""
    n = len(tokens)
    depth, ok = [0] * n, [True] * n
    for i in range(1, n):
        p = parents[i]
        depth[i] = depth[p] + 1
        at = anchor_at + depth[i]
        ok[i] = ok[p] and at < len(output) and output[at] == tokens[i]
    return ok


def committed_at(labels: Sequence[bool], parents: Sequence[int], b: int) -> int:
    """Tokens a tree of the first b nodes commits: 1 + depth of its deepest accepted node."""
    depth, best = [0] * b, 0
    for i in range(1, b):
        depth[i] = depth[parents[i]] + 1
        if labels[i]:
            best = max(best, depth[i])
    return 1 + best


def curve_function(sizes: Sequence[int], seconds: Sequence[float]) -> Callable[[int], float]:
    """t(n), piecewise linear through the points and extended linearly beyond the last one."""
    curve = CostCurve(list(sizes), {0: list(seconds)})
    return lambda n: curve.t(n, 0)


def replay_fixed(steps: Sequence[Sequence[int]], t: Callable[[int], float]) -> dict[str, float]:
    """A recorded method's steps [(tree size, tokens committed)] at cost t: τ over steps, mean tree,
    projected speed-up over AR."""
    committed = sum(c for _, c in steps)
    seconds = sum(t(n) for n, _ in steps)
    return {
        "steps": len(steps),
        "tau": committed / len(steps) if steps else 0.0,
        "tree": sum(n for n, _ in steps) / len(steps) if steps else 0.0,
        "speedup": committed * t(1) / seconds if seconds else 0.0,
    }


def replay_hw_tree(pools: Sequence[Mapping[str, Any]], t: Callable[[int], float]) -> dict[str, float]:
    """hw_tree's recorded pools ({values, parents, labels}, optionally gains) sized again for cost t (b* from
    the values plus the gains, as the drafter sizes)."""
    steps = []
    for pool in pools:
        b = best_size(expected_committed(pool["values"], pool.get("gains") or ()), t)
        steps.append((b, committed_at(pool["labels"], pool["parents"], b)))
    return replay_fixed(steps, t)


def pools_for(prompt: Mapping[str, Any], curve: str) -> tuple[list[Mapping[str, Any]], bool]:
    """hw_tree's pools of a prompt for `curve`: those recorded under it, else (True) those recorded under
    this machine's curve, to be re-sized (a recording of one list is this machine's)."""
    pools = prompt.get("hw_tree_pools", {})
    if isinstance(pools, list):
        pools = {THIS_MACHINE: pools}
    if curve in pools:
        return list(pools[curve]), False
    return list(pools.get(THIS_MACHINE, [])), True


def project(record: Mapping[str, Any], curves: Mapping[str, Callable[[int], float]]) -> list[dict[str, Any]]:
    """One row per curve × bench (and "all") × method of the recording; hw_tree's rows say whether its pools
    were recorded under the curve or re-sized from this machine's (`resized`)."""
    out = []
    for curve_name, t in curves.items():
        for bench in [*record["benches"], "all"]:
            prompts = [p for p in record["prompts"] if bench in ("all", p["bench"])]
            pool_method = record.get("pool_method", HW_TREE)
            methods = sorted({m for p in prompts for m in p["steps"]} | ({pool_method} if prompts else set()))
            for method in methods:
                extra: dict[str, Any] = {}
                if method == pool_method:
                    found = [pools_for(p, curve_name) for p in prompts]
                    pools = [s for ps, _ in found for s in ps]
                    if not pools:
                        continue
                    res = replay_hw_tree(pools, t)
                    extra["resized"] = any(r for _, r in found)
                else:
                    res = replay_fixed([s for p in prompts for s in p["steps"].get(method, [])], t)
                out.append({"curve": curve_name, "bench": bench, "method": method, **res, **extra})
    return out


def winners(table: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(curve, bench) -> the method with the largest projected speed-up."""
    best: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in table:
        key = (r["curve"], r["bench"])
        if key not in best or r["speedup"] > best[key]["speedup"]:
            best[key] = r
    return {k: v["method"] for k, v in best.items()}


def gpu_curves(path: Path, kv: str = "512") -> dict[str, Callable[[int], float]]:
    """The cost curves of the committed GPU record: per shape, eager and CUDA graphs, at KV length `kv`."""
    data = json.loads(path.read_text())
    device = (data.get("environment", {}).get("hardware", {}) or {}).get("gpu") or "GPU"
    out = {}
    for shape, rec in data.get("stages", {}).get("timing", {}).items():
        for kind, curves in (
            ("eager", rec.get("cost_curve")),
            ("graphs", (rec.get("graphs") or {}).get("cost_curve")),
        ):
            c = (curves or {}).get(kv)
            if c:
                out[f"{shape} {kind} ({device}, KV {kv}; measured)"] = curve_function(
                    c["sizes"], c["seconds"]
                )
    return out


def standard_curves(
    cpu: Mapping[str, Any] | None, gpu_records: Sequence[Path] = ()
) -> dict[str, Callable[[int], float]]:
    curves: dict[str, Callable[[int], float]] = {}
    if cpu:
        curves[THIS_MACHINE] = curve_function(cpu["sizes"], cpu["seconds"])
    for path in gpu_records:
        curves.update(gpu_curves(path))
    s = SEQUOIA_PUBLISHED
    curves["Sequoia's profile (published, arXiv 2402.12374)"] = curve_function(s["sizes"], s["relative"])
    return curves


def markdown(table: Sequence[Mapping[str, Any]], record: Mapping[str, Any]) -> str:
    lines = [
        "# GPU-cost replay (a projection, not a measurement)",
        "",
        f"Recorded with `{record['model']}` ({record['dtype']}), {len(record['prompts'])} prompts of "
        f"{', '.join(record['benches'])}, max_new_tokens {record['max_new_tokens']}, greedy. Projected "
        "speed-up over AR = Σ committed · t(1) / Σ t(tree size), forward cost only (drafting assumed free), "
        "assuming the larger target accepts what the recording accepted, step for step. hw_tree is recorded "
        "under each curve, sized by it as it runs; rows marked *re-sized* instead re-size the pools recorded "
        "under this machine's curve (a curve added after the recording).",
        "",
    ]
    win = winners(table)
    for curve in dict.fromkeys(r["curve"] for r in table):
        lines += [
            f"## {curve}",
            "",
            "| bench | method | steps | τ | mean tree | projected speed-up |",
            "|---|---|---|---|---|---|",
        ]
        for r in table:
            if r["curve"] == curve:
                mark = " **(best)**" if win[(curve, r["bench"])] == r["method"] else ""
                mark += " *re-sized*" if r.get("resized") else ""
                lines.append(
                    f"| {r['bench']} | {r['method']}{mark} | {r['steps']} | {r['tau']:.2f} | {r['tree']:.1f} "
                    f"| {r['speedup']:.2f} |"
                )
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ recording (torch)
class PoolRecorder:
    """A step callback keeping hw_tree's best-first pool of every step and where its anchor sits in the
    output (the output starts with the prefill's token: the first anchor is at 0)."""

    def __init__(self, drafter: Any) -> None:
        self.drafter, self.pools, self.anchor_at = drafter, [], 0

    def __call__(self, tree: Any, outcome: Any, rec: Any) -> None:
        sel, pool = self.drafter.last_selection, self.drafter.last_pool
        self.pools.append(
            {
                "anchor_at": self.anchor_at,
                "tokens": [pool.tokens[i] for i in sel.order],
                "values": [round(v, 6) for v in sel.values],
                "gains": [round(g, 6) for g in sel.gains],
                "parents": list(sel.parents),
                "verified": rec.tree_size,
            }
        )
        self.anchor_at += rec.new_tokens

    def labelled(self, output: Sequence[int], whole: bool = True) -> list[dict[str, Any]]:
        """The pools with each node's acceptance read off the finished output (`path_labels`); `whole`=False
        keeps only the verified prefix (what a replay under the recording's own curve re-sizes to)."""
        out = []
        for p in self.pools:
            n = len(p["values"]) if whole else p["verified"]
            labels = path_labels(output, p["anchor_at"], p["tokens"][:n], p["parents"][:n])
            out.append(
                {
                    "values": p["values"][:n],
                    "gains": p["gains"][:n],
                    "parents": p["parents"][:n],
                    "verified": p["verified"],
                    "labels": labels,
                }
            )
        return out


def record(args: argparse.Namespace, gpu_records: Sequence[Path]) -> dict[str, Any]:
    """Run every method once and hw_tree once per cost curve (`standard_curves`) on the prompts, and keep
    what the replay needs."""
    import torch

    from baselines.hw_tree import HwTreeDrafter
    from experiments.bench import load_prompts, method_factory, model_and_engine
    from goose.engine.budget.calibration import engine_latency
    from goose.engine.core.decode import generate

    torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    table = engine_latency(engine)
    cpu = {"sizes": list(table.sizes), "seconds": list(table.seconds)}
    curves = standard_curves(cpu, gpu_records)
    prompts = load_prompts(
        loaded.tokenizer, args.model, args.benches.split(","), args.limit, args.data_dir, "auto"
    )
    methods = [m for m in args.methods.split(",") if m and m != HW_TREE]
    drafters = {m: method_factory(m, model=args.model)() for m in methods}  # one per method across prompts
    hw_set = [f"method.drafter.{o}" for o in args.hw_tree_set]
    make_hw = method_factory(HW_TREE, hw_set, model=args.model)  # composed once
    hw_by_curve = {}  # one hw_tree per curve across prompts, sized by that curve
    for name, t in curves.items():
        hw = make_hw()
        assert isinstance(hw, HwTreeDrafter)
        hw.use_latency(t)
        hw.full_pool = True  # the whole pool up to B, so that a curve added later can re-size it
        hw_by_curve[name] = hw
    out: dict[str, Any] = {
        "model": args.model,
        "dtype": str(engine.dtype).replace("torch.", ""),
        "benches": args.benches.split(","),
        "max_new_tokens": args.max_new_tokens,
        "cpu_curve": cpu,
        "pool_method": HW_TREE + (f"[{','.join(args.hw_tree_set)}]" if args.hw_tree_set else ""),
        "prompts": [],
    }
    for p in prompts:
        entry: dict[str, Any] = {"bench": p.bench, "prompt_id": p.prompt_id, "steps": {}, "hw_tree_pools": {}}
        for m, d in drafters.items():
            gen = generate(engine, d, p.ids, args.max_new_tokens)
            entry["steps"][m] = [[s.tree_size, s.new_tokens] for s in gen.steps]
        for name, hw in hw_by_curve.items():
            recorder = PoolRecorder(hw)
            gen = generate(engine, hw, p.ids, args.max_new_tokens, on_step=recorder)
            pools = recorder.labelled(gen.output_ids, whole=name == THIS_MACHINE)
            entry["hw_tree_pools"][name] = pools
        out["prompts"].append(entry)
        print(f"recorded {p.bench} {p.prompt_id}")
    return out


def hw_tree_setting(text: str) -> str:
    """One FIELD=VALUE of --hw-tree-set; several in one flag (a=1,b=2) are refused with how to pass them."""
    parts = text.split(",")
    if "=" not in text or sum("=" in p for p in parts) > 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: one FIELD=VALUE per --hw-tree-set; repeat the flag "
            "(--hw-tree-set adj_width=10 --hw-tree-set row_value=false)"
        )
    return text


def add_hw_tree_set(ap: argparse.ArgumentParser) -> None:
    """--hw-tree-set FIELD=VALUE (repeatable): an HwTreeConfig field, as `method.drafter.FIELD=VALUE`."""
    ap.add_argument(
        "--hw-tree-set",
        action="append",
        type=hw_tree_setting,
        default=[],
        metavar="FIELD=VALUE",
        help="an HwTreeConfig field for hw_tree, e.g. adj_width=10 (repeatable)",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--benches", default="humaneval,gsm8k,mtbench")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", default=DEFAULT_METHODS, help="fixed-budget methods replayed beside hw_tree")
    ap.add_argument("--threads", type=int, default=1)
    add_hw_tree_set(ap)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument(
        "--gpu-record",
        action="append",
        default=None,
        help="a make gpu-check record (repeatable; default: every results/gpu/*/gpu_check.json)",
    )
    ap.add_argument("--out", default="results/studies/hw_tree/gpu_cost_replay")
    ap.add_argument("--replay-only", action="store_true", help="project <out>/replay.json(.xz) again")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse_args(argv)
    records = [Path(p) for p in args.gpu_record] if args.gpu_record else GPU_RECORDS
    missing = [str(p) for p in records if not p.is_file()]
    if missing:  # refused before minutes of recording
        raise SystemExit(f"gpu_cost_replay: no GPU record at {', '.join(missing)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.replay_only:
        rec = read_json(out / "replay.json")
    else:
        rec = record(args, records)
        write_json_xz(out / "replay.json", rec)
    table = project(rec, standard_curves(rec.get("cpu_curve"), records))
    (out / "projection.json").write_text(json.dumps(table, indent=1))
    text = markdown(table, rec)
    (out / "projection.md").write_text(text + "\n")
    print(text)
    return table


if __name__ == "__main__":
    main()
