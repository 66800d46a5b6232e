"""Reproduction table: our numbers beside the paper's published ones (analysis/paper_values.yaml,
each with its source), with the ratio ours / paper and where ours falls against the paper's range.

Our side is computed with the same functions as the other figures: p_s/p_t from
`heterogeneity.source_rates`, Goose-vs-isotropic gains from `iso_ablation.iso_gains`, speedups from
`main_results.main_cells`, synergy gains from `tau_decomposition.decomposition`, plateau onsets and
spreads from `sensitivity`. The table says which models and hardware our numbers come from: when
they are not the paper's models (e.g. SmolLM2-135M on CPU) the comparison is of trends, not values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from analysis import heterogeneity, iso_ablation, main_results, sensitivity, tau_decomposition
from analysis.load import Results
from analysis.names import model_name
from analysis.report import Output, Skip, cli, fmt, write_table

DESCRIPTION = __doc__.splitlines()[0]
PAPER_VALUES = Path(__file__).with_name("paper_values.yaml")


def paper_values(path: Path = PAPER_VALUES) -> dict[str, Any]:
    """The paper's published numbers (the only hand-typed numbers of analysis/)."""
    return yaml.safe_load(path.read_text())


def _num(x: float, digits: int = 2) -> str:
    return fmt(float(x), digits) if x is not None else "—"


def _range(lo: float, hi: float, digits: int = 1, unit: str = "", signed: bool = False) -> str:
    if lo is None or (isinstance(lo, float) and math.isnan(lo)):
        return "—"
    f = f"{{:{'+' if signed else ''}.{digits}f}}{unit}"
    if abs(lo - hi) < 10 ** (-digits):
        return f.format(lo)
    return f"{f.format(lo)} to {f.format(hi)}" if signed else f"{lo:.{digits}f}–{hi:.{digits}f}{unit}"


def _where(lo: float, hi: float, plo: float, phi: float) -> str:
    if lo is None or math.isnan(lo):
        return "no data"
    if lo >= plo and hi <= phi:
        return "inside the paper's range"
    if hi < plo:
        return "below the paper's range"
    if lo > phi:
        return "above the paper's range"
    return "overlaps the paper's range"


def _ratio(ours: float, paper: float) -> str:
    if ours is None or paper in (None, 0) or math.isnan(ours):
        return "—"
    return f"{ours / paper:.2f}"


def rows_for(res: Results, pv: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    """The table rows (claim, paper, source, ours, ratio, where, our basis) and notes."""
    claims = pv["claims"]
    rows: list[list[str]] = []
    notes: list[str] = []
    nan = float("nan")

    def add(key: str, paper: str, ours: str, ratio: str, where: str, basis: str, suffix: str = "") -> None:
        c = claims[key]
        rows.append([c["what"] + suffix, paper, ours, ratio, where, basis, c["source"]])

    # Heterogeneity p_s / p_t.
    rates = heterogeneity.source_rates(res)
    st = (
        heterogeneity.ratio_stats(rates)
        if not rates.empty
        else {"median": nan, "min": nan, "max": nan, "cells": 0}
    )
    c = claims["p_ratio_median"]
    add(
        "p_ratio_median",
        f"~{c['value']}×",
        _num(st["median"], 1) + ("×" if st["cells"] else ""),
        _ratio(st["median"], c["value"]),
        "—"
        if not st["cells"]
        else ("above" if st["median"] > c["value"] else "below") + " the paper's median",
        f"{st['cells']} model × bench cells (finite ratios)",
    )
    c = claims["p_ratio_range"]
    add(
        "p_ratio_range",
        f"{c['low']}–{c['high']}×",
        _range(st["min"], st["max"], 1, "×") if st["cells"] else "—",
        f"{_ratio(st['min'], c['low'])} / {_ratio(st['max'], c['high'])}",
        _where(st["min"], st["max"], c["low"], c["high"]),
        f"{st['cells']} cells",
    )

    # Goose vs isotropic.
    gains = iso_ablation.iso_gains(res)
    c = claims["goose_vs_iso_gain_pct"]
    for label, isos in (("fixed B", ["iso3", "iso5"]), ("Goose's B_eff", ["iso3_beff", "iso5_beff"])):
        g = gains[gains["iso"].isin(isos)] if not gains.empty else gains
        lo, hi = (float(g["gain_pct"].min()), float(g["gain_pct"].max())) if len(g) else (nan, nan)
        add(
            "goose_vs_iso_gain_pct",
            f"+{c['low']}–{c['high']}%",
            _range(lo, hi, 1, "%", signed=True) if len(g) else "—",
            f"{_ratio(lo, c['low'])} / {_ratio(hi, c['high'])}" if len(g) else "—",
            _where(lo, hi, c["low"], c["high"]),
            f"{len(g)} model × bench × iso pairs ({', '.join(isos)})",
            suffix=f" [ours: iso at {label}]",
        )

    # Speedup.
    mc = main_results.main_cells(res)
    g = mc[(mc["method"] == "goose")].dropna(subset=["speedup"]) if not mc.empty else mc
    c = claims["speedup"]
    lo, hi = (float(g["speedup"].min()), float(g["speedup"].max())) if len(g) else (nan, nan)
    add(
        "speedup",
        f"{c['low']}–{c['high']}×",
        _range(lo, hi, 2, "×") if len(g) else "—",
        f"{_ratio(lo, c['low'])} / {_ratio(hi, c['high'])}" if len(g) else "—",
        _where(lo, hi, c["low"], c["high"]),
        f"{len(g)} model × bench cells (Goose vs AR on shared prompts"
        + (
            f"; {100 * g['ar_same_session'].min():.0f}% to {100 * g['ar_same_session'].max():.0f}% of prompts timed in AR's run)"
            if len(g)
            else ")"
        ),
    )

    # Synergy gain.
    per_bench, per_model = tau_decomposition.decomposition(res)
    c = claims["synergy_gain_pct"]
    if len(per_model):
        lo, hi = float(per_model["gain_pct"].min()), float(per_model["gain_pct"].max())
        models = ", ".join(
            f"{model_name(m)} {v:+.1f}%"
            for m, v in zip(per_model["model"], per_model["gain_pct"], strict=True)
        )
        blo, bhi = float(per_bench["gain_pct"].min()), float(per_bench["gain_pct"].max())
        basis = f"per model (mean over benches): {models}; per bench {blo:+.1f}% to {bhi:+.1f}%"
    else:
        lo = hi = nan
        basis = "no Goose + PLD/TR rows"
    add(
        "synergy_gain_pct",
        f"+{c['low']}% ({model_name(c['low_model'])}) to +{c['high']}% ({model_name(c['high_model'])})",
        _range(lo, hi, 1, "%", signed=True) if len(per_model) else "—",
        f"{_ratio(lo, c['low'])} / {_ratio(hi, c['high'])}" if len(per_model) else "—",
        _where(lo, hi, c["low"], c["high"]),
        basis,
    )

    # Sensitivity.
    sw, _ = sensitivity.sweeps(res)
    for key, param, sym in (("tau_plateau_budget", "budget", "B"), ("tau_plateau_depth", "max_depth", "D")):
        c = claims[key]
        onset = sensitivity.plateau_onset(sw, param) if not sw.empty else {}
        if onset:
            vals = list(onset.values())
            ours = ", ".join(f"{model_name(m)} {sym}={v:g}" for m, v in onset.items())
            where = (
                "plateau starts earlier"
                if max(vals) < c["value"]
                else "plateau starts later"
                if min(vals) > c["value"]
                else "same onset"
            )
            add(
                key,
                f"{sym} ≥ {c['value']}",
                ours,
                _ratio(max(vals), c["value"]),
                where,
                f"first {sym} whose bench-mean τ reaches {sensitivity.PLATEAU_SHARE:.0%} of the sweep's best",
            )
        else:
            add(key, f"{sym} ≥ {c['value']}", "—", "—", "no data", f"no {sym} sweep in the results")
    for key, param, sym in (
        ("tau_variation_tiers", "spine_ratio_tiers", "tiers"),
        ("tau_variation_rho", "rho", "ρ"),
    ):
        c = claims[key]
        sp = sensitivity.spread(sw, param) if not sw.empty else {}
        if sp:
            worst = max(sp.values())
            add(
                key,
                f"< {c['value']}",
                ", ".join(f"{model_name(m)} {v:.2f}" for m, v in sp.items()),
                _ratio(worst, c["value"]),
                "within the bound" if worst < c["value"] else "exceeds the bound",
                f"max − min of bench-mean τ across {sym} settings",
            )
        else:
            add(key, f"< {c['value']}", "—", "—", "no data", f"no {sym} sweep in the results")
    return rows, notes


def build(res: Results, out: Path) -> Output:
    if res.rows.empty:
        raise Skip("no result rows")
    pv = paper_values()
    rows, notes = rows_for(res, pv)
    setup = pv["setup"]
    ours_models = sorted(set(res.rows["model"]))
    same_models = set(ours_models) <= set(setup["models"])
    scope = res.scope()
    caveat = (
        f"{scope}. Paper: {', '.join(model_name(m) for m in setup['models'])} ({setup['model_sizes']}, "
        f"{setup['dtype']}, {setup['hardware']}), full benchmarks."
    )
    if not same_models:
        caveat += " Our models are NOT the paper's: compare directions and shapes, not values."
    output = Output(notes=notes)
    output.files += write_table(
        out,
        "reproduction",
        ["Claim", "Paper", "Ours", "Ours / paper", "Where ours falls", "Our basis", "Paper source"],
        rows,
        "Reproduction: the paper's published numbers beside ours"
        + (
            ""
            if same_models
            else f" (ours: {', '.join(model_name(m) for m in ours_models)}, not the paper's models)"
        ),
        [
            caveat,
            "Ours / paper for a range: low end / high end. Paper values live only in analysis/paper_values.yaml.",
        ],
    )
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
