"""analysis/studies/verifier_claims/claims.py on hand-built rows: β per verifier from exact_accepted, the
paired effect per prompt, the bootstrap interval around a known mean, and each verdict."""

from __future__ import annotations

import pytest

from analysis.studies.verifier_claims.claims import (
    bootstrap_interval,
    claim_effects,
    claims_table,
    depth_effects,
    drafter_and_shape,
    exact_rows,
    model_label,
    verdict,
)
from goose.records.results import append_row


def row(method: str, shape: str, prompt: int, steps: int, accepted: dict[str, float]) -> dict:
    return {
        "status": "ok",
        "model": "m",
        "bench": "b",
        "method": method,
        "method_config": {"shape": shape},
        "prompt_id": prompt,
        "sample_seed": 7,
        "repeat": 0,
        "temperature": 0.6,
        "exact_steps": steps,
        "exact_accepted": accepted,
        "exact_reach": {v: [a] for v, a in accepted.items()},
    }


def test_drafter_and_shape():
    assert drafter_and_shape("stand_chain", {"shape": "chain"}) == ("stand", "chain")
    assert drafter_and_shape("self_draft", {"shape": "chain"}) == ("self_draft", "chain")
    assert drafter_and_shape("self_draft_tree", {"shape": "tree"}) == ("self_draft", "tree")
    assert drafter_and_shape("stand", None) == ("stand", "tree")
    assert drafter_and_shape("stand_dynamic", {"shape": "delayed", "branch_below": 0.5}) == (
        "stand",
        "dynamic",
    )
    assert drafter_and_shape("stand_delayed", {"shape": "delayed"}) == ("stand", "delayed")


def test_effects_are_paired_ratios_of_block_efficiency(tmp_path):
    """β = 1 + Σ E / steps; Traversal / RRS − 1 per prompt on the same rows: (1 + 12/10) / (1 + 10/10) − 1
    = 0.1 and (1 + 6/4) / (1 + 4/4) − 1 = 0.25."""
    path = tmp_path / "m_T0.6" / "r.jsonl"
    append_row(path, row("stand", "tree", 1, 10, {"rrs": 10.0, "traversal": 12.0}))
    append_row(path, row("stand", "tree", 2, 4, {"rrs": 4.0, "traversal": 6.0}))
    df = exact_rows(tmp_path)
    assert sorted(df["beta_traversal"]) == [pytest.approx(2.2), pytest.approx(2.5)]
    effects = claim_effects(df, ("tree", "traversal"), ("tree", "rrs"))
    assert sorted(effects) == [pytest.approx(0.1, abs=1e-12), pytest.approx(0.25, abs=1e-12)]
    (table_row,) = [r for r in claims_table(df) if r[3] == "Traversal ≥ RRS on trees"]
    assert table_row[3] == "Traversal ≥ RRS on trees" and table_row[4] == "2" and table_row[5] == "+17.50%"


def test_bootstrap_interval_and_verdicts():
    mean, low, high = bootstrap_interval([1.0] * 10)
    assert (mean, low, high) == (1.0, 1.0, 1.0)
    effects = [0.01 * (i % 5 - 2) for i in range(50)]  # mean 0, spread ±0.02
    mean, low, high = bootstrap_interval(effects)
    assert mean == pytest.approx(0.0, abs=1e-15) and low < 0 < high
    # exact percentiles where the bootstrap law is discrete: the means of 4 draws from [0, 0, 0, 1] are
    # k/4 with k ~ Binomial(4, 1/4): P(k = 0) = 0.32 > 2.5 %, so the low end is 0; P(k ≥ 3) = 0.051 > 2.5 %
    # > P(k = 4) = 0.004, so the high end is 3/4 (an interval read at the wrong percentile gives 1 or 1/4)
    assert bootstrap_interval([0.0, 0.0, 0.0, 1.0]) == (0.25, 0.0, 0.75)
    assert bootstrap_interval([0.0, 1.0]) == (0.5, 0.0, 1.0)
    assert verdict(0.05, 0.01, 0.09, 20) == "reproduced"
    assert verdict(-0.05, -0.09, -0.01, 20) == "refuted"
    # half-width 0.04 around 0.02: 20 · (0.04 / 0.02)² = 80 prompts would make the half-width the effect
    assert verdict(0.02, -0.02, 0.06, 20) == "too small to tell (~80 prompts)"


def test_top_p_rows_are_their_own_setting(tmp_path):
    """Rows at T 0.6 with top-p 0.9 are not pooled with plain T 0.6: two table rows, each over its own
    prompts, labelled by the setting (pooled, the effect would be the mean of 0.1 and 0.25 over 2 prompts)."""
    path = tmp_path / "m" / "r.jsonl"
    append_row(path, row("stand", "tree", 1, 10, {"rrs": 10.0, "traversal": 12.0}))
    append_row(path, row("stand", "tree", 2, 10, {"rrs": 10.0, "traversal": 12.0}))
    for prompt in (1, 2):
        append_row(path, {**row("stand", "tree", prompt, 4, {"rrs": 4.0, "traversal": 6.0}), "top_p": 0.9})
    table = [r for r in claims_table(exact_rows(tmp_path)) if r[3] == "Traversal ≥ RRS on trees"]
    assert [(r[1], r[4], r[5]) for r in table] == [
        ("0.6, top-p 0.9", "2", "+25.00%"),
        ("0.6", "2", "+10.00%"),
    ]


def test_model_label_names_the_dtype():
    assert model_label({"model": "gemma3-270m", "dtype": "bfloat16"}) == "gemma3-270m bf16"
    assert model_label({"model": "smollm2-135m", "dtype": "float32"}) == "smollm2-135m fp32"
    assert model_label({"model": "m"}) == "m"


def test_depth_effects_sum_reach_over_a_band_of_depths(tmp_path):
    """P(accepted ≥ d) per verifier, paired per tree: depth 1 alone, RRS 0.6 against Traversal 0.5 → +20 %;
    depths ≥ 3, Traversal (0.3 + 0.2) against RRS (0.2 + 0.05) → +100 %; a tree where RRS reaches no depth
    ≥ 3 is left out of that band (no ratio), not counted as 0."""
    path = tmp_path / "m" / "r.jsonl"
    for prompt, rrs, trav in ((1, [0.6, 0.4, 0.2, 0.05], [0.5, 0.4, 0.3, 0.2]), (2, [0.6, 0.1], [0.5, 0.1])):
        r = row("stand", "tree", prompt, 10, {"rrs": 5.0, "traversal": 5.0})
        append_row(path, {**r, "exact_reach": {"rrs": rrs, "traversal": trav}})
    df = exact_rows(tmp_path)
    assert depth_effects(df, "tree", "rrs", "traversal", (0, 1)) == [pytest.approx(0.2)] * 2
    assert depth_effects(df, "tree", "traversal", "rrs", (2, None)) == [pytest.approx(1.0)]
    assert depth_effects(df, "iid", "rrs", "traversal", (0, 1)) == []
    claims = {r[3]: r for r in claims_table(df)}
    assert claims["RRS ≥ Traversal at depth 1 on trees (OT near the root)"][5] == "+20.00%"
    assert "Traversal ≥ RRS at depths ≥ 3 on trees (OT deeper)" not in claims  # one tree: no interval
