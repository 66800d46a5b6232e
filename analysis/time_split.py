"""Where a decoding step's time goes, per model × bench × method: drafting (building the tree),
the verification forward (inputs, mask, forward pass, argmax), the walk (greedy walk, stop rules,
KV compaction) and the drafter's update (e.g. the adjacency-table update), in ms per step, and
the shares of the step that are drafting alone and drafting + bookkeeping (everything but the
forward), i.e. the overhead a faster model cannot hide.

Sums over the prompts of each cell (main methods at their reference configs, plus `_auto` runs);
steps = forward calls minus the prefill. Rows written before the engine split verify into
forward + walk have no `forward_s`: their walk and bookkeeping columns are left empty.
Wall-clock is machine-dependent: read it next to the run's device (caption).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load import Results
from analysis.names import (
    BENCH_ORDER,
    METHOD_ORDER,
    MODEL_NAMES,
    bench_name,
    method_name,
    model_name,
    order_key,
)
from analysis.report import Output, Skip, cli, fmt, write_table

DESCRIPTION = __doc__.splitlines()[0]
PHASES = ("draft_s", "forward_s", "walk_s", "update_s")


def step_times(res: Results) -> pd.DataFrame:
    """One row per (model, bench, method) at the method's reference config: steps, ms per step of
    each phase, draft share and bookkeeping share of the step time."""
    df = res.rows
    if df.empty or "draft_s" not in df.columns:
        return pd.DataFrame()
    df = df[(df["method"] != "ar") & df["is_reference"]]
    out = []
    for (model, bench, method), g in df.groupby(["model", "bench", "method"], sort=False):
        steps = float((g["forward_calls"] - 1).clip(lower=0).sum())
        if steps <= 0:
            continue
        tot = {p: float(g[p].fillna(0).sum()) if p in g else 0.0 for p in PHASES}
        verify = float(g["verify_s"].fillna(0).sum())
        split_known = "forward_s" in g and g["forward_s"].notna().all() and tot["forward_s"] > 0
        step_s = tot["draft_s"] + verify + tot["update_s"]
        book = step_s - tot["forward_s"] if split_known else np.nan
        out.append(
            {
                "model": model,
                "bench": bench,
                "method": method,
                "prompts": len(g),
                "steps": int(steps),
                "step_ms": 1e3 * step_s / steps,
                "draft_ms": 1e3 * tot["draft_s"] / steps,
                "forward_ms": 1e3 * tot["forward_s"] / steps if split_known else np.nan,
                "walk_ms": 1e3 * tot["walk_s"] / steps if split_known else np.nan,
                "update_ms": 1e3 * tot["update_s"] / steps,
                "draft_share": tot["draft_s"] / step_s if step_s else np.nan,
                "bookkeeping_share": book / step_s if step_s else np.nan,
            }
        )
    return pd.DataFrame(out)


def build(res: Results, out: Path) -> Output:
    t = step_times(res)
    if t.empty:
        raise Skip("no method rows with a time split")
    rows = []
    for m in order_key(t["model"], list(MODEL_NAMES)):
        for b in order_key(t["bench"], BENCH_ORDER):
            for meth in order_key(t["method"], METHOD_ORDER):
                sel = t[(t["model"] == m) & (t["bench"] == b) & (t["method"] == meth)]
                for r in sel.itertuples():
                    rows.append(
                        [
                            model_name(m),
                            bench_name(b),
                            method_name(meth),
                            str(r.steps),
                            fmt(r.step_ms, 1),
                            fmt(r.draft_ms, 2),
                            fmt(r.forward_ms, 1),
                            fmt(r.walk_ms, 2),
                            fmt(r.update_ms, 2),
                            f"{100 * r.draft_share:.1f}%",
                            "—" if np.isnan(r.bookkeeping_share) else f"{100 * r.bookkeeping_share:.1f}%",
                        ]
                    )
    output = Output()
    output.files += write_table(
        out,
        "time_split",
        [
            "Model",
            "Bench",
            "Method",
            "steps",
            "ms/step",
            "draft ms",
            "forward ms",
            "walk+compact ms",
            "update ms",
            "draft share",
            "draft+bookkeeping share",
        ],
        rows,
        "Per-step time split: drafting, verification forward, walk + KV compaction, drafter update",
        [
            "ms per verification step, summed over each cell's prompts; shares are of the step time "
            "(draft + verify + update, prefill excluded).",
            res.scope(),
        ],
    )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
