"""Acceptance metrics of one generation beyond τ and p_s / p_t (the field's conventions).

Row fields (every list indexed from 0; missing in a row = not recorded):
- depth_offered / depth_accepted: drafted and accepted nodes per tree depth (index d-1 for depth d)
- rank_offered / rank_accepted: drafted and accepted nodes per sibling rank (0 = first child)
Acceptance by source is the row's `offered` / `accepted`; the per-step acceptance length is
`step_accepted`, from which the histogram and the per-position rates are derived.
"""

from __future__ import annotations

from typing import Any

ACCEPTANCE_FIELDS = ("depth_offered", "depth_accepted", "rank_offered", "rank_accepted")


def acceptance_fields(gen: Any) -> dict[str, list[int]]:
    """The per-depth and per-sibling-rank counts of one generation, as row fields."""
    return {name: list(getattr(gen, name, [])) for name in ACCEPTANCE_FIELDS}
