"""Calibration of the hardware-aware tree's acceptance estimates (baselines/hw_tree/): predicted against
observed acceptance of the verified nodes, per tenth of the predicted P(path accepted).

Each hw_tree row carries, in its drafter stats, per bin of the predicted probability the verified drafted
nodes (`hw_calib_nodes`), the accepted ones (`hw_calib_accepted`) and the predictions' sum
(`hw_calib_predicted`); the counts are summed over the rows of each (run, model, method) and bench
(all benches pooled in the figure). A calibrated estimator puts every bin on the diagonal: mean predicted =
observed share accepted. Rows: the `make bench` runs under <records>/bench/ and the rows of --results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.load import Results
from analysis.names import model_name
from analysis.report import Output, Skip, cli, fmt, save_figure, write_table
from analysis.studies.hw_tree.hw_tree_gap import row_sets

DESCRIPTION = __doc__.splitlines()[0]
KEYS = ("hw_calib_nodes", "hw_calib_accepted", "hw_calib_predicted")


def pooled_bins(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[float]] | None:
    """The calibration counts summed over `rows` (None if no row carries them)."""
    tot: dict[str, list[float]] | None = None
    for r in rows:
        stats = r.get("drafter_stats")
        if not isinstance(stats, Mapping) or not all(isinstance(stats.get(k), list) for k in KEYS):
            continue
        if tot is None:
            tot = {k: [0.0] * len(stats[k]) for k in KEYS}
        for k in KEYS:
            for i, v in enumerate(stats[k]):
                tot[k][i] += float(v)
    return tot


def curve(bins: Mapping[str, Sequence[float]]) -> list[dict[str, float]]:
    """Per non-empty bin: its range, nodes, mean predicted and observed acceptance."""
    n = len(bins["hw_calib_nodes"])
    out = []
    for i in range(n):
        nodes = bins["hw_calib_nodes"][i]
        if nodes <= 0:
            continue
        out.append(
            {
                "lo": i / n,
                "hi": (i + 1) / n,
                "nodes": nodes,
                "predicted": bins["hw_calib_predicted"][i] / nodes,
                "observed": bins["hw_calib_accepted"][i] / nodes,
            }
        )
    return out


def expected_calibration_error(points: Sequence[Mapping[str, float]]) -> float:
    """Σ_bins (nodes / all nodes) · |predicted − observed|."""
    total = sum(p["nodes"] for p in points)
    return sum(p["nodes"] * abs(p["predicted"] - p["observed"]) for p in points) / total if total else 0.0


def greedy_ok(row: Mapping[str, Any]) -> bool:
    """A finished row at T = 0: the rows whose counts the calibration and the row value pool."""
    return row.get("status", "ok") == "ok" and not (row.get("temperature") or 0.0)


def calibration_sets(
    sets: Iterable[tuple[str, Sequence[Mapping[str, Any]]]],
) -> list[tuple[str, str, str, list[dict[str, float]]]]:
    """(run, model, method, curve) per run × model × method with calibration counts, greedy ok rows."""
    out = []
    for run, rows in sets:
        groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for r in rows:
            if greedy_ok(r):
                groups.setdefault((r.get("model", "?"), r.get("method", "?")), []).append(r)
        for (model, method), g in sorted(groups.items()):
            bins = pooled_bins(g)
            if bins is not None and sum(bins["hw_calib_nodes"]) > 0:
                out.append((run, model, method, curve(bins)))
    return out


def bench_totals(
    sets: Iterable[tuple[str, Sequence[Mapping[str, Any]]]],
) -> list[tuple[str, str, str, str, list[dict[str, float]]]]:
    """(run, model, method, bench, curve) per run × model × method × bench, greedy ok rows: whether the
    estimates overrate the nodes of one benchmark although they are calibrated over all of them."""
    out = []
    for run, rows in sets:
        by_bench: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            by_bench.setdefault(str(r.get("bench", "?")), []).append(r)
        for bench, g in sorted(by_bench.items()):
            out += [
                (run, model, method, bench, pts) for _, model, method, pts in calibration_sets([(run, g)])
            ]
    return out


def bench_note(run: str, model: str, method: str, bench: str, points: Sequence[Mapping[str, float]]) -> str:
    nodes = sum(p["nodes"] for p in points)
    predicted = sum(p["nodes"] * p["predicted"] for p in points)
    accepted = sum(p["nodes"] * p["observed"] for p in points)
    ratio = predicted / accepted if accepted else float("inf")
    return (
        f"{run} {model} {method} {bench}: {int(nodes)} verified nodes, Σ predicted {predicted:.0f} against "
        f"{accepted:.0f} accepted ({ratio:.2f}×), ECE {fmt(expected_calibration_error(points), 3)}"
    )


def row_value_notes(sets: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    """Per run × model × method × bench (greedy ok rows): the rows that only rejected nodes wrote into the
    adjacency table (`hw_rows_explored`), the accepted nodes drafted from them (`hw_rows_credit`), and
    their ratio, the observed value g of a new row that hw_tree's `row_value` learns."""
    out = []
    for run, rows in sets:
        tot: dict[tuple[str, str, str], list[float]] = {}
        for r in rows:
            stats = r.get("drafter_stats")
            if not greedy_ok(r) or not isinstance(stats, Mapping) or "hw_rows_explored" not in stats:
                continue
            key = (str(r.get("model", "?")), str(r.get("method", "?")), str(r.get("bench", "?")))
            acc = tot.setdefault(key, [0.0, 0.0])
            acc[0] += float(stats["hw_rows_explored"])
            acc[1] += float(stats.get("hw_rows_credit", 0))
        for (model, method, bench), (explored, credit) in sorted(tot.items()):
            g = fmt(credit / explored, 3) if explored else "—"
            out.append(
                f"{run} {model} {method} {bench}: {int(explored)} rows written only by rejected nodes, "
                f"{int(credit)} nodes accepted from them (g = {g} a row)"
            )
    return out


def build(res: Results, out: Path) -> Output:
    sets = row_sets(res)  # every bench run's rows, read from disk once
    found = calibration_sets(sets)
    if not found:
        raise Skip("no hw_tree rows with calibration counts (run method=hw_tree)")
    body = []
    for run, model, method, points in found:
        for p in points:
            body.append(
                [
                    run,
                    model_name(model),
                    method,
                    f"[{p['lo']:.1f}, {p['hi']:.1f})",
                    int(p["nodes"]),
                    fmt(p["predicted"], 3),
                    fmt(p["observed"], 3),
                ]
            )
    eces = [
        f"{run} {model} {method}: ECE {fmt(expected_calibration_error(pts), 3)}"
        for run, model, method, pts in found
    ]
    row_notes = row_value_notes(sets)
    files = write_table(
        out,
        "hw_tree_calibration",
        ["Run", "Model", "Method", "predicted bin", "nodes", "mean predicted", "observed"],
        body,
        "hw_tree: predicted P(node accepted) against the observed share, verified nodes, benches pooled",
        notes=[
            *eces,
            "ECE = node-weighted mean |predicted − observed| over the bins.",
            "Per benchmark (Σ predicted over Σ accepted above 1: the estimates overrate that benchmark's "
            "nodes):",
            *(bench_note(*b) for b in bench_totals(sets)),
            *(
                ["The value of a new adjacency-table row (hw_tree's row_value), per benchmark:", *row_notes]
                if row_notes
                else []
            ),
        ],
    )
    files += _figure(found, out)
    return Output(files)


def _figure(found, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 4.0), constrained_layout=True)
    ax.plot([0, 1], [0, 1], color="#999999", lw=1, ls="--", label="calibrated")
    for run, model, method, points in found:
        ax.plot(
            [p["predicted"] for p in points],
            [p["observed"] for p in points],
            marker="o",
            label=f"{method} ({model_name(model)}, {run})",
        )
    ax.set_xlabel("predicted P(node accepted)")
    ax.set_ylabel("observed share accepted")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title("hw_tree calibration")
    return save_figure(fig, out, "hw_tree_calibration")


if __name__ == "__main__":
    cli(build, DESCRIPTION)
