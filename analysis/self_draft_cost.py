"""The layer-skip self-draft's cost and return (SWIFT, arXiv 2410.06916; VERIFY.md §6), per model ×
temperature × draft shape: the skip set the per-prompt search chose and its matchness, a draft forward's
cost relative to a full one (in sub-layers run, and in measured seconds), where a step's time goes, τ,
and the wall-clock speed-up over AR sampling of the same prompts in the same run.

Rows: the matched evaluation's (`make bench-verifiers`, analysis.studies.verifiers.verifier_eval.sampled_rows),
the self-draft under `auto` (recursive rejection sampling). Draft seconds per draft forward = Σ draft_s /
Σ draft_forwards; a verification forward's = Σ forward_s / Σ verification steps; the search's forwards run
inside prefill_s's wall time and are counted in the "prefill + search" share."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.load import Results
from analysis.report import Output, Skip, cli, fmt, write_table
from analysis.studies.verifiers.verifier_eval import drafter_and_shape, sample_keys, sampled_rows

DESCRIPTION = __doc__.splitlines()[0]


def _stat(rows: pd.DataFrame, key: str) -> pd.Series:
    return rows["drafter_stats"].map(lambda s: (s or {}).get(key))


def cost_rows(res: Results) -> list[list[str]]:
    df = sampled_rows(res)
    if df.empty or "drafter_stats" not in df:
        raise Skip("no sampled rows")
    df = df[df["verifier"].fillna("auto") == "auto"] if "verifier" in df else df
    out = []
    for (model, temp), g in df.groupby(["model", "temperature"], sort=True):
        g = g.assign(key=g["bench"] + "/" + sample_keys(g))  # AR's row of the same prompt and seed
        ar = g[g["method"] == "ar"].drop_duplicates("key").set_index("key")
        drafts = g[g["method"].str.startswith("self_draft")]
        for method, rows in drafts.groupby("method", sort=False):
            rows = rows[rows["key"].isin(ar.index)]
            if rows.empty:
                continue
            _, shape = drafter_and_shape(method, rows["method_config"].iloc[0])
            ref = ar.loc[rows["key"]]
            attn = _stat(rows, "skip_attention").map(len).mean()
            mlp = _stat(rows, "skip_mlp").map(len).mean()
            sub = _stat(rows, "sublayers_per_forward").iloc[0]
            steps = (rows["forward_calls"] - 1).sum()
            draft_fwd = rows["draft_s"].sum() / max(_stat(rows, "draft_forwards").sum(), 1)
            verify_fwd = rows["forward_s"].sum() / max(steps, 1)
            wall = rows["wall_time_s"].sum()
            out.append(
                [
                    model,
                    f"{float(temp):g}",
                    shape,
                    f"{attn:.1f} attn + {mlp:.1f} MLP of {sub}",
                    fmt(_stat(rows, "skip_matchness").mean()),
                    fmt(_stat(rows, "draft_sublayers_per_forward").iloc[0] / sub),
                    fmt(draft_fwd / verify_fwd),
                    fmt(_stat(rows, "draft_cost_per_step").mean()),
                    f"{100 * rows['draft_s'].sum() / wall:.0f}%",
                    f"{100 * rows['forward_s'].sum() / wall:.0f}%",
                    f"{100 * rows['prefill_s'].sum() / wall:.0f}%",
                    fmt(rows["generated_tokens"].sum() / rows["forward_calls"].sum()),
                    fmt(
                        (rows["generated_tokens"].sum() / wall)
                        / (ref["generated_tokens"].sum() / ref["wall_time_s"].sum())
                    ),
                    str(len(rows)),
                ]
            )
    if not out:
        raise Skip("no self-draft rows beside AR sampling")
    return out


def build(res: Results, out: Path) -> Output:
    files = write_table(
        out,
        "self_draft_cost",
        [
            "Model",
            "T",
            "Shape",
            "Skip set (mean)",
            "Matchness",
            "Draft fwd / full (sub-layers)",
            "Draft fwd / verify fwd (s)",
            "Draft fwds' worth per step",
            "Drafting",
            "Verifying",
            "Prefill + search",
            "τ",
            "× AR sampling",
            "Prompts",
        ],
        cost_rows(res),
        "The layer-skip self-draft: skip set, draft cost against a full forward, time split, τ and speed-up",
        notes=[
            "verifier auto (recursive rejection sampling); time shares of the rows' summed wall seconds.",
            "draft fwds' worth per step = sub-layers run drafting per verification step / 2L "
            "(draft_cost_per_step).",
        ],
    )
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
