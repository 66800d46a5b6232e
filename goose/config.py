"""Goose's hyperparameters: one frozen object, defaults = the paper's Table 5 (SPEC "Goose").

The same object is what `GooseDrafter.config()` logs in every result row. Field names follow the
other tree drafters (`budget`, `max_depth`, `k`, `min_score`, `use_bigram`, `prefill_harvest`) so
that a sweep can set them uniformly across methods; the docstring of each names the paper's symbol.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any


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

    def __post_init__(self) -> None:
        # Hydra hands lists (ListConfig) for the tuple fields; store plain tuples so the object
        # stays hashable and logs as JSON.
        for name in ("ngram_lengths", "spine_ratio_tiers", "spine_ratio_thresholds"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise ValueError(f"GooseConfig.{name} = {value!r}: must be a list of numbers")
            object.__setattr__(self, name, tuple(value))
        self._validate()

    def _validate(self) -> None:
        _check_int(self, "budget", 2, "the root plus at least one drafted node")
        _check_int(self, "max_depth", 1)
        _check_int(self, "k", 1)
        _check_int(self, "max_chain", 1)
        _check_int(self, "max_extended_chain", self.max_chain, "at least max_chain")
        _check_int(self, "long_match", 1)
        _check_float(self, "min_score", 0.0, 1.0, upper_open=True)
        _check_float(self, "rho", 0.0, 1.0)
        _check_float(self, "ema_alpha", 0.0, 1.0)
        _check_float(self, "ema_init", 0.0, 1.0)
        _check_float(self, "chain_extension_threshold", 0.0, 1.0)
        ns = self.ngram_lengths
        if not ns or any(not _is_int(n) or n < 1 for n in ns) or list(ns) != sorted(set(ns), reverse=True):
            raise ValueError(
                f"GooseConfig.ngram_lengths = {ns!r}: must be distinct positive ints, longest first"
            )
        tiers = self.spine_ratio_tiers
        if len(tiers) != 3 or any(not 0.0 <= t <= 1.0 for t in tiers):
            raise ValueError(f"GooseConfig.spine_ratio_tiers = {tiers!r}: must be three shares in [0, 1]")
        th = self.spine_ratio_thresholds
        if len(th) != 2 or not 0.0 <= th[0] <= th[1] <= 1.0:
            raise ValueError(
                f"GooseConfig.spine_ratio_thresholds = {th!r}: must be two values 0 <= t0 <= t1 <= 1"
            )
        for name in ("use_bigram", "prefill_harvest", "use_confidence"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"GooseConfig.{name} = {getattr(self, name)!r}: must be true or false")

    def as_dict(self) -> dict[str, Any]:
        """The hyperparameters as a JSON-friendly dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(cfg: GooseConfig, name: str, low: int, why: str = "") -> None:
    value = getattr(cfg, name)
    if not _is_int(value) or value < low:
        hint = f" ({why})" if why else ""
        raise ValueError(f"GooseConfig.{name} = {value!r}: must be an integer >= {low}{hint}")


def _check_float(cfg: GooseConfig, name: str, low: float, high: float, upper_open: bool = False) -> None:
    value = getattr(cfg, name)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and low <= value and (value < high if upper_open else value <= high)
    if not ok:
        interval = f"[{low}, {high})" if upper_open else f"[{low}, {high}]"
        raise ValueError(f"GooseConfig.{name} = {value!r}: must be a number in {interval}")
