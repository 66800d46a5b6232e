"""Goose's hyperparameters: one frozen object, defaults = the paper's Table 5 (docs/paper.md), logged in every
result row. The fields shared with the other tree drafters live in `CandidatePoolConfig` and
`ContextMatchConfig`, so a sweep sets them uniformly."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from goose.validation import (
    HYPERPARAMETERS,
    check_choice,
    check_float_list,
    check_hyperparameters,
    check_int,
    check_str,
)

# goose.engine.core.acceptance_prior.HAND and AUTO, restated: this module stays off the engine (analysis reads
# it); tests/method/test_config.py checks the two agree.
HAND = "hand"
AUTO = "auto"
COMPAT_MODES = ("harness", "authors")  # goose.method.compat: the official implementation's choices
COMPAT_WHY = "harness: this harness's Goose; authors: the official implementation's choices"


def check_compat(owner: str, value: object) -> str:
    return check_choice(f"{owner}.compat", value, COMPAT_MODES, why=COMPAT_WHY)


@dataclass(frozen=True)
class DrafterConfig:
    """Base of the drafters' frozen hyperparameter objects, validated on creation; errors name `<owner>.<field>`.
    A drafter names its subclass as `config_class` and takes the fields as keywords; its structured config
    (goose.harness.drafter_schema) is generated from the fields."""

    owner: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self._validate()

    def owner_name(self) -> str:
        return self.owner or type(self).__name__

    def _validate(self) -> None:
        names = [name for name in self.field_names() if name in HYPERPARAMETERS]
        check_hyperparameters(self.owner_name(), **{name: getattr(self, name) for name in names})

    def as_dict(self) -> dict[str, Any]:
        """The logged config (its config_hash identifies result cells): tuples as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class CandidatePoolConfig(DrafterConfig):
    """The candidate pool of the adjacency-table tree drafters, at Table 5's values: node budget B (anchor
    included), depth D, K successors per row, `min_score`, the bigram tier and the prefill harvest."""

    budget: int = 60
    max_depth: int = 6
    k: int = 10
    min_score: float = 0.01
    use_bigram: bool = True
    prefill_harvest: bool = True


@dataclass(frozen=True)
class ContextMatchConfig(CandidatePoolConfig):
    """A candidate pool plus Goose's context matcher and budget rule (Table 5): `max_extended_chain` is the
    paper's 100 in the extension int(100 c) and B_eff = B + int(c·(100 − B)); c >= 0.7 from `long_match`."""

    max_chain: int = 20
    max_extended_chain: int = 100
    long_match: int = 8
    ngram_lengths: tuple[int, ...] = (5, 4, 3)

    def _validate(self) -> None:
        # Hydra hands ListConfig for tuple fields; the checks return tuples, keeping the object hashable.
        super()._validate()
        check_int(
            f"{self.owner_name()}.max_extended_chain",
            self.max_extended_chain,
            low=self.max_chain,
            why="at least max_chain",
        )
        object.__setattr__(self, "ngram_lengths", tuple(self.ngram_lengths))


@dataclass(frozen=True)
class CalibratedPriorConfig(ContextMatchConfig):
    """A context-matching drafter whose acceptance estimates may start from a calibrated prior
    (`acceptance_prior`: a model or family name, a prior's name or file, goose.engine.core.acceptance_prior;
    "auto", the default: the run's model's prior, which the harness puts in its place when it composes the
    drafter with a configured model (goose.harness.compose), the hand priors where no model is known;
    "hand": the drafter's hand priors). An unresolved "auto" and "hand" run the same computation and are left
    out of `as_dict`, keeping the config hashes of the hand prior's rows."""

    acceptance_prior: str = AUTO

    def _validate(self) -> None:
        super()._validate()
        check_str(
            f"{self.owner_name()}.acceptance_prior",
            self.acceptance_prior,
            why="a model, a prior's name or file, or hand",
        )

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if self.acceptance_prior in (HAND, AUTO):
            del out["acceptance_prior"]
        return out


@dataclass(frozen=True)
class GooseConfig(ContextMatchConfig):
    """Every Goose hyperparameter at its Table 5 default (B, D, K, ρ, α as in docs/paper.md). persistent_table
    and compat are left out of `as_dict` at their defaults, keeping earlier config hashes."""

    rho: float = 0.5
    ema_alpha: float = 0.3
    ema_init: float = 0.5
    spine_ratio_tiers: tuple[float, float, float] = (0.15, 0.30, 0.50)
    spine_ratio_thresholds: tuple[float, float] = (0.2, 0.4)
    chain_extension_threshold: float = 0.6
    use_confidence: bool = True
    persistent_table: bool = False
    compat: str = "harness"

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
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
        object.__setattr__(self, "spine_ratio_tiers", tiers)
        object.__setattr__(self, "spine_ratio_thresholds", thresholds)

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if not self.persistent_table:
            del out["persistent_table"]  # the default: keep earlier rows' config hashes
        if self.compat == "harness":
            del out["compat"]  # likewise
        return out
