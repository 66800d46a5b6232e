"""Goose's hyperparameters: one frozen object, defaults = the paper's Table 5 (SPEC "Goose").

The same object is what `GooseDrafter.config()` logs in every result row. Field names follow the
other tree drafters (`budget`, `max_depth`, `k`, `min_score`, `use_bigram`, `prefill_harvest`) so
that a sweep can set them uniformly across methods; the docstring of each names the paper's symbol.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from goose.method.compat import check_compat
from goose.validation import HYPERPARAMETERS, check_float_list, check_hyperparameters, check_int


@dataclass(frozen=True)
class GooseConfig:
    """Every Goose hyperparameter with the paper's default.

    budget                     B: node budget of one tree, root (anchor) included.
    max_depth                  D: branch nodes at depth >= D are not extended further.
    k                          K: adjacency top-k (successors kept per token).
    min_score                  adjacency successors scoring below this are never drafted.
    rho                        ρ: share of the branch budget hung on the spine (rest at the root).
    max_chain                  longest continuation one context match returns.
    max_extended_chain         ceiling of a confidence-extended chain: a cycle of confidence c
                               extends its chain to int(max_extended_chain*c) tokens. Read as the
                               SPEC's constant 100 in *both* places it occurs, so it is also the
                               budget a fully confident cycle reaches: B_eff = B + int(c*(100 - B)).
    long_match                 chain length from which a match counts as long (confidence >= 0.7).
    ema_alpha                  α: smoothing of the spine-acceptance EMA a.
    ema_init                   initial spine-acceptance EMA a (reset per prompt).
    ngram_lengths              n-gram lengths the context matcher queries, longest first.
    spine_ratio_tiers          base spine ratio for a < thresholds[0], a < thresholds[1], else.
    spine_ratio_thresholds     EMA thresholds separating the three spine-ratio tiers.
    chain_extension_threshold  chains are extended by repeated matching when c > this.
    use_bigram                 consult the (previous token, token) adjacency tier first.
    prefill_harvest            seed the adjacency table from the prompt's prefill logits.
    use_confidence             use c (chain extension, B_eff, spine-ratio shift); off = the paper's
                               "no consensus bypass" ablation: c = 0, every tree at budget B.
    persistent_table           keep the adjacency table across the prompts of a run, as Token
                               Recycling does (not the paper's setting, which starts each prompt
                               afresh): the like-for-like comparison with TR. Off by default, and
                               then left out of `as_dict`, so that the config hash of rows written
                               before the field existed does not change.
    compat                     "harness" (this harness's Goose) or "authors" (the official
                               implementation's choices wherever the two differ, point by point:
                               goose.method.compat). Left out of `as_dict` at "harness", like
                               persistent_table.
    """

    budget: int = 60
    max_depth: int = 6
    k: int = 10
    min_score: float = 0.01
    rho: float = 0.5
    max_chain: int = 20
    max_extended_chain: int = 100
    long_match: int = 8
    ema_alpha: float = 0.3
    ema_init: float = 0.5
    ngram_lengths: tuple[int, ...] = (5, 4, 3)
    spine_ratio_tiers: tuple[float, float, float] = (0.15, 0.30, 0.50)
    spine_ratio_thresholds: tuple[float, float] = (0.2, 0.4)
    chain_extension_threshold: float = 0.6
    use_bigram: bool = True
    prefill_harvest: bool = True
    use_confidence: bool = True
    persistent_table: bool = False
    compat: str = "harness"

    def __post_init__(self) -> None:
        # Hydra hands lists (ListConfig) for the tuple fields; the checks return plain tuples, so
        # the object stays hashable and logs as JSON.
        self._validate()

    def _validate(self) -> None:
        """Every field against its range (goose.validation); the message names field and value."""
        owner = "GooseConfig"
        check_hyperparameters(
            owner,
            **{name: getattr(self, name) for name in GooseConfig.field_names() if name in HYPERPARAMETERS},
        )
        check_int(
            f"{owner}.max_extended_chain",
            self.max_extended_chain,
            low=self.max_chain,
            why="at least max_chain",
        )
        tiers = check_float_list(f"{owner}.spine_ratio_tiers", self.spine_ratio_tiers, 0.0, 1.0, length=3)
        thresholds = check_float_list(
            f"{owner}.spine_ratio_thresholds",
            self.spine_ratio_thresholds,
            0.0,
            1.0,
            length=2,
            nondecreasing=True,
        )
        check_compat(owner, self.compat)
        object.__setattr__(self, "ngram_lengths", tuple(self.ngram_lengths))
        object.__setattr__(self, "spine_ratio_tiers", tiers)
        object.__setattr__(self, "spine_ratio_thresholds", thresholds)

    def as_dict(self) -> dict[str, Any]:
        """The hyperparameters as a JSON-friendly dict (tuples become lists)."""
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        if not self.persistent_table:
            del out["persistent_table"]  # the default: keep earlier rows' config hashes
        if self.compat == "harness":
            del out["compat"]  # likewise
        return out

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
