"""How the batching study's tables list and write their cells: the order of the methods and a spread,
median [min, max] over repeats."""

from __future__ import annotations

import statistics

METHOD_ORDER = (
    "ar",
    "pld",
    "suffix_auto",
    "suffix_global_auto",
    "suffix_global_auto_shared",
    "tr_auto",
    "tr_auto_shared",
    "goose_auto",
    "goose_auto_batch",
    "hw_tree_auto",
    "hw_tree_auto_batch",
)


def method_rank(method: str) -> tuple[int, str]:
    """The order methods are listed in: METHOD_ORDER's first, then the rest by name."""
    return (METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER), method)


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}, {fmt.format(max(values))}]"
