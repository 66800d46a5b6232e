"""The field's acceptance metrics (goose.records.acceptance) on hand-built step data with known
answers, on rows without the newer fields, and on the shipped SmolLM2 rows."""

from __future__ import annotations

import copy
import math

import pytest

from goose.records.acceptance import (
    acceptance_by_shape,
    acceptance_by_source,
    acceptance_summary,
    conditional_accept_rates,
    histogram,
    marginal_accept_rates,
    mean_accept_length_per_request,
    speculation_profile,
    validate_profile,
)
from goose.records.metrics import cell_summary
from goose.records.results import read_rows
from tests.conftest import ROOT

# Request 1: steps accepting 0, 2 and 3 drafts (L = 1, 3, 4); request 2: one step accepting 1 (L = 2).
R1 = {
    "status": "ok",
    "step_accepted": [0, 2, 3],
    "step_tree_size": [4, 5, 6],
    "offered": {"spine": 6, "branch": 6, "root": 0},
    "accepted": {"spine": 4, "branch": 1},
    "depth_offered": [5, 4, 3],
    "depth_accepted": [2, 2, 1],
    "rank_offered": [9, 3],
    "rank_accepted": [5, 0],
}
R2 = {
    "status": "ok",
    "step_accepted": [1],
    "step_tree_size": [3],
    "offered": {"spine": 1, "branch": 0, "lookahead": 1},
    "accepted": {"spine": 0, "lookahead": 1},
    "depth_offered": [2],
    "depth_accepted": [1],
    "rank_offered": [1, 1],
    "rank_accepted": [0, 1],
}


def test_hand_built_histogram_and_rates():
    s = acceptance_summary([R1, R2])
    assert s["acceptance_histogram"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    assert s["marginal_accept_rates"] == pytest.approx([0.75, 0.5, 0.25])
    assert s["conditional_accept_rates"] == pytest.approx([0.75, 2 / 3, 0.5])
    assert s["mean_acceptance_length"] == pytest.approx(2.5)  # (1 + 3 + 4 + 2) / 4 steps
    assert s["mean_acceptance_length_per_request"] == pytest.approx((8 / 3 + 2) / 2)  # they differ
    assert 1 + sum(s["marginal_accept_rates"]) == pytest.approx(s["mean_acceptance_length"])
    assert (s["num_spec_steps"], s["num_draft_tokens"], s["num_accepted_draft_tokens"]) == (4, 14, 6)


def test_hand_built_depth_rank_and_source():
    depth = acceptance_by_shape([R1, R2], "depth")
    assert depth["offered"] == [7, 4, 3] and depth["accepted"] == [3, 2, 1]
    assert depth["rate"] == pytest.approx([3 / 7, 0.5, 1 / 3])
    rank = acceptance_by_shape([R1, R2], "rank")
    assert rank["offered"] == [10, 4] and rank["accepted"] == [5, 1]
    src = acceptance_by_source([R1, R2])
    assert (src["spine"]["offered"], src["spine"]["accepted"]) == (7, 4)
    assert (src["branch"]["offered"], src["branch"]["accepted"]) == (6, 1)
    assert (src["other"]["offered"], src["other"]["accepted"]) == (1, 1)  # unknown labels pool here


def test_conditional_is_zero_after_a_zero_marginal_and_gaps_carry():
    hist = histogram([1, 1, 4])  # no step ended at L = 2 or 3
    marginal = marginal_accept_rates(hist)
    assert marginal == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    assert marginal_accept_rates(hist, 5)[3:] == [0.0, 0.0]
    assert conditional_accept_rates([0.5, 0.0, 0.0]) == [0.5, 0.0, 0.0]


def test_old_rows_without_the_new_fields_are_read():
    old = {"status": "ok", "step_accepted": [1, 0], "offered": {"spine": 2}, "accepted": {"spine": 1}}
    s = acceptance_summary([old, {"status": "failed"}, {"status": "ok", "step_accepted": float("nan")}])
    assert s["acceptance_by_depth"] is None and s["acceptance_by_sibling_rank"] is None
    assert s["mean_acceptance_length"] == pytest.approx(1.5)
    assert s["num_draft_tokens"] == 0  # no step_tree_size recorded
    empty = acceptance_summary([])
    assert math.isnan(empty["mean_acceptance_length"]) and empty["marginal_accept_rates"] == []
    assert math.isnan(mean_accept_length_per_request([{"step_accepted": []}]))


def test_cell_summary_carries_both_means():
    base = {"generated_tokens": 10, "forward_calls": 5, "wall_time_s": 1.0}
    s = cell_summary([{**R1, **base}, {**R2, **base}])
    assert s["mean_accept_length"] == pytest.approx(2.5)
    assert s["mean_accept_length_per_request"] == pytest.approx(7 / 3)


def test_profile_passes_its_checks_and_a_corrupted_one_fails():
    profile = speculation_profile([R1, R2], "goose", "tiny")
    assert profile["schema_version"] == "1.0" and profile["num_speculative_tokens"] == 3
    assert profile["validation"]["mean_consistency"]["passed"]
    assert profile["validation"]["marginal_monotonicity"]["passed"]
    assert validate_profile(profile)["passed"]
    corrupt = copy.deepcopy(profile)
    corrupt["marginal_accept_rates"][1] = 0.3  # 1 + Σ marginal = 2.3, not 2.5
    check = validate_profile(corrupt)
    assert not check["passed"] and not check["mean_consistency"]["passed"]
    truncated = copy.deepcopy(profile)
    truncated["marginal_accept_rates"] = truncated["marginal_accept_rates"][:1]  # K understated
    assert not validate_profile(truncated)["mean_consistency"]["passed"]
    rising = copy.deepcopy(profile)
    rising["marginal_accept_rates"] = [0.5, 0.75, 0.25]  # same sum, not a survival function
    assert not validate_profile(rising)["marginal_monotonicity"]["passed"]
    wrong_hist = copy.deepcopy(profile)
    wrong_hist["acceptance_length_histogram"] = {"1": 4}
    assert not validate_profile(wrong_hist)["histogram_mean"]["passed"]


SHIPPED = ROOT / "results" / "reference" / "smollm2-135m" / "mtbench.jsonl"


@pytest.mark.parametrize("method", ["ar", "pld", "tr", "goose"])
def test_shipped_rows_give_a_consistent_profile(method):
    rows = [
        r
        for r in read_rows(SHIPPED)
        if r["method"] == method and r.get("temperature") in (None, 0.0) and not r.get("chat_template")
    ]
    assert rows
    profile = speculation_profile(rows, method, "smollm2-135m")
    assert validate_profile(profile)["passed"]
    steps = sum(len(r["step_accepted"]) for r in rows)
    accepted = sum(sum(r["step_accepted"]) for r in rows)
    assert profile["mean_accept_length"] == pytest.approx(1 + accepted / steps, abs=1e-6)
    assert sum(profile["acceptance_length_histogram"].values()) == steps
    if method == "ar":
        assert profile["mean_accept_length"] == 1.0 and profile["marginal_accept_rates"] == []
    else:
        assert profile["mean_accept_length"] > 1.0
        assert profile["mean_accept_length"] != pytest.approx(
            profile["mean_accept_length_per_request"], abs=1e-9
        )
