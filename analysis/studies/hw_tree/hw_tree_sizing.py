"""The hardware-aware tree's size rule against its outcomes (baselines/hw_tree/; Sequoia §3.3's b* =
argmax E[committed | b] / t(b)): per bucket of the verified size b, what the rule predicted the drafted nodes
would accept, what they accepted, and what the tree's first half (the ⌈b/2⌉ nodes a smaller tree would
have kept) accepted, with the tokens committed per millisecond of the cost curve for both.

The estimates can be right on average and still overrate the steps the rule grows: a larger tree is chosen
where its estimate looks high. Where the first half commits more per curve millisecond than the whole
tree, the second half did not pay for itself even by the rule's own curve. Rows: hw_tree rows at T = 0
with the drafter stats `hw_size_*` (baselines.hw_tree.acceptance.SizeOutcomes), from the `make bench` runs
under <records>/bench/ and --results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.load import Results
from analysis.names import bench_name, model_name
from analysis.report import Output, Skip, cli, fmt, write_table
from analysis.studies.hw_tree.hw_tree_calibration import greedy_ok
from analysis.studies.hw_tree.hw_tree_gap import row_sets

DESCRIPTION = __doc__.splitlines()[0]
PREFIX = "hw_size_"  # the drafter stats: PREFIX + "buckets" (each bucket's largest size) and per-bucket sums


def pooled(rows: Iterable[Mapping[str, Any]]) -> tuple[list[int], dict[str, list[float]]] | None:
    """(bucket bounds, per field the per-bucket sums) over the greedy ok rows that carry `hw_size_*`."""
    bounds: list[int] | None = None
    tot: dict[str, list[float]] = {}
    for r in rows:
        stats = r.get("drafter_stats")
        if not greedy_ok(r) or not isinstance(stats, Mapping) or PREFIX + "buckets" not in stats:
            continue
        here = [int(b) for b in stats[PREFIX + "buckets"]]
        if bounds is None:
            bounds = here
        elif here != bounds:
            raise ValueError(f"rows with different size buckets: {bounds} and {here}")
        for key, sums in stats.items():
            if key.startswith(PREFIX) and key != PREFIX + "buckets":
                acc = tot.setdefault(key.removeprefix(PREFIX), [0.0] * len(here))
                for i, v in enumerate(sums):
                    acc[i] += float(v)
    return None if bounds is None else (bounds, tot)


def bucket_label(bounds: Sequence[int], i: int) -> str:
    lo = 1 if i == 0 else bounds[i - 1] + 1
    hi = bounds[i]
    top = f"{lo}+" if i == len(bounds) - 1 else f"{lo}–{hi}" if hi > lo else str(lo)
    return top


def per_mille(tokens: float, seconds: float) -> float | None:
    return tokens / (1e3 * seconds) if seconds > 0 else None


def bucket_rows(bounds: Sequence[int], tot: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    """Per non-empty bucket: steps, mean size, mean predicted / accepted of the whole tree and of its first
    half, and tokens committed (accepted + the bonus) per curve millisecond of each."""
    out = []
    for i in range(len(bounds)):
        steps = tot["steps"][i]
        if not steps:
            continue
        out.append(
            {
                "bucket": bucket_label(bounds, i),
                "steps": int(steps),
                "size": tot["nodes"][i] / steps,
                "predicted": tot["predicted"][i] / steps,
                "gains": tot["gains"][i] / steps,
                "accepted": tot["accepted"][i] / steps,
                "half_size": tot["half_nodes"][i] / steps,
                "half_predicted": tot["half_predicted"][i] / steps,
                "half_accepted": tot["half_accepted"][i] / steps,
                "per_ms": per_mille(steps + tot["accepted"][i], tot["cost"][i]),
                "half_per_ms": per_mille(steps + tot["half_accepted"][i], tot["half_cost"][i]),
            }
        )
    return out


def sizing_sets(sets: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[tuple[tuple[str, ...], Any]]:
    """((run, model, method, bench), bucket_rows) per group with size outcomes."""
    out = []
    for run, rows in sets:
        groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for r in rows:
            key = (str(r.get("model", "?")), str(r.get("method", "?")), str(r.get("bench", "?")))
            groups.setdefault(key, []).append(r)
        for (model, method, bench), g in sorted(groups.items()):
            found = pooled(g)
            if found is not None:
                out.append(((run, model, method, bench), bucket_rows(*found)))
    return out


def build(res: Results, out: Path) -> Output:
    found = sizing_sets(row_sets(res))
    if not found:
        raise Skip("no hw_tree rows with size outcomes (hw_size_*; run method=hw_tree at T = 0)")
    body = []
    for (run, model, method, bench), buckets in found:
        for b in buckets:
            body.append(
                [
                    run,
                    model_name(model),
                    bench_name(bench),
                    method,
                    b["bucket"],
                    b["steps"],
                    fmt(b["size"], 1),
                    fmt(b["predicted"]),
                    fmt(b["gains"]),
                    fmt(b["accepted"]),
                    fmt(b["half_size"], 1),
                    fmt(b["half_predicted"]),
                    fmt(b["half_accepted"]),
                    fmt(b["per_ms"], 3) if b["per_ms"] is not None else "—",
                    fmt(b["half_per_ms"], 3) if b["half_per_ms"] is not None else "—",
                ]
            )
    files = write_table(
        out,
        "hw_tree_sizing",
        [
            "Run",
            "Model",
            "Bench",
            "Method",
            "verified size",
            "steps",
            "mean size",
            "predicted accepted",
            "row gains",
            "accepted",
            "first half: size",
            "predicted",
            "accepted",
            "tokens / curve ms",
            "first half: tokens / curve ms",
        ],
        body,
        "hw_tree's size rule against its outcomes, per bucket of the verified size (greedy steps)",
        notes=[
            "predicted accepted: Σ P(path accepted) of the drafted nodes the rule verified, per step; row "
            "gains: what it added for new adjacency-table rows (row_value); accepted: drafted nodes accepted.",
            "first half: the tree's first ⌈b/2⌉ nodes in best-first order, the tree a smaller size would "
            "have verified; its accepted count is read off the greedy walk of the whole tree.",
            "tokens / curve ms: tokens committed (accepted + the bonus) per millisecond of the run's cost "
            "curve t(b); where the first half's is higher, the second half did not pay for itself even by "
            "the rule's own curve.",
        ],
    )
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
