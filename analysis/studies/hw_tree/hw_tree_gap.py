"""Where the wall-clock gap between a tree method and its own sources comes from (the hardware-aware tree's
question, baselines/hw_tree/): per run × model × bench × method, τ, the mean verified tree, the step's
time split and what the size rule cut.

Methods: Goose (also with a run-long table), SuffixDecoding, OPT-Tree and Token Recycling under budget=auto
(`*_auto`), PLD, and hw_tree (fixed and auto), wherever their rows exist: the `make bench` runs under
<records>/bench/<run>/ (all repeats pooled) and the rows of --results. Columns: τ (ratio of sums); mean
verified tree = 1 + drafted nodes offered per step; ms per step of drafting, forward, walk and the
drafter's update, and the share of the step outside the forward (drafting + bookkeeping); the size rule's
cut: for `*_auto` rows
(goose.engine.budget.auto_budget stats) the drafter's proposed nodes per step, the nodes cut per step and
the share of steps cut to the anchor alone; for hw_tree the best-first pool per step and the nodes its
latency rule left out; the forward against the run's latency curve (`budget_latency`, calibrated at one
KV length, 256 by default): Σ measured forward / Σ t(n) over the verified tree sizes, how far a size rule
working from that curve misjudges a step (next to the mean prompt tokens: a longer prompt attends over more
KV). Per prompt, ms of the prefill and of the setup (the wall time outside the prefill and the steps: the
drafter's `begin`, e.g. the adjacency table's harvest of the prompt's logits, which also makes the prefill
compute logits at every prompt position rather than the last). Steps = forward calls minus the prefill.
Wall-clock is machine-dependent: read it next to the run's device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.load import Results
from analysis.names import BENCH_ORDER, bench_name, method_name, model_name, order_key
from analysis.report import Output, Skip, cli, fmt, write_table
from analysis.wall_clock import run_folders
from goose.records.cost_curve import CostCurve
from goose.records.results import read_rows

DESCRIPTION = __doc__.splitlines()[0]
GAP_METHODS = [
    "goose_auto",
    "goose_persistent_auto",
    "suffix_auto",
    "pld",
    "opt_tree_auto",
    "tr_auto",
    "hw_tree",
    "hw_tree_auto",
    "goose",
]
PHASES = ("draft_s", "forward_s", "walk_s", "update_s")


def gap_method_name(method: str) -> str:
    """`goose_auto` -> "Goose auto", `hw_tree` -> "hw_tree" (names of analysis.load where known)."""
    base, auto = (method[: -len("_auto")], " auto") if method.endswith("_auto") else (method, "")
    return method_name(base) + auto


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if v != v else v


def row_curve(row: Mapping[str, Any]) -> CostCurve | None:
    """The latency curve t(n) a budget=auto row was sized on (`budget_latency`, its first KV), or None."""
    table = row.get("budget_latency")
    if not isinstance(table, Mapping) or not table.get("sizes"):
        return None
    return CostCurve(list(table["sizes"]), {0: list(table["seconds"])})


def curve_seconds(row: Mapping[str, Any]) -> float | None:
    """Σ t(n) over the row's verified tree sizes on its own latency curve (None without one)."""
    curve, sizes = row_curve(row), row.get("step_tree_size")
    if curve is None or not sizes:
        return None
    return sum(curve.t(int(n), 0) for n in sizes)


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """τ, mean verified tree, ms per step per phase, off-forward share and the size rule's cut, pooled
    over `rows` (one method's rows of one bench)."""
    steps = sum(max(0, int(r.get("forward_calls") or 0) - 1) for r in rows)
    tokens = sum(int(r.get("generated_tokens") or 0) for r in rows)
    calls = sum(int(r.get("forward_calls") or 0) for r in rows)
    out: dict[str, float] = {"prompts": len(rows), "steps": steps, "tau": tokens / calls if calls else 0.0}
    offered = sum(sum((r.get("offered") or {}).values()) for r in rows)
    out["tree"] = 1.0 + offered / steps if steps else float("nan")
    tot = {p: sum(_num(r.get(p)) for r in rows) for p in PHASES}
    verify = sum(_num(r.get("verify_s")) for r in rows)
    step_s = tot["draft_s"] + verify + tot["update_s"]
    for p in PHASES:
        out[p.removesuffix("_s") + "_ms"] = 1e3 * tot[p] / steps if steps else float("nan")
    out["off_forward"] = (step_s - tot["forward_s"]) / step_s if step_s and tot["forward_s"] else float("nan")
    out["prompt_tokens"] = sum(_num(r.get("prompt_tokens")) for r in rows) / len(rows) if rows else 0.0
    prefill = sum(_num(r.get("prefill_s")) for r in rows)
    setup = sum(_num(r.get("wall_time_s")) for r in rows) - prefill - step_s
    out["prefill_ms"] = 1e3 * prefill / len(rows) if rows else float("nan")
    out["setup_ms"] = 1e3 * setup / len(rows) if rows else float("nan")
    timed = [(r, curve_seconds(r)) for r in rows]
    timed = [(r, c) for r, c in timed if c]
    out["forward_vs_curve"] = (
        sum(_num(r.get("forward_s")) for r, _ in timed) / sum(c for _, c in timed) if timed else float("nan")
    )
    stats = [r.get("drafter_stats") if isinstance(r.get("drafter_stats"), Mapping) else {} for r in rows]

    def total(key: str) -> float:
        return sum(_num(s.get(key)) for s in stats)

    nan = float("nan")
    out["proposed"] = out["cut"] = out["cut_to_ar"] = nan
    if any("auto_nodes_proposed" in s for s in stats) and steps:
        proposed, verified = total("auto_nodes_proposed"), total("auto_nodes_verified")
        trees = total("auto_trees")
        out["proposed"] = 1.0 + proposed / steps - trees / steps  # the drafter's tree, anchor included
        out["cut"] = (proposed - verified) / steps
        out["cut_to_ar"] = total("auto_cut_to_ar") / steps
    if any("hw_pool_nodes" in s for s in stats) and steps:
        pool, verified = total("hw_pool_nodes"), total("hw_verified_nodes")
        out["proposed"] = pool / steps
        out["cut"] = (pool - verified) / steps
        out["cut_to_ar"] = total("route_ar") / steps
    return out


def gap_table(row_sets: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """One record per (run, model, bench, method in GAP_METHODS) of greedy ok rows."""
    out = []
    for run, rows in row_sets:
        rows = [
            r
            for r in rows
            if r.get("status", "ok") == "ok"
            and not (r.get("temperature") or 0.0)
            and r.get("method") in GAP_METHODS
        ]
        groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for r in rows:
            groups.setdefault((r["model"], r["bench"], r["method"]), []).append(r)
        models = sorted({m for m, _, _ in groups})
        for model in models:
            for bench in order_key({b for m, b, _ in groups if m == model}, BENCH_ORDER):
                for method in GAP_METHODS:
                    g = groups.get((model, bench, method))
                    if g:
                        out.append(
                            {"run": run, "model": model, "bench": bench, "method": method, **summarise(g)}
                        )
    return out


def row_sets(res: Results) -> list[tuple[str, list[dict[str, Any]]]]:
    """The `make bench` runs under the records (`analysis.wall_clock.run_folders`, every repeat) and
    the rows of --results."""
    sets = []
    for _, run_dir, _ in run_folders(res.records_dir()):
        rows = [r for r in read_rows(run_dir) if not r.get("reference_pass")]
        if rows:
            sets.append((str(run_dir.relative_to(res.records_dir())), rows))
    if not res.rows.empty:
        sets.append((Path(res.source).name, res.rows.to_dict("records")))
    return sets


def build(res: Results, out: Path) -> Output:
    table = gap_table(row_sets(res))
    if not table:
        raise Skip("no rows of goose_auto, suffix_auto, pld or hw_tree (run `python -m experiments.bench`)")
    body = [
        [
            t["run"],
            model_name(t["model"]),
            bench_name(t["bench"]),
            gap_method_name(t["method"]),
            t["prompts"],
            fmt(t["tau"]),
            fmt(t["tree"], 1),
            fmt(t["draft_ms"], 2),
            fmt(t["forward_ms"], 2),
            fmt(t["forward_vs_curve"], 2),
            fmt(t["prompt_tokens"], 0),
            fmt(t["prefill_ms"], 1),
            fmt(t["setup_ms"], 1),
            fmt(t["walk_ms"], 2),
            fmt(t["update_ms"], 2),
            fmt(100 * t["off_forward"], 1) + "%",
            fmt(t["proposed"], 1),
            fmt(t["cut"], 1),
            fmt(100 * t["cut_to_ar"], 0) + "%",
        ]
        for t in table
    ]
    files = write_table(
        out,
        "hw_tree_gap",
        [
            "Run",
            "Model",
            "Bench",
            "Method",
            "n",
            "τ",
            "tree",
            "draft ms",
            "forward ms",
            "forward / curve",
            "prompt tokens",
            "prefill ms",
            "setup ms",
            "walk ms",
            "update ms",
            "off-forward",
            "proposed",
            "cut / step",
            "steps to AR",
        ],
        body,
        "τ, mean verified tree, step time split and what the size rule cut, per method",
        notes=[
            "tree = 1 + drafted nodes per step; ms are per verification step; off-forward = share of the "
            "step outside the verification forward (drafting + walk + update).",
            "proposed / cut / steps to AR: for budget=auto rows the drafter's tree before the cut, the nodes "
            "cut and the steps cut to the anchor alone; for hw_tree the best-first pool, the nodes its "
            "latency rule left out and the steps it verified the anchor alone.",
            "forward / curve: the measured forward over the run's latency curve t(n) summed over the "
            "verified sizes (calibrated at one KV length, 256 by default; above 1: steps cost more than the size rule assumed).",
            "Wall-clock is machine-dependent; `make bench` runs pool their repeats.",
        ],
    )
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
