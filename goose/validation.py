"""Checks of user settings, shared by the Hydra config hook and every drafter's config class. A bad value
raises `ValueError` naming field, value and what is allowed, e.g. ``Eagle2Drafter.budget = 1: must be an
integer >= 2``; each helper returns what it accepted. `HYPERPARAMETERS` holds the ranges of the drafters'
shared hyperparameters (B, D, K, min_score, …) in one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any


def is_int(value: Any) -> bool:
    """An integer that is not a bool (True would otherwise pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (is_int(value) or isinstance(value, float)) and not (
        isinstance(value, float) and math.isnan(value)
    )


def _hint(why: str) -> str:
    return f" ({why})" if why else ""


def _interval(low: float | None, high: float | None, high_open: bool = False) -> str:
    if low is not None and high is not None:
        return f"in [{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f">= {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None, why: str = "") -> int:
    """`value` must be an integer in [low, high] (either bound may be None)."""
    ok = is_int(value) and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        rng = _interval(low, high)
        raise ValueError(f"{name} = {value!r}: must be an integer{' ' + rng if rng else ''}{_hint(why)}")
    return value


def check_float(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    high_open: bool = False,
    why: str = "",
) -> float:
    """`value` must be a number (int or float, not NaN) in [low, high], or [low, high) if high_open."""
    ok = is_number(value) and (low is None or value >= low)
    ok = ok and (high is None or (value < high if high_open else value <= high))
    if not ok:
        rng = _interval(low, high, high_open)
        raise ValueError(f"{name} = {value!r}: must be a number{' ' + rng if rng else ''}{_hint(why)}")
    return value


def check_positive(name: str, value: Any, why: str = "") -> float:
    """`value` must be a number > 0 (not NaN)."""
    if not (is_number(value) and value > 0):
        raise ValueError(f"{name} = {value!r}: must be a number > 0{_hint(why)}")
    return value


def check_bool(name: str, value: Any, why: str = "") -> bool:
    """`value` must be true or false (not 0/1, not a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} = {value!r}: must be true or false{_hint(why)}")
    return value


def check_str(name: str, value: Any, why: str = "") -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} = {value!r}: must be a string{_hint(why)}")
    return value


def check_choice(name: str, value: Any, choices: Iterable[Any], why: str = "") -> Any:
    """`value` must be one of `choices` (compared with ==, bools and ints kept apart)."""
    choices = tuple(choices)
    if not any(value == c and type(value) is type(c) for c in choices):
        listed = ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in choices)
        raise ValueError(f"{name} = {value!r}: must be one of {listed}{_hint(why)}")
    return value


def _as_sequence(name: str, value: Any, what: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{name} = {value!r}: must be a list of {what}")
    return tuple(value)


def check_int_list(
    name: str,
    value: Any,
    low: int = 1,
    *,
    distinct: bool = True,
    descending: bool = False,
    why: str = "",
) -> tuple[int, ...]:
    """`value` must be a non-empty list of integers >= low; optionally distinct and/or in strictly
    descending order."""
    items = _as_sequence(name, value, "integers")
    rules = [f"integers >= {low}"]
    if distinct:
        rules.append("distinct")
    if descending:
        rules.append("longest first")
    ok = bool(items) and all(is_int(v) and v >= low for v in items)
    ok = ok and (not distinct or len(set(items)) == len(items))
    ok = ok and (not descending or list(items) == sorted(items, reverse=True))
    if not ok:
        raise ValueError(f"{name} = {value!r}: must be a non-empty list of {', '.join(rules)}{_hint(why)}")
    return items


def check_float_list(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    length: int | None = None,
    nondecreasing: bool = False,
    why: str = "",
) -> tuple[float, ...]:
    """`value` must be a list of numbers in [low, high], of `length` items if given, optionally in
    nondecreasing order."""
    items = _as_sequence(name, value, "numbers")
    ok = bool(items) and all(is_number(v) and low <= v <= high for v in items)
    ok = ok and (length is None or len(items) == length)
    ok = ok and (not nondecreasing or list(items) == sorted(items))
    if not ok:
        count = f"{length} " if length is not None else ""
        order = ", in nondecreasing order" if nondecreasing else ""
        raise ValueError(f"{name} = {value!r}: must be {count}numbers in [{low}, {high}]{order}{_hint(why)}")
    return items


# The drafters' shared hyperparameters: name -> check(qualified name, value). Bounds are the
# smallest values for which the drafter is well defined.
HYPERPARAMETERS: dict[str, Callable[[str, Any], Any]] = {
    "budget": partial(check_int, low=2, why="B, the root plus at least one drafted node"),
    "max_depth": partial(check_int, low=1, why="D, depth of the deepest branch layer"),
    "k": partial(check_int, low=1, why="K, successors kept per adjacency-table row"),
    "min_score": partial(check_float, low=0.0, high=1.0, high_open=True, why="a softmax score threshold"),
    "topk": partial(check_int, low=1, why="nodes expanded per layer"),
    "branching": partial(check_int, low=1, why="children per node"),
    "num_draft": partial(check_int, low=1, why="tokens drafted per chain"),
    "max_chain": partial(check_int, low=1, why="longest continuation of one context match"),
    "long_match": partial(check_int, low=1, why="chain length from which a match counts as long"),
    "rho": partial(check_float, low=0.0, high=1.0, why="ρ, share of the branch budget hung on the spine"),
    "ema_alpha": partial(check_float, low=0.0, high=1.0, why="α, EMA smoothing"),
    "ema_init": partial(check_float, low=0.0, high=1.0, why="initial spine-acceptance EMA"),
    "chain_extension_threshold": partial(check_float, low=0.0, high=1.0, why="a confidence"),
    "use_bigram": check_bool,
    "prefill_harvest": check_bool,
    "use_confidence": check_bool,
    "ngram_lengths": partial(check_int_list, low=1, distinct=True, descending=True),
    "ngram_sizes": partial(check_int_list, low=1, distinct=True),
}


def check_hyperparameters(owner: str, **values: Any) -> None:
    """Check each `name=value` against its entry in HYPERPARAMETERS; messages read
    `<owner>.<name> = <value>: must be ...`."""
    for name, value in values.items():
        HYPERPARAMETERS[name](f"{owner}.{name}", value)
