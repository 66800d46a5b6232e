"""`compat`: whose version of Goose a drafter follows. `compat="harness"` (default) is this harness's Goose;
`compat="authors"` follows the official implementation (github.com/2kinto/GOOSE_Speculative_Decoding,
commit c5c8bb37) wherever the two differ, so per-prompt forward calls can be compared with its counters.
Each difference is one flag of `CompatRules`, described with the official function it follows in
docs/compat_authors.md; reverting one flag at a time measures what it is worth
(experiments/compat_reference.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from goose.method.confidence import (
    LONG_MATCH_CEILING,
    LONG_MATCH_FLOOR,
    LONG_MATCH_RAMP,
    SHORT_MATCH_CEILING,
    match_confidence,
    safe_ceil,
    safe_floor,
)
from goose.method.config import COMPAT_MODES, COMPAT_WHY, GooseConfig, check_compat  # noqa: F401

_AUTHORS_RAMP_SLOPE = 0.2  # goose/context_match.py `match_confidence`: 0.7 + 0.2 * (len - 8) / 12.0


def authors_match_confidence(
    chain_len: int, consensus: bool, long_match: int = GooseConfig.long_match
) -> float:
    """c as the official `match_confidence` computes it, with the literal 0.2 in the long-match ramp (the
    harness's 0.9 − 0.7 is one ulp more).
    """
    if chain_len <= 0:
        return 0.0
    if consensus:
        return 1.0
    if chain_len >= long_match:
        rise = _AUTHORS_RAMP_SLOPE * (chain_len - long_match) / float(LONG_MATCH_RAMP)
        return min(LONG_MATCH_CEILING, LONG_MATCH_FLOOR + rise)
    return SHORT_MATCH_CEILING * chain_len / long_match


@dataclass(frozen=True)
class CompatRules:
    """One flag per difference from the official Goose (module docstring), harness choices as defaults; the
    methods are the budget arithmetic that `robust_rounding` switches.
    """

    tree_root_bigram: bool = True
    cut_to_budget: bool = True
    robust_rounding: bool = True
    largest_remainder_split: bool = True
    cut_extension_at_limit: bool = True
    spine_cap: bool = True
    fp16_unigram_scores: bool = False
    rho0_spine_floor: bool = False
    lean_forward: bool = True
    iso_goose_routing: bool = False

    @classmethod
    def flags(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def floor(self, x: float) -> int:
        return safe_floor(x) if self.robust_rounding else int(x)

    def ceil(self, x: float) -> int:
        return safe_ceil(x) if self.robust_rounding else math.ceil(x)

    def confidence(self, chain_len: int, consensus: bool, long_match: int = GooseConfig.long_match) -> float:
        """c of a context match (goose.method.confidence.match_confidence or the official one)."""
        if self.robust_rounding:
            return match_confidence(chain_len, consensus, long_match)
        return authors_match_confidence(chain_len, consensus, long_match)

    def extension_limit(self, c: float, max_extended_chain: int = GooseConfig.max_extended_chain) -> int:
        """int(max_extended_chain * c) (official: goose/decoding.py `_Session._extend_chain`)."""
        return self.floor(max_extended_chain * c)

    def effective_budget(
        self,
        c: float,
        budget: int = GooseConfig.budget,
        max_extended_chain: int = GooseConfig.max_extended_chain,
    ) -> int:
        """B_eff = B + int(c · max(0, max_extended_chain − B)) (Goose §4.3, docs/paper.md)."""
        return budget + self.floor(c * max(0, max_extended_chain - budget))


HARNESS = CompatRules()
AUTHORS = CompatRules(
    tree_root_bigram=False,
    cut_to_budget=False,
    robust_rounding=False,
    largest_remainder_split=False,
    cut_extension_at_limit=False,
    spine_cap=False,
    fp16_unigram_scores=True,
    rho0_spine_floor=True,
    lean_forward=False,
    iso_goose_routing=True,
)


def rules_for(compat: str) -> CompatRules:
    return AUTHORS if check_compat("compat", compat) == "authors" else HARNESS
