"""Shape counters of a verified tree, to compare Goose's rule-built spine/branch split with OPT-Tree's
(baselines.opt_tree) from the rows alone. `count_tree_shape` (called from `observe` on the verified tree)
adds per prompt: shape_trees (>= 2 nodes), shape_spine_trees, shape_spine_depth (SPINE nodes),
shape_branch_nodes = shape_branch_on_spine + shape_branch_on_root (where a branch leaves the spine),
shape_depth (deepest node).
"""

from __future__ import annotations

from dataclasses import dataclass

from goose.engine.core.drafter import Drafter
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree


@dataclass(frozen=True)
class TreeShape:
    spine_depth: int
    branch_nodes: int
    branch_on_spine: int
    branch_on_root: int
    depth: int


def tree_shape(tree: DraftTree) -> TreeShape:
    """Spine depth, branch nodes and where they hang, in one pass (a branch node inherits its parent's hang
    point). Labels other than SPINE / BRANCH are not counted.
    """
    n = len(tree)
    hang = [0] * n  # the ROOT / SPINE node where node i's branch leaves the spine
    spine = on_spine = on_root = 0
    sources, parents = tree.sources, tree.parents
    for i in range(1, n):
        src = sources[i]
        if src == SPINE:
            spine += 1
            continue
        if src != BRANCH:
            continue
        p = parents[i]
        hang[i] = p if sources[p] in (ROOT, SPINE) else hang[p]
        if hang[i] == 0:
            on_root += 1
        else:
            on_spine += 1
    return TreeShape(spine, on_spine + on_root, on_spine, on_root, max(tree.depths))


def count_tree_shape(drafter: Drafter, tree: DraftTree) -> None:
    """Add `tree`'s shape to `drafter.stats` (trees of one node, AR steps, are not counted)."""
    if len(tree) < 2:
        return
    shape = tree_shape(tree)
    drafter.count("shape_trees")
    drafter.count("shape_spine_trees", int(shape.spine_depth > 0))
    drafter.count("shape_spine_depth", shape.spine_depth)
    drafter.count("shape_branch_nodes", shape.branch_nodes)
    drafter.count("shape_branch_on_spine", shape.branch_on_spine)
    drafter.count("shape_branch_on_root", shape.branch_on_root)
    drafter.count("shape_depth", shape.depth)
