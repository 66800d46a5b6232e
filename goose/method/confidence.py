"""Confidence-adaptive setup of a Goose tree (Goose §4.3, docs/paper.md): the match confidence c sets the
chain extension, B_eff and the shift of the spine ratio; the spine-acceptance EMA a picks the base tier.
Pure functions except `SpineAcceptanceEMA`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from goose.method.config import GooseConfig

# The confidence schedule's constants (Goose §4.3; fixed in the paper, not swept).
SHORT_MATCH_CEILING = 0.6  # c = 0.6 * len / long_match below long_match
LONG_MATCH_FLOOR = 0.7  # c at len == long_match
LONG_MATCH_CEILING = 0.9  # c never exceeds this without consensus
LONG_MATCH_RAMP = 12  # tokens past long_match over which c climbs 0.7 -> 0.9

_EPS = 1e-9  # int(x) of a product like 60 * 0.15 must not lose a unit to binary rounding


def safe_floor(x: float) -> int:
    """int(x) for x >= 0, robust to representation error (8.999999999999998 floors to 9)."""
    return math.floor(x + _EPS)


def safe_ceil(x: float) -> int:
    """ceil(x), robust to representation error (3.0000000000000004 ceils to 3)."""
    return math.ceil(x - _EPS)


def match_confidence(chain_len: int, consensus: bool, long_match: int = GooseConfig.long_match) -> float:
    """Confidence c of a context match of `chain_len` tokens: 0 without a chain, 1 on consensus, min(0.9, 0.7
    + 0.2·(len − 8)/12) from long_match (8) on, else 0.6·len/8."""
    if chain_len <= 0:
        return 0.0
    if consensus:
        return 1.0
    if chain_len >= long_match:
        rise = (LONG_MATCH_CEILING - LONG_MATCH_FLOOR) * (chain_len - long_match) / LONG_MATCH_RAMP
        return min(LONG_MATCH_CEILING, LONG_MATCH_FLOOR + rise)
    return SHORT_MATCH_CEILING * chain_len / long_match


def extension_limit(c: float, max_extended_chain: int = GooseConfig.max_extended_chain) -> int:
    """Length a chain of confidence c > threshold is extended to: int(max_extended_chain * c)."""
    return safe_floor(max_extended_chain * c)


def effective_budget(
    c: float, budget: int = GooseConfig.budget, max_extended_chain: int = GooseConfig.max_extended_chain
) -> int:
    """B_eff = B + int(c · (max_extended_chain − B)), never below B (a sweep may set B > 100)."""
    return budget + safe_floor(c * max(0, max_extended_chain - budget))


def base_spine_ratio(
    ema: float,
    tiers: Sequence[float] = GooseConfig.spine_ratio_tiers,
    thresholds: Sequence[float] = GooseConfig.spine_ratio_thresholds,
) -> float:
    """Base tier of the spine ratio from the spine-acceptance EMA a: a<0.2 -> 0.15, a<0.4 -> 0.30, else 0.50."""
    if ema < thresholds[0]:
        return tiers[0]
    if ema < thresholds[1]:
        return tiers[1]
    return tiers[2]


def spine_ratio(
    c: float,
    ema: float,
    tiers: Sequence[float] = GooseConfig.spine_ratio_tiers,
    thresholds: Sequence[float] = GooseConfig.spine_ratio_thresholds,
) -> float:
    """Share of B_eff the spine may take: base + c * (1 - base)."""
    base = base_spine_ratio(ema, tiers, thresholds)
    return base + c * (1.0 - base)


def spine_cap(
    b_eff: int, ratio: float, *, floor: Callable[[float], int] = safe_floor, cap: bool = True
) -> int:
    """Most spine nodes in a tree of budget B_eff: int(B_eff · ratio), capped at B_eff − 1 so the tree with its
    root stays within B_eff (the paper leaves it uncapped: `cap=False` under compat=authors)."""
    n = floor(b_eff * ratio)
    return max(0, min(n, b_eff - 1) if cap else n)


def spine_length(
    chain_len: int, b_eff: int, ratio: float, *, floor: Callable[[float], int] = safe_floor, cap: bool = True
) -> int:
    return min(chain_len, spine_cap(b_eff, ratio, floor=floor, cap=cap))


class SpineAcceptanceEMA:
    """The spine-acceptance EMA a (initial 0.5), per tree with a spine: a <- α · accepted/offered + (1 − α) · a."""

    def __init__(self, alpha: float = GooseConfig.ema_alpha, initial: float = GooseConfig.ema_init) -> None:
        self.alpha = alpha
        self.initial = initial
        self.value = initial

    def reset(self) -> None:
        self.value = self.initial

    def update(self, accepted: int, offered: int) -> float:
        if offered > 0:
            self.value = self.alpha * (accepted / offered) + (1.0 - self.alpha) * self.value
        return self.value
