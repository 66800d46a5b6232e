"""The expansions a selector chooses among: a = (K, L1, L2), K i.i.d. paths of L2 draws after a trunk of L1
(arXiv 2602.16994 Def. 5.2), on a grid up to (max K, max L1, max L2); and what each is worth on a verified
tree: the verifier's exact expected accepted length on the tree of every smaller action the tree contains
(`restrict_paths`: the same trunk, fewer and shorter paths), without sampling noise.
"""

from __future__ import annotations

from dataclasses import dataclass

from goose.engine.core.verify.expected import expected_accepted
from goose.engine.core.verify.view import SampledTree, restrict_paths


@dataclass(frozen=True, order=True)
class Action:
    """K paths of L2 draws after a trunk of L1 draws."""

    paths: int
    trunk: int
    length: int

    @property
    def nodes(self) -> int:
        """The most nodes its tree has (the anchor, the trunk, K·L2 path draws; merged paths have fewer)."""
        return 1 + self.trunk + self.paths * self.length

    def label(self) -> str:
        return f"{self.paths}-{self.trunk}-{self.length}"

    @classmethod
    def parse(cls, label: str) -> Action:
        k, l1, l2 = (int(x) for x in label.split("-"))
        return cls(k, l1, l2)


def action_grid(max_paths: int, max_trunk: int, max_length: int, budget: int) -> tuple[Action, ...]:
    """Every (K, L1, L2) with 1 ≤ K ≤ max_paths, 0 ≤ L1 ≤ max_trunk, 1 ≤ L2 ≤ max_length whose tree fits the
    node budget, in a fixed order."""
    return tuple(
        a
        for k in range(1, max_paths + 1)
        for l1 in range(max_trunk + 1)
        for l2 in range(1, max_length + 1)
        if (a := Action(k, l1, l2)).nodes <= budget
    )


def contained(executed: Action, grid: tuple[Action, ...]) -> tuple[Action, ...]:
    """The actions of `grid` whose tree a draft of `executed` contains: the same trunk, K ≤ its K, L2 ≤ its L2."""
    return tuple(
        a
        for a in grid
        if a.trunk == executed.trunk and a.paths <= executed.paths and a.length <= executed.length
    )


def action_values(
    view: SampledTree, executed: Action, actions: tuple[Action, ...], verifier: str
) -> dict[Action, float]:
    """E[accepted drafted tokens] of `verifier` for each of `actions` (each contained in `executed`) on the
    verified tree `view` of a draft of `executed`: exact over the verifier's randomness, one draft's sample
    over the drafter's."""
    out = {}
    for a in actions:
        same = a == executed or view.paths is None  # no paths: the trunk ended early, every action alike
        sub = view if same else restrict_paths(view, a.paths, a.length)
        out[a] = expected_accepted(verifier, sub)
    return out
