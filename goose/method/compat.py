"""`compat`: whose version of Goose a drafter follows, point by point (issue 13, part 2).

`compat="harness"` (the default) is this harness's Goose; `compat="authors"` follows the official
implementation (github.com/2kinto/GOOSE_Speculative_Decoding, commit c5c8bb37) wherever the two
differ, so that per-prompt forward calls can be compared with the official code's counters
(../shared/reference/). Each difference is one flag of `CompatRules`; `HARNESS` and `AUTHORS` set
all of them one way, and an experiment may revert one flag at a time
(`dataclasses.replace(AUTHORS, flag=getattr(HARNESS, flag))`) to measure what that point is worth
(experiments/compat_reference.py; the table is docs/compat_authors.md).

The flags (harness value first; "official" names the file/function the authors' value follows):

  tree_root_bigram          True: a tree cycle writes the (previous anchor, anchor) bigram row
                            from the root's logits. Official (goose/decoding.py,
                            `_Session._speculate`) harvests a tree with the root's predecessor None,
                            so tree cycles feed the bigram tier only with pairs they drafted; the
                            chain and AR routes do write it.
  cut_to_budget             True: the decode loop cuts a tree to the tokens still wanted (depth <=
                            remaining - 1) before verification. Official (`_Session.run`) verifies the
                            whole tree and cuts only the output, so the adjacency table and the
                            spine EMA see every node.
  robust_rounding           True: int(x) / ceil(x) of the budget arithmetic tolerate binary
                            representation error (goose.method.confidence.safe_floor / safe_ceil),
                            and the long-match ramp of c is (0.9 - 0.7) * (len - 8) / 12. Official
                            (goose/context_match.py `match_confidence`, goose/tree.py) uses plain
                            int() / math.ceil and the literal 0.2: a 14-token match has
                            c = 0.7999999999999999 there (0.8 here), so B_eff = 60 +
                            int(31.999999999999996) = 91 there and 92 here.
  largest_remainder_split   True: the spine share is split over spine nodes with weights 1/i by
                            largest remainder (sums exactly, never increases with depth). Official
                            (goose/tree.py `_harmonic_split`) gives node i min(max(1, int(share *
                            w_i / H)), left) in order: at least one alternative per spine node from
                            the top until the share runs out.
  cut_extension_at_limit    True: a confident chain is extended to at most int(100 * c) tokens and,
                            at c = 1, only by proposals that have consensus themselves. Official
                            (goose/decoding.py `_Session._extend_chain`) appends whole proposals
                            (overshooting int(100 * c) by up to max_chain - 1) and, at c = 1, appends
                            the first proposal without consensus before it stops.
  spine_cap                 True: the spine holds at most B_eff - 1 nodes, so a tree never exceeds
                            B_eff. Official (goose/tree.py `build_spine_tree`) takes
                            L = min(len(chain), int(B_eff * ratio)), which at c = 1 is B_eff: a
                            tree of B_eff + 1 nodes ("builds one node more", goose/config.py).
  fp16_unigram_scores       False: adjacency scores are stored in float32. Official
                            (goose/adjacency.py `AdjacencyTable`) stores unigram scores in float16
                            (bigram scores stay float32), which moves min_score and branch widths.
  rho0_spine_floor          False: at ρ = 0 (the "no spine branches" ablation) the spine gets no
                            alternatives. Official (goose/tree.py `build_spine_tree`) applies
                            max(1, int(branch_budget * ρ)) at every ρ, so one alternative still
                            hangs on the first spine node.
  lean_forward              True: the engine's forward is the lean one (fused matmuls) where the
                            model supports it. Official runs the `transformers` forward; the
                            harness honours this flag where the engine is built
                            (goose.harness.compose.load_engine, experiments/compat_reference.py).
  iso_goose_routing         False: the isotropic controls verify a k-ary tree at the fixed budget B
                            every cycle (iso*_beff is the B_eff variant). Official iso3/iso5 are
                            `GooseConfig(topology="isotropic")` (goose/decoding.py `_cycle`,
                            goose/tree.py `build_isotropic_tree`): Goose's routing (a plain chain
                            cycle when the anchor has no successors but the context matches) and
                            Goose's budget B_eff from the context match's confidence.
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
from goose.validation import check_choice

COMPAT_MODES = ("harness", "authors")
COMPAT_WHY = "harness: this harness's Goose; authors: the official implementation's choices"

_AUTHORS_RAMP_SLOPE = 0.2  # goose/context_match.py `match_confidence`: 0.7 + 0.2 * (len - 8) / 12.0


def check_compat(owner: str, value: object) -> str:
    """`value` must be one of COMPAT_MODES; the error lists them."""
    return check_choice(f"{owner}.compat", value, COMPAT_MODES, why=COMPAT_WHY)


def authors_match_confidence(chain_len: int, consensus: bool, long_match: int = 8) -> float:
    """c as goose/context_match.py `match_confidence` computes it: the long-match ramp is
    0.7 + 0.2 * (len - long_match) / 12 with the literal 0.2 (the harness's 0.9 - 0.7 is
    0.20000000000000007 in binary, one ulp more)."""
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
    """One flag per point where the harness's Goose and the official one differ (module
    docstring); the defaults are the harness's choices. The methods are the budget arithmetic that
    `robust_rounding` switches."""

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
        """int(x) of the budget arithmetic (x >= 0)."""
        return safe_floor(x) if self.robust_rounding else int(x)

    def ceil(self, x: float) -> int:
        """ceil(x) of the branch widths."""
        return safe_ceil(x) if self.robust_rounding else math.ceil(x)

    def confidence(self, chain_len: int, consensus: bool, long_match: int = 8) -> float:
        """c of a context match (goose.method.confidence.match_confidence or the official one)."""
        if self.robust_rounding:
            return match_confidence(chain_len, consensus, long_match)
        return authors_match_confidence(chain_len, consensus, long_match)

    def extension_limit(self, c: float, max_extended_chain: int = 100) -> int:
        """int(max_extended_chain * c) (official: goose/decoding.py `_Session._extend_chain`)."""
        return self.floor(max_extended_chain * c)

    def effective_budget(self, c: float, budget: int = 60, max_extended_chain: int = 100) -> int:
        """B_eff = B + int(c * max(0, max_extended_chain - B)) (official: goose/tree.py
        `build_spine_tree` / `build_isotropic_tree`, `GooseConfig.budget_extension`)."""
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
    """The rules of a `compat` mode ("harness" or "authors")."""
    return AUTHORS if check_compat("compat", compat) == "authors" else HARNESS
