"""Acceptance priors calibrated offline: what a run's acceptance estimates start from before its first step.

The online estimates of r = P(node accepted | parent accepted) (`AcceptanceModel` of budget=auto and OPT-Tree,
goose.engine.core.acceptance; hw_tree's `AcceptanceEstimator`) shrink every cell toward a prior. By hand that
prior is a guess (0.6 for the spine, 0.35 / (rank + 1) otherwise), so a fresh process sizes its first prompts
with it while the protocol's twentieth prompt has learnt counts. A calibrated prior is the hand prior's Beta
posterior after a calibration run's counts (experiments/calibrate_priors.py, on prompts the protocol does not
use), per cell:

    mean = (accepted + s0 · m0) / (reached + s0),    strength = min(reached + s0, cap)

m0, s0 the hand prior's mean and strength; `cap` pseudo-observations at most, so that a run's own evidence
outweighs the prior after a few dozen observations of a cell. A cell the calibration never reached keeps
the hand prior (strength 0 in the file's table).

A prior file is JSON (the shipped ones: goose/data/priors/<model>.json): `format`, `version`, `name` (what a
row's config records), `model`, `family`, `cap`, `provenance` (how it was made: model, dtype, benchmarks
and their prompt indices, drafters, tokens, command, date, code state) and `tables`, one per estimator
(`auto_budget`, `opt_tree`, `hw_tree`), each with its `axes`, `shape`, the `hand_prior` it started from and
`sections`, one per method (the drafter's name) plus `all` (the methods pooled, where there are several),
each a list of `cells` rows [*index, reached, accepted, mean, strength].

`load_prior(model, table, method)` is the one call a consumer makes: the table's section for `method` (else
`all`) of `model`'s prior (`find_prior`), or None where none is shipped: the consumer keeps its hand prior.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "goose-acceptance-prior"
VERSION = 1
PRIORS_DIR = Path(__file__).resolve().parents[2] / "data" / "priors"  # shipped in the package
HAND = "hand"  # the name a config records where the hand prior runs
AUTO = "auto"  # "the run's model's prior": the harness puts the model's name in its place; unresolved, hand
POOLED = "all"  # the section of every method's counts together
DEFAULT_CAP = 20.0  # pseudo-observations of a calibrated cell, at most
PROVENANCE_FIELDS = (
    "model",
    "dtype",
    "benchmarks",
    "drafters",
    "max_new_tokens",
    "tokens",
    "command",
    "date",
    "code_state",
)


class PriorFileError(ValueError):
    """A prior file that cannot be used; the message names the file and what is wrong."""


def calibrate(
    reached: np.ndarray, accepted: np.ndarray, hand_mean: Any, hand_strength: Any, cap: float = DEFAULT_CAP
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, strength) per cell: the hand prior (mean `hand_mean`, worth `hand_strength` observations) updated
    by a calibration's `reached` / `accepted` counts, strength capped at `cap`; strength 0 (and the hand mean)
    where nothing was reached."""
    if cap <= 0:
        raise ValueError(f"cap = {cap}: must be > 0")
    reached, accepted = np.asarray(reached, dtype=float), np.asarray(accepted, dtype=float)
    m0 = np.broadcast_to(np.asarray(hand_mean, dtype=float), reached.shape)
    s0 = np.broadcast_to(np.asarray(hand_strength, dtype=float), reached.shape)
    seen = reached > 0
    mean = np.where(seen, (accepted + s0 * m0) / (reached + s0), m0)
    strength = np.where(seen, np.minimum(reached + s0, cap), 0.0)
    return mean, strength


@dataclass(frozen=True)
class PriorTable:
    """One estimator's calibrated prior for one method: per cell `mean` and `strength` (0: not calibrated,
    the consumer's hand prior holds there), the calibration's `reached` / `accepted` counts and the file's
    `cap`. `name` is the prior's, `section` the method whose counts made it (or `all`)."""

    name: str
    section: str
    mean: np.ndarray
    strength: np.ndarray
    reached: np.ndarray
    accepted: np.ndarray
    cap: float

    def over(self, hand_mean: Any, hand_strength: Any) -> tuple[np.ndarray, np.ndarray]:
        """(mean, strength) per cell: this table's where it is calibrated, the hand prior's elsewhere."""
        shape = self.mean.shape
        hand_mean = np.asarray(hand_mean, dtype=float)
        if hand_mean.shape != shape:
            raise ValueError(
                f"acceptance prior {self.name} ({self.section}): cells of shape {list(shape)}, the estimator's "
                f"are {list(hand_mean.shape)}; recalibrate (make calibrate-priors)"
            )
        seen = self.strength > 0
        m0 = np.broadcast_to(hand_mean, shape)
        s0 = np.broadcast_to(np.asarray(hand_strength, dtype=float), shape)
        return np.where(seen, self.mean, m0), np.where(seen, self.strength, s0)


@dataclass(frozen=True)
class AcceptancePrior:
    """A prior file as read: its name, the model it was calibrated on and that model's family, the cap, how
    it was made (`provenance`) and per table its metadata and sections (`PriorTable`)."""

    name: str
    model: str
    family: str
    cap: float
    provenance: dict[str, Any]
    path: Path
    tables: dict[str, dict[str, PriorTable]] = field(repr=False)
    table_info: dict[str, dict[str, Any]] = field(repr=False)

    def table(self, table: str, method: str | None = None) -> PriorTable | None:
        """The section of `table` for `method`, else the pooled one, else its only section; None if the file
        has no such table."""
        sections = self.tables.get(table)
        if not sections:
            return None
        only = next(iter(sections.values())) if len(sections) == 1 else None
        return sections.get(method or POOLED) or sections.get(POOLED) or only


def model_family(model: str) -> str:
    """A model's family: its name up to the first '-' (smollm2-135m -> smollm2, gemma3-270m -> gemma3)."""
    return model.split("-", 1)[0]


# ---------------------------------------------------------------------------------------------- writing
def table_document(
    axes: Sequence[str],
    hand_prior: Mapping[str, Any],
    sections: Mapping[str, tuple[np.ndarray, np.ndarray]],
    hand_mean: Any,
    hand_strength: Any,
    cap: float,
) -> dict[str, Any]:
    """One table of a prior file from per-section (reached, accepted) counts of equal shape (one axis per
    name in `axes`), the hand prior as arrays (`hand_mean`, `hand_strength`) and as described in the file
    (`hand_prior`); only reached cells are listed."""
    shapes = {np.shape(r) for r, _ in sections.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != len(axes):
        raise ValueError(f"sections of shapes {sorted(shapes)} for axes {list(axes)}")
    shape = next(iter(shapes))
    out: dict[str, Any] = {}
    for section, (reached, accepted) in sections.items():
        mean, strength = calibrate(reached, accepted, hand_mean, hand_strength, cap)
        rows = []
        for idx in zip(*np.nonzero(np.asarray(reached) > 0), strict=True):
            r, a = float(reached[idx]), float(accepted[idx])
            rows.append(
                [
                    *map(int, idx),
                    round(r, 3),
                    round(a, 3),
                    round(float(mean[idx]), 5),
                    round(float(strength[idx]), 3),
                ]
            )
        out[section] = {"cells": rows}
    return {"axes": list(axes), "shape": list(shape), "hand_prior": dict(hand_prior), "sections": out}


def prior_document(
    name: str, model: str, cap: float, provenance: Mapping[str, Any], tables: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    """A prior file's content: `tables` from `table_document` (made with the same `cap`)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "model": model,
        "family": model_family(model),
        "cap": cap,
        "provenance": dict(provenance),
        "tables": dict(tables),
    }


def write_prior(path: str | Path, document: Mapping[str, Any]) -> Path:
    """Write `document` (`prior_document`) to `path` and read it back (so that a bad one fails here)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(document))
    read_prior(path)
    return path


_NUMBER_LIST = re.compile(r"\[\n\s+(-?[\d.eE+-]+(?:,\n\s+-?[\d.eE+-]+)*)\n\s*\]")


def dumps(document: Mapping[str, Any]) -> str:
    """`document` as indented JSON with every list of numbers (a cell row) on one line."""
    text = json.dumps(document, indent=1)
    return (
        _NUMBER_LIST.sub(lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)
        + "\n"
    )


# ---------------------------------------------------------------------------------------------- reading
def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)  # shared by every estimator of a process (`shipped_priors` is cached)
    return a


CELL_FIELDS = ("reached", "accepted", "mean", "strength")  # after a cell's index, in each row of a section


def _section(where: str, name: str, section: str, raw: Any, shape: tuple[int, ...], cap: float) -> PriorTable:
    """One section's cells as dense arrays (zero where not listed), each row checked."""
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise PriorFileError(f"{where}: section {section!r} must be an object with a list of 'cells'")
    arrays = {k: np.zeros(shape) for k in CELL_FIELDS}
    width = len(shape) + len(CELL_FIELDS)
    here = f"{where}: section {section!r}"
    for row in raw["cells"]:
        numbers = isinstance(row, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in row
        )
        if not numbers or len(row) != width:
            raise PriorFileError(f"{here}: cell {row!r} is not {width} numbers")
        index = row[: len(shape)]
        if not all(float(i).is_integer() and 0 <= i < n for i, n in zip(index, shape, strict=True)):
            raise PriorFileError(f"{here}: cell index {index} outside {list(shape)}")
        reached, accepted, mean, strength = (float(v) for v in row[len(shape) :])
        if not (0 <= accepted <= reached and 0.0 <= mean <= 1.0 and 0.0 < strength <= cap):
            raise PriorFileError(
                f"{here}: cell {row!r} needs 0 <= accepted <= reached, mean in [0, 1], "
                f"strength in (0, cap = {cap}]"
            )
        idx = tuple(int(i) for i in index)
        for k, v in zip(CELL_FIELDS, (reached, accepted, mean, strength), strict=True):
            arrays[k][idx] = v
    return PriorTable(name=name, section=section, cap=cap, **{k: _frozen(v) for k, v in arrays.items()})


def parse_prior(raw: Any, where: str, path: Path | None = None) -> AcceptancePrior:
    """An `AcceptancePrior` from a prior file's parsed JSON; PriorFileError (naming `where`) if malformed."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise PriorFileError(f"{where}: not an acceptance prior (its 'format' must be {FORMAT!r})")
    if raw.get("version") != VERSION:
        raise PriorFileError(f"{where}: version {raw.get('version')!r}, this code reads version {VERSION}")
    for key in ("name", "model", "family"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise PriorFileError(f"{where}: {key!r} must be a non-empty string")
    cap = raw.get("cap")
    if not isinstance(cap, (int, float)) or isinstance(cap, bool) or cap <= 0:
        raise PriorFileError(f"{where}: 'cap' must be a number > 0, got {cap!r}")
    provenance = raw.get("provenance")
    if not isinstance(provenance, dict):
        raise PriorFileError(f"{where}: 'provenance' must be an object saying how the prior was made")
    missing = [k for k in PROVENANCE_FIELDS if k not in provenance]
    if missing:
        raise PriorFileError(f"{where}: provenance lacks {', '.join(missing)}")
    tables_raw = raw.get("tables")
    if not isinstance(tables_raw, dict) or not tables_raw:
        raise PriorFileError(f"{where}: 'tables' must be a non-empty object")
    tables: dict[str, dict[str, PriorTable]] = {}
    info: dict[str, dict[str, Any]] = {}
    for tname, t in tables_raw.items():
        shape = t.get("shape") if isinstance(t, dict) else None
        if not (isinstance(shape, list) and shape and all(isinstance(n, int) and n > 0 for n in shape)):
            raise PriorFileError(f"{where}: table {tname!r} needs a 'shape' of positive integers")
        if not isinstance(t.get("sections"), dict):
            raise PriorFileError(f"{where}: table {tname!r} needs 'sections'")
        tables[tname] = {
            s: _section(f"{where}: table {tname!r}", raw["name"], s, v, tuple(shape), float(cap))
            for s, v in t["sections"].items()
        }
        info[tname] = {k: v for k, v in t.items() if k != "sections"}
    return AcceptancePrior(
        name=raw["name"],
        model=raw["model"],
        family=raw["family"],
        cap=float(cap),
        provenance=provenance,
        path=path or Path(where),
        tables=tables,
        table_info=info,
    )


def read_prior(path: str | Path) -> AcceptancePrior:
    """A prior file; PriorFileError naming the file if it cannot be read or is malformed."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PriorFileError(f"acceptance prior {path}: cannot be read ({exc})") from None
    return parse_prior(raw, f"acceptance prior {path}", path)


@functools.lru_cache(maxsize=4)
def shipped_priors(folder: Path = PRIORS_DIR) -> tuple[AcceptancePrior, ...]:
    """Every prior file in `folder` (default: the package's), by file name; read once per process."""
    return tuple(read_prior(p) for p in sorted(folder.glob("*.json")))


def find_prior(model: str | None, folder: Path = PRIORS_DIR) -> AcceptancePrior | None:
    """The prior for `model`: a prior file if `model` is a path ending in .json; else the shipped prior
    named `model` or calibrated on it; else one of its family (`model_family`); None for None, '',
    'hand', an unresolved 'auto' (no model known) and where none is shipped (the hand prior runs)."""
    if not model or model in (HAND, AUTO):
        return None
    if model.endswith(".json"):
        return read_prior(Path(model).expanduser())
    shipped = shipped_priors(folder)
    exact = [p for p in shipped if model in (p.name, p.model)]
    family = [p for p in shipped if p.family == model_family(model)]
    return (exact or family or [None])[0]


def load_prior(
    model: str | None, table: str, method: str | None = None, folder: Path = PRIORS_DIR
) -> PriorTable | None:
    """The calibrated prior of estimator `table` for `method` (else the pooled section) of `model`'s prior
    (`find_prior`: a model or family name, a prior's name or a path); None where there is none, and the
    estimator keeps its hand prior."""
    prior = find_prior(model, folder)
    return None if prior is None else prior.table(table, method)
