"""The verification papers' claims (VERIFY.md; arXiv 2602.16994, 2602.16961) answered without sampling noise:
each sampled-draft row carries, for every verifier exact on its trees, Σ E[accepted] on the very trees
verified (`exact_accepted`, goose.engine.core.verify.expected), so verifiers are compared on identical
drafts and only the prompts vary.

A claim compares block efficiencies β = 1 + Σ E[accepted] / steps (tokens per verification step) per
prompt: two verifiers on one drafter's rows (paired tree for tree), or two draft shapes under one verifier
(paired by prompt and seed; the trees differ). Its effect is the mean over prompts of β_left / β_right − 1,
with a 95 % interval from a bootstrap over prompts (`BOOTSTRAP` resamples, seeded); the verdict is
"reproduced" when the interval lies above 0, "refuted" when below, else "too small to tell", with the
number of prompts that would make the interval's half-width the size of the effect (n · (half-width /
|effect|)²). Efficiency by depth: P(accepted ≥ d) per step, per verifier, from `exact_reach`; the claim
that OT-based verification gains near the root and loses deeper is tested on it the same way (`DEPTH_CLAIMS`:
the ratio of two verifiers' summed P(accepted ≥ d) over a band of depths, per tree).
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd

from analysis.load import Results
from analysis.report import Output, Skip, cli, write_table
from goose.records.results import read_rows

DESCRIPTION = __doc__.splitlines()[0]
BOOTSTRAP = 2000
SEED = 0
SHAPE_SUFFIXES = ("tree", "chain", "iid", "delayed", "dynamic")
DEPTHS = 6  # depths shown in the efficiency-by-depth table

# (claim, left (shape, verifier), right (shape, verifier)); the same shape on both sides: paired per tree
CLAIMS = [
    ("Traversal ≥ RRS on trees", ("tree", "traversal"), ("tree", "rrs")),
    ("Traversal ≥ RRS on i.i.d. paths", ("iid", "traversal"), ("iid", "rrs")),
    ("Block ≥ token-level on chains", ("chain", "block"), ("chain", "rrs")),
    ("GBV ≥ token-level on i.i.d. paths", ("iid", "gbv"), ("iid", "rrs_iid")),
    ("GBV ≥ Traversal on i.i.d. paths", ("iid", "gbv"), ("iid", "traversal")),
    ("GBV (K paths) ≥ Block (one chain)", ("iid", "gbv"), ("chain", "block")),
    ("delayed ≥ root i.i.d. (Traversal)", ("delayed", "traversal"), ("iid", "traversal")),
    ("delayed ≥ root i.i.d. (GBV)", ("delayed", "gbv"), ("iid", "gbv")),
    ("dynamic delay ≥ static delay (GBV)", ("dynamic", "gbv"), ("delayed", "gbv")),
    ("dynamic delay ≥ static delay (Traversal)", ("dynamic", "traversal"), ("delayed", "traversal")),
]

# "OT-based verification gains near the root and loses deeper" (arXiv 2602.16994): (claim, shape, left
# verifier, right verifier, depths [first, last) of P(accepted ≥ d), None: to the deepest), paired per tree;
# the effect is the ratio of the summed reach over those depths (E[accepted tokens at those depths] per step)
DEPTH_CLAIMS = [
    ("RRS ≥ Traversal at depth 1 on trees (OT near the root)", "tree", "rrs", "traversal", (0, 1)),
    ("Traversal ≥ RRS at depths ≥ 3 on trees (OT deeper)", "tree", "traversal", "rrs", (2, None)),
    ("RRS ≥ Traversal at depth 1 on i.i.d. paths", "iid", "rrs", "traversal", (0, 1)),
    ("Traversal ≥ RRS at depths ≥ 3 on i.i.d. paths", "iid", "traversal", "rrs", (2, None)),
]


def drafter_and_shape(method: str, config: dict | None) -> tuple[str, str]:
    """(drafter, draft shape): `stand_chain` -> (stand, chain); a method without a shape suffix drafts trees;
    a delayed tree with the dynamic delay (`branch_below` > 0) is the shape `dynamic`."""
    shape = str((config or {}).get("shape", "tree"))
    if shape == "delayed" and float((config or {}).get("branch_below", 0.0)) > 0.0:
        shape = "dynamic"
    for suffix in SHAPE_SUFFIXES:
        if method.endswith("_" + suffix):
            return method[: -len(suffix) - 1], shape
    return method, shape


DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def model_label(row: dict) -> str:
    """`smollm2-135m fp32`: the model and the dtype its distributions were computed in."""
    dtype = row.get("dtype")
    return f"{row['model']} {DTYPE_SHORT.get(dtype, dtype)}" if dtype else str(row["model"])


def exact_rows(folder: Path) -> pd.DataFrame:
    """One row per (model, temperature, bench, drafter, shape, prompt, seed) of the rows under `folder` that
    carry exact expectations: steps, β per verifier, and reach per verifier."""
    out = []
    for path in sorted(folder.rglob("*.jsonl*")):
        if path.name.endswith((".lock", ".state")):
            continue
        for r in read_rows(path):
            if r.get("status") != "ok" or not r.get("exact_steps") or r.get("repeat") is None:
                continue
            drafter, shape = drafter_and_shape(r["method"], r.get("method_config"))
            steps = int(r["exact_steps"])
            out.append(
                {
                    "model": model_label(r),
                    "temperature": float(r["temperature"]),
                    "top_p": float(r.get("top_p") or 1.0),
                    "bench": r["bench"],
                    "drafter": drafter,
                    "shape": shape,
                    "unit": f"{r['bench']}/{r['prompt_id']}#{r.get('sample_seed')}",
                    "steps": steps,
                    **{f"beta_{v}": 1.0 + e / steps for v, e in r["exact_accepted"].items()},
                    **{f"reach_{v}": [x / steps for x in d] for v, d in r["exact_reach"].items()},
                }
            )
    return pd.DataFrame(out)


def bootstrap_interval(effects: list[float], seed: int = SEED) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `effects` and its 95 % percentile bootstrap interval."""
    n = len(effects)
    mean = sum(effects) / n
    rng = random.Random(seed)
    means = sorted(sum(effects[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOTSTRAP))
    return mean, means[int(0.025 * BOOTSTRAP)], means[int(0.975 * BOOTSTRAP) - 1]


def verdict(mean: float, low: float, high: float, n: int) -> str:
    if low > 0.0:
        return "reproduced"
    if high < 0.0:
        return "refuted"
    half = (high - low) / 2
    need = n * (half / abs(mean)) ** 2 if mean else float("inf")
    return f"too small to tell (~{need:.0f} prompts)" if need < 1e6 else "too small to tell (no effect)"


def claim_effects(df: pd.DataFrame, left: tuple[str, str], right: tuple[str, str]) -> list[float]:
    """Per unit (prompt, seed) in both sides: β_left / β_right − 1."""
    (ls, lv), (rs, rv) = left, right
    a = df[df["shape"] == ls].set_index("unit")
    b = df[df["shape"] == rs].set_index("unit")
    if f"beta_{lv}" not in a or f"beta_{rv}" not in b:
        return []
    both = a.index.intersection(b.index)
    return [float(a.at[u, f"beta_{lv}"] / b.at[u, f"beta_{rv}"] - 1.0) for u in both]


def sampling_label(temperature: float, top_p: float) -> str:
    """`0.6`, or `1, top-p 0.9` where nucleus sampling truncates the target (and the draft) distribution."""
    return f"{temperature:g}" if top_p >= 1.0 else f"{temperature:g}, top-p {top_p:g}"


def depth_effects(df: pd.DataFrame, shape: str, left: str, right: str, depths: tuple) -> list[float]:
    """Per unit of `shape`: Σ reach_left / Σ reach_right − 1 over `depths` (units where the right side
    reaches none of them are left out)."""
    g = df[df["shape"] == shape]
    lcol, rcol = f"reach_{left}", f"reach_{right}"
    if lcol not in g or rcol not in g:
        return []
    first, last = depths
    out = []
    for lr, rr in zip(g[lcol], g[rcol], strict=True):
        if not isinstance(lr, list) or not isinstance(rr, list):
            continue
        a, b = sum(lr[first:last]), sum(rr[first:last])
        if b > 0:
            out.append(a / b - 1.0)
    return out


def claims_table(df: pd.DataFrame) -> list[list[str]]:
    rows = []
    for (model, temp, top_p, drafter), g in df.groupby(
        ["model", "temperature", "top_p", "drafter"], sort=True
    ):
        measured = [(claim, claim_effects(g, left, right)) for claim, left, right in CLAIMS]
        measured += [
            (claim, depth_effects(g, shape, lv, rv, depths)) for claim, shape, lv, rv, depths in DEPTH_CLAIMS
        ]
        for claim, effects in measured:
            if len(effects) < 2:
                continue
            mean, low, high = bootstrap_interval(effects)
            rows.append(
                [
                    model,
                    sampling_label(temp, top_p),
                    drafter,
                    claim,
                    str(len(effects)),
                    f"{100 * mean:+.2f}%",
                    f"[{100 * low:+.2f}, {100 * high:+.2f}]",
                    verdict(mean, low, high, len(effects)),
                ]
            )
    return rows


def depth_table(df: pd.DataFrame) -> list[list[str]]:
    """Mean over prompts of P(accepted ≥ d) per step, per (model, T, drafter, shape, verifier)."""
    rows = []
    for (model, temp, top_p, drafter, shape), g in df.groupby(
        ["model", "temperature", "top_p", "drafter", "shape"], sort=True
    ):
        for col in sorted(c for c in g.columns if c.startswith("reach_")):
            reaches = [r for r in g[col] if isinstance(r, list)]
            if not reaches:
                continue
            by_depth = [
                sum(r[d] if d < len(r) else 0.0 for r in reaches) / len(reaches) for d in range(DEPTHS)
            ]
            rows.append(
                [
                    model,
                    sampling_label(temp, top_p),
                    drafter,
                    shape,
                    col[len("reach_") :],
                    *(f"{x:.3f}" for x in by_depth),
                ]
            )
    return rows


def build(res: Results, out: Path) -> Output:
    folder = res.records_dir() / "studies" / "verifier_claims"
    df = exact_rows(folder) if folder.is_dir() else pd.DataFrame()
    if df.empty:
        raise Skip(f"no rows with exact expectations under {folder}: run `make verifier-claims`")
    output = Output()
    n = df.groupby(["model", "temperature", "top_p"])["unit"].nunique()
    scope = "; ".join(f"{m} T={sampling_label(t, p)}: {k} prompts" for (m, t, p), k in n.items())
    header = ["model", "T", "drafter", "claim", "prompts", "effect (β ratio − 1)", "95 % CI", "verdict"]
    output.files += write_table(
        out, "claims", header, claims_table(df), caption=f"Verifier claims on identical drafts ({scope})"
    )
    depth_header = [
        "model",
        "T",
        "drafter",
        "shape",
        "verifier",
        *(f"P(acc ≥ {d + 1})" for d in range(DEPTHS)),
    ]
    output.files += write_table(
        out,
        "efficiency_by_depth",
        depth_header,
        depth_table(df),
        caption="Efficiency by depth: P(accepted ≥ d) per step, mean over prompts, exact per tree",
    )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
