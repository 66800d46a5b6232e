"""What `make bench` (experiments/bench.py) measured, summarised: each contender's `Run` on each
prompt, and from them tokens/s per repeat and per benchmark, every ratio taken within one repeat
(median [min, max] over repeats), the outputs' identity to engine AR, and each engine method's
time split; printed as the bench's closing summary (and by `--show-partial`). No model and no
timing here: the numbers come from the runs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

REFERENCE = "engine:ar"
# (numerator, denominator): the performance issue's target for that ratio of tokens/s (over all
# prompts here; analysis/performance_targets.py also checks every benchmark). Goose over prompt
# lookup is a bf16 target there, printed here for every dtype.
TARGETS = {
    ("engine:ar", "hf:greedy"): 2.0,
    ("engine:goose:auto", "engine:ar"): 2.0,
    ("engine:goose:auto", "hf:pld"): 1.5,
}
OVERHEAD_TARGET = 0.15  # drafting + bookkeeping share of an engine method's step time


@dataclass
class BenchPrompt:
    bench: str
    prompt_id: str
    ids: list[int]


@dataclass
class Run:
    """One contender on one prompt."""

    output_ids: list[int]
    seconds: float
    split: dict[str, float] | None = None  # engine methods: Generation.time_split()
    steps: int = 0
    tree_nodes: int = 0


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def fmt_spread(s: tuple[float, float, float], digits: int = 3) -> str:
    return f"{s[0]:.{digits}f} [{s[1]:.{digits}f}, {s[2]:.{digits}f}]"


def first_diff(a: list[int], b: list[int]) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def summarise(
    names: list[str], prompts: list[BenchPrompt], runs: list[list[dict[str, Run | None]]]
) -> dict[str, Any]:
    """runs[rep][prompt][contender] -> the summary (see the module docstring)."""
    ok = [
        i
        for i in range(len(prompts))
        if all(runs[r][i].get(n) is not None for r in range(len(runs)) for n in names)
    ]
    failed = sorted({prompts[i].prompt_id for i in range(len(prompts)) if i not in ok})
    benches = sorted({prompts[i].bench for i in ok}, key=lambda b: [p.bench for p in prompts].index(b))

    def tps(rep: int, name: str, bench: str | None = None) -> float:
        sel = [i for i in ok if bench is None or prompts[i].bench == bench]
        tok = sum(len(runs[rep][i][name].output_ids) for i in sel)
        sec = sum(runs[rep][i][name].seconds for i in sel)
        return tok / sec if sec else float("nan")

    reps = range(len(runs))
    tokens_per_s = {n: [tps(r, n) for r in reps] for n in names}
    per_bench_per_repeat = {b: {n: [tps(r, n, b) for r in reps] for n in names} for b in benches}
    per_bench = {b: {n: spread(v) for n, v in row.items()} for b, row in per_bench_per_repeat.items()}
    pairs = [(a, b) for (a, b) in TARGETS if a in names and b in names]
    for n in names:
        if n.startswith("engine:") and n != REFERENCE and REFERENCE in names:
            pairs.append((n, REFERENCE))
        if n.startswith("engine:") and n != REFERENCE and "hf:pld" in names:
            pairs.append((n, "hf:pld"))
    if "hf:pld" in names and "hf:greedy" in names:
        pairs.append(("hf:pld", "hf:greedy"))
    pairs = list(dict.fromkeys(pairs))
    ratios = {f"{a} / {b}": spread([tokens_per_s[a][r] / tokens_per_s[b][r] for r in reps]) for a, b in pairs}
    targets = {f"{a} / {b}": t for (a, b), t in TARGETS.items() if (a, b) in pairs}

    identical: dict[str, Any] = {}
    if REFERENCE in names:
        for n in names:
            if n == REFERENCE:
                continue
            diffs = []
            for i in ok:
                d = first_diff(runs[0][i][n].output_ids, runs[0][i][REFERENCE].output_ids)
                if d is not None:
                    diffs.append(
                        {"bench": prompts[i].bench, "prompt_id": prompts[i].prompt_id, "first_diff": d}
                    )
            identical[n] = {"identical": len(ok) - len(diffs), "prompts": len(ok), "mismatches": diffs}
        unstable = [
            prompts[i].prompt_id
            for i in ok
            if any(runs[r][i][REFERENCE].output_ids != runs[0][i][REFERENCE].output_ids for r in reps)
        ]
        identical["engine:ar across repeats"] = {"unstable_prompts": unstable}

    overhead: dict[str, Any] = {}
    for n in names:
        if not n.startswith("engine:"):
            continue
        shares, forward_share, nodes, steps, prefill = [], [], 0, 0, []
        for r in reps:
            tot = {k: sum(runs[r][i][n].split[k] for i in ok) for k in runs[r][ok[0]][n].split} if ok else {}
            step_time = tot.get("draft_s", 0) + tot.get("verify_s", 0) + tot.get("update_s", 0)
            book = tot.get("draft_s", 0) + tot.get("walk_s", 0) + tot.get("update_s", 0)
            shares.append(book / step_time if step_time else 0.0)
            forward_share.append(tot.get("forward_s", 0) / step_time if step_time else 0.0)
            wall = sum(runs[r][i][n].seconds for i in ok)
            prefill.append(tot.get("prefill_s", 0) / wall if wall else 0.0)
            nodes += sum(runs[r][i][n].tree_nodes for i in ok)
            steps += sum(runs[r][i][n].steps for i in ok)
        r0 = runs[0]
        gen = sum(len(r0[i][n].output_ids) for i in ok)
        calls = sum(r0[i][n].steps + 1 for i in ok)
        overhead[n] = {
            "bookkeeping_share": spread(shares),
            "forward_share": spread(forward_share),
            "prefill_share_of_wall": spread(prefill),
            "mean_tree_nodes": nodes / steps if steps else 0.0,
            "steps_repeat1": sum(r0[i][n].steps for i in ok),
            "tau": gen / calls if calls else 0.0,
            "split_s_repeat1": {k: sum(r0[i][n].split[k] for i in ok) for k in r0[ok[0]][n].split}
            if ok
            else {},
        }
    return {
        "prompts": len(ok),
        "failed_prompts": failed,
        "tokens_per_s": {n: spread(v) for n, v in tokens_per_s.items()},
        "tokens_per_s_per_repeat": tokens_per_s,
        "tokens_per_s_per_bench": per_bench,
        "tokens_per_s_per_bench_per_repeat": per_bench_per_repeat,
        "ratios": ratios,
        "targets": targets,
        "identical_to_engine_ar": identical,
        "overhead": overhead,
    }


def print_summary(summary: dict[str, Any], header: str) -> None:
    print(f"\n{header}")
    print(
        f"prompts completed by every contender: {summary['prompts']}; failed: {summary['failed_prompts'] or 'none'}"
    )
    print("tokens/s, median [min, max] over repeats:")
    for n, s in summary["tokens_per_s"].items():
        print(f"  {n:22s} {fmt_spread(s, 1)}")
    benches = list(summary["tokens_per_s_per_bench"])
    if len(benches) > 1:
        print("tokens/s per bench (median over repeats):")
        names = list(summary["tokens_per_s"])
        print("  " + " " * 12 + "".join(f"{n:>20s}" for n in names))
        for b in benches:
            row = summary["tokens_per_s_per_bench"][b]
            print(f"  {b:12s}" + "".join(f"{row[n][0]:20.1f}" for n in names))
    print("ratios, median [min, max] over repeats:")
    for k, s in summary["ratios"].items():
        t = summary["targets"].get(k)
        mark = "" if t is None else f"   target >= {t:g}: {'met' if s[0] >= t else 'NOT met'} (median)"
        print(f"  {k:40s} {fmt_spread(s)}{mark}")
    print(
        "engine methods: drafting + bookkeeping (draft + walk/compaction + drafter update) share of step time:"
    )
    for n, o in summary["overhead"].items():
        s = o["bookkeeping_share"]
        mark = (
            ""
            if n == REFERENCE
            else f"   target <= {OVERHEAD_TARGET:.0%}: {'met' if s[0] <= OVERHEAD_TARGET else 'NOT met'}"
        )
        print(
            f"  {n:22s} {fmt_spread(s)}  forward {o['forward_share'][0]:.3f}  prefill/wall "
            f"{o['prefill_share_of_wall'][0]:.3f}  tau {o['tau']:.2f}  mean tree {o['mean_tree_nodes']:.1f}{mark}"
        )
    ident = summary["identical_to_engine_ar"]
    if ident:
        print("outputs identical to engine:ar (repeat 1):")
        for n, v in ident.items():
            if "identical" in v:
                extra = ""
                if v["mismatches"]:
                    shown = ", ".join(
                        f"{m['bench']}/{m['prompt_id']}@{m['first_diff']}" for m in v["mismatches"][:6]
                    )
                    extra = f"   mismatches (bench/prompt@first diff): {shown}" + (
                        " ..." if len(v["mismatches"]) > 6 else ""
                    )
                verdict = f" (near-tie {v['near_tie']}, real {v['real']})" if "near_tie" in v else ""
                print(f"  {n:22s} {v['identical']}/{v['prompts']}{verdict}{extra}")
        unstable = ident.get("engine:ar across repeats", {}).get("unstable_prompts")
        if unstable:
            print(f"  engine:ar differs between repeats on: {unstable}")
    floor = summary.get("hardware_floor")
    if floor:
        f = floor["floor"]
        print(
            f"hardware floor (bandwidth {f['bandwidth_gb_s']:.1f} GB/s, matmul {f['matmul_gflop_s']:.0f} GFLOP/s, "
            f"weights {f['weight_bytes'] / 1e6:.0f} MB, mean KV length {floor['mean_kv_len']}): "
            "verification forward per step vs its floor"
        )
        for n, c in floor["contenders"].items():
            print(
                f"  {n:22s} {c['forward_ms']:.1f} ms vs floor {c['floor_ms']:.1f} ms "
                f"({c['times_floor']:.2f}x, {c['bound_by']}-bound, mean tree {c['mean_tree_nodes']:.1f})"
            )
