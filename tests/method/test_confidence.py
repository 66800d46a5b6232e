"""Confidence c, B_eff, spine-ratio tiers, spine cap and the spine-acceptance EMA, with values
computed by hand from SPEC "Goose" steps 2 and 5 at the paper's defaults (B=60, ceiling 100)."""

from __future__ import annotations

import pytest

from goose.method.confidence import (
    SpineAcceptanceEMA,
    base_spine_ratio,
    effective_budget,
    extension_limit,
    match_confidence,
    spine_cap,
    spine_length,
    spine_ratio,
)


@pytest.mark.parametrize(
    "chain_len, expected",
    [
        (0, 0.0),  # no chain
        (4, 0.3),  # 0.6 * 4 / 8
        (7, 0.525),  # 0.6 * 7 / 8: short chains stay below the 0.6 extension threshold
        (8, 0.7),  # 0.7 + 0.2 * 0 / 12
        (14, 0.8),  # 0.7 + 0.2 * 6 / 12
        (20, 0.9),  # 0.7 + 0.2 * 12 / 12
        (50, 0.9),  # capped at 0.9
    ],
)
def test_confidence_without_consensus(chain_len, expected):
    assert match_confidence(chain_len, consensus=False) == pytest.approx(expected)


def test_confidence_with_consensus_is_one_but_zero_without_a_chain():
    assert match_confidence(1, consensus=True) == 1.0
    assert match_confidence(20, consensus=True) == 1.0
    assert match_confidence(0, consensus=True) == 0.0


@pytest.mark.parametrize(
    "c, ema, b_eff, ratio, cap",
    [
        (0.0, 0.1, 60, 0.15, 9),  # tier 0.15: int(60 * 0.15) = 9
        (0.0, 0.3, 60, 0.30, 18),  # tier 0.30
        (0.0, 0.5, 60, 0.50, 30),  # tier 0.50
        (0.6, 0.5, 84, 0.80, 67),  # 60 + int(0.6 * 40); 0.5 + 0.6 * 0.5; int(84 * 0.8) = int(67.2)
        (0.7, 0.1, 88, 0.745, 65),  # 60 + 28; 0.15 + 0.7 * 0.85; int(88 * 0.745) = int(65.56)
        (1.0, 0.0, 100, 1.0, 99),  # c = 1: all to the spine, minus the root (int(100*1) = 100 capped)
        (1.0, 0.3, 100, 1.0, 99),
        (1.0, 0.9, 100, 1.0, 99),
    ],
)
def test_effective_budget_ratio_and_spine_cap(c, ema, b_eff, ratio, cap):
    assert effective_budget(c, 60, 100) == b_eff
    assert spine_ratio(c, ema) == pytest.approx(ratio)
    assert spine_cap(b_eff, spine_ratio(c, ema)) == cap


def test_tier_boundaries_are_strict_less_than():
    assert base_spine_ratio(0.19999) == 0.15
    assert base_spine_ratio(0.2) == 0.30
    assert base_spine_ratio(0.39999) == 0.30
    assert base_spine_ratio(0.4) == 0.50
    assert base_spine_ratio(0.1, tiers=(0.1, 0.2, 0.3), thresholds=(0.05, 0.5)) == 0.2


def test_spine_length_is_the_shorter_of_chain_and_cap():
    assert spine_length(20, 60, 0.5) == 20
    assert spine_length(40, 60, 0.5) == 30
    assert spine_length(0, 60, 0.5) == 0
    assert spine_length(150, 100, 1.0) == 99


def test_extension_limit_and_budget_never_shrinks():
    assert [extension_limit(c) for c in (0.7, 0.8, 0.9, 1.0)] == [70, 80, 90, 100]
    assert effective_budget(1.0, budget=120, max_extended_chain=100) == 120
    assert effective_budget(0.5, budget=40, max_extended_chain=100) == 70


def test_spine_acceptance_ema():
    ema = SpineAcceptanceEMA(alpha=0.3, initial=0.5)
    assert ema.value == 0.5
    assert ema.update(3, 10) == pytest.approx(0.3 * 0.3 + 0.7 * 0.5)  # 0.44
    assert ema.update(0, 5) == pytest.approx(0.7 * 0.44)  # 0.308
    assert ema.update(2, 0) == pytest.approx(0.308)  # no spine: unchanged
    ema.reset()
    assert ema.value == 0.5
