"""What a verified tree looks like: spine depth and where its branches hang (for comparing shapes).

Goose builds its spine/branch split by rule (spine ratio, ρ, harmonic split), OPT-Tree
(baselines.opt_tree) by maximising E(A); these counters let an analysis compare the two from
the result rows alone. A drafter calls `count_tree_shape(self, tree)` from `observe` on the tree
that was *verified* (after a budget=auto cut or a depth cut to fit the window), and its `stats`
(per prompt, summed over steps) gain:

  shape_trees            verified trees of >= 2 nodes (chains included)
  shape_spine_trees      ... of which with at least one SPINE node
  shape_spine_depth      summed spine depth: SPINE nodes of the tree (the spine is one chain under
                         the root, so its node count is its depth)
  shape_branch_nodes     summed BRANCH nodes
  shape_branch_on_spine  ... of which in a subtree that leaves the spine at a spine node (the
                         branch's first node is a child of a SPINE node) ...
  shape_branch_on_root   ... or at the root (the branch's first node is a child of the anchor);
                         on_spine + on_root = branch_nodes
  shape_depth            summed depth of the deepest node

Mean spine depth = shape_spine_depth / shape_trees (or / shape_spine_trees for trees that have a
spine), mean branch width = shape_branch_nodes / shape_trees, spine share of the branches =
shape_branch_on_spine / shape_branch_nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from goose.engine.core.drafter import Drafter
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree


@dataclass(frozen=True)
class TreeShape:
    """The shape counters of one tree (see the module docstring)."""

    spine_depth: int
    branch_nodes: int
    branch_on_spine: int
    branch_on_root: int
    depth: int


def tree_shape(tree: DraftTree) -> TreeShape:
    """Spine depth, branch nodes and where they hang, in one pass over the nodes (parents come
    first). A branch node inherits the hang point of its parent; a BRANCH child of the anchor or of
    a SPINE node starts a new branch there. Labels other than SPINE / BRANCH are not counted."""
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
