"""Goose's hyperparameters: one frozen object, defaults = the paper's Table 5 (docs/paper.md), logged in every
result row. Field names match the other tree drafters so a sweep sets them uniformly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from goose.method.compat import check_compat
from goose.validation import HYPERPARAMETERS, check_float_list, check_hyperparameters, check_int


@dataclass(frozen=True)
class GooseConfig:
    """Every Goose hyperparameter with the paper's Table 5 default; symbols as in docs/paper.md (budget B,
    max_depth D, k K, rho ρ, ema_alpha α). max_extended_chain is the paper's constant 100 in both places:
    the extension int(100 c) and B_eff = B + int(c·(100 − B)). use_confidence off is the "no consensus
    bypass" ablation. persistent_table (keep the table across prompts, as TR) and compat
    (goose.method.compat) are left out of `as_dict` at their defaults, keeping earlier config hashes.
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
        # Hydra hands ListConfig for tuple fields; the checks return tuples, keeping the object hashable.
        self._validate()

    def _validate(self) -> None:
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
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        if not self.persistent_table:
            del out["persistent_table"]  # the default: keep earlier rows' config hashes
        if self.compat == "harness":
            del out["compat"]  # likewise
        return out

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
