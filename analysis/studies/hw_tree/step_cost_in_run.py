"""What a verification step of n nodes cost inside a run, against the curve budget=auto sized it on.

budget=auto calibrates t(n) at start-up (goose.engine.budget.calibration: a few timings per size after a
synthetic cache of `kv_len` tokens) and every size rule maximises E[committed | b] / t(b) on it. The rows
keep each prompt's verification seconds (`verify_s`: forward and walk) and every step's tree size, so the
in-run price of each size is the least-squares solution of

    verify_s = Σ_n c_n · steps_n + β · Σ_steps (kv − kv₀) + γ · Σ_steps (n − 1)(kv − kv₀)

over one run's rows (every method, bench and repeat pooled; kv = the step's cache length, prompt plus
committed tokens; kv₀ = the curve's KV): c_n is t(n) at the curve's cache length as the run paid it, β and
γ what the anchor and each further node pay per cached token. Sizes verified fewer than `MIN_STEPS` times
are priced at the curve and left out of the table. A size whose c_n lies well above its calibrated t(n)
was chosen for a price it did not have: the rule picks the sizes whose few start-up timings came out low.
Wall-clock is machine-dependent: read it next to the run's device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analysis.load import Results
from analysis.report import Output, Skip, cli, fmt, write_table
from analysis.studies.hw_tree.hw_tree_gap import row_curve, row_sets

DESCRIPTION = __doc__.splitlines()[0]
MIN_STEPS = 300


def step_features(row: Mapping[str, Any], kv0: int) -> tuple[dict[int, int], float, float]:
    """(steps per tree size, Σ (kv − kv₀), Σ (n − 1)(kv − kv₀)) of one row, kv in thousands of tokens."""
    counts: dict[int, int] = {}
    kv = int(row.get("prompt_tokens") or 0)
    anchor_kv = extra_kv = 0.0
    for n, accepted in zip(row.get("step_tree_size") or [], row.get("step_accepted") or [], strict=False):
        n = int(n)
        counts[n] = counts.get(n, 0) + 1
        anchor_kv += (kv - kv0) / 1e3
        extra_kv += (n - 1) * (kv - kv0) / 1e3
        kv += int(accepted) + 1
    return counts, anchor_kv, extra_kv


def fit(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The in-run price per frequent size (seconds at the curve's KV), the KV terms and the calibrated
    curve, from the greedy ok rows that carry a curve and their step sizes."""
    rows = [
        r for r in rows if r.get("status", "ok") == "ok" and r.get("step_tree_size") and r.get("verify_s")
    ]
    with_curve = [(r, c) for r in rows if (c := row_curve(r)) is not None]
    if not with_curve:
        return None
    curve, kv0 = with_curve[0][1], int(with_curve[0][0]["budget_latency"].get("kv_len") or 256)
    feats = [step_features(r, kv0) for r, _ in with_curve]
    total: dict[int, int] = {}
    for counts, _, _ in feats:
        for n, k in counts.items():
            total[n] = total.get(n, 0) + k
    sizes = sorted(n for n, k in total.items() if k >= MIN_STEPS)
    if not sizes:
        return None
    x = np.zeros((len(feats), len(sizes) + 2))
    y = np.zeros(len(feats))
    for i, ((counts, anchor_kv, extra_kv), (r, _)) in enumerate(zip(feats, with_curve, strict=True)):
        known = sum(k * curve.t(n, 0) for n, k in counts.items() if n not in sizes)
        x[i, : len(sizes)] = [counts.get(n, 0) for n in sizes]
        x[i, -2:] = anchor_kv, extra_kv
        y[i] = float(r["verify_s"]) - known
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return {
        "kv0": kv0,
        "rows": len(feats),
        "sizes": sizes,
        "steps": [total[n] for n in sizes],
        "in_run": coef[: len(sizes)].tolist(),
        "curve": [curve.t(n, 0) for n in sizes],
        "anchor_per_kkv": float(coef[-2]),
        "node_per_kkv": float(coef[-1]),
    }


def build(res: Results, out: Path) -> Output:
    body = []
    notes = []
    for run, rows in row_sets(res):
        greedy = [r for r in rows if not (r.get("temperature") or 0.0)]
        by_model: dict[str, list[Mapping[str, Any]]] = {}
        for r in greedy:
            by_model.setdefault(str(r.get("model")), []).append(r)
        for model, model_rows in sorted(by_model.items()):
            f = fit(model_rows)
            if f is None:
                continue
            for n, steps, paid, cal in zip(f["sizes"], f["steps"], f["in_run"], f["curve"], strict=True):
                body.append([run, model, n, steps, fmt(1e3 * cal, 1), fmt(1e3 * paid, 1), fmt(paid / cal, 2)])
            notes.append(
                f"{run} {model}: {f['rows']} rows, KV₀ = {f['kv0']}; per 1,000 cached tokens more a step pays "
                f"{fmt(1e3 * f['anchor_per_kkv'], 2)} ms and each node past the anchor "
                f"{fmt(1e3 * f['node_per_kkv'], 2)} ms more"
            )
    if not body:
        raise Skip("no rows with a budget=auto curve and step sizes (run `python -m experiments.bench`)")
    files = write_table(
        out,
        "step_cost_in_run",
        ["Run", "Model", "tree size", "steps", "calibrated ms", "in-run ms", "in-run / calibrated"],
        body,
        "Verification step cost per tree size: the start-up curve against the run's own steps",
        notes=[
            *notes,
            f"in-run ms: least-squares price of a step of that size at the curve's KV (KV₀), from every row's "
            f"verify_s and step sizes, the cache length's share taken out (analysis/studies/hw_tree/step_cost_in_run.py); "
            f"sizes with fewer than {MIN_STEPS} steps are priced at the curve.",
            "Wall-clock is machine-dependent; `make bench` runs pool their repeats.",
        ],
    )
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
