"""Tree-shape counters (spine depth, branch nodes on the spine vs on the root) on hand-built
trees, and Goose recording them for the verified tree."""

from __future__ import annotations

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.method.drafter import GooseDrafter
from goose.method.tree_shape import TreeShape, count_tree_shape, tree_shape


def hand_tree() -> DraftTree:
    """anchor 0 -> spine 1 -> spine 2; branches: 3 under the root (with child 4), 5 under spine 1
    (with child 6, grandchild 7), 8 under spine 2."""
    tree = DraftTree.chain(0, [10, 11], SPINE)
    a = tree.add(20, 0, BRANCH)
    tree.add(21, a, BRANCH)
    b = tree.add(30, 1, BRANCH)
    c = tree.add(31, b, BRANCH)
    tree.add(32, c, BRANCH)
    tree.add(40, 2, BRANCH)
    return tree


def test_shape_of_a_hand_built_tree():
    assert tree_shape(hand_tree()) == TreeShape(
        spine_depth=2, branch_nodes=6, branch_on_spine=4, branch_on_root=2, depth=4
    )
    assert tree_shape(DraftTree.chain(0, [1, 2, 3], SPINE)) == TreeShape(3, 0, 0, 0, 3)


def test_counts_add_up_and_single_nodes_are_not_trees():
    d = Drafter()
    count_tree_shape(d, DraftTree.single(0))
    assert d.stats == {}
    count_tree_shape(d, hand_tree())
    count_tree_shape(d, DraftTree.chain(0, [1, 2, 3], SPINE))
    assert d.stats == {
        "shape_trees": 2,
        "shape_spine_trees": 2,
        "shape_spine_depth": 5,
        "shape_branch_nodes": 6,
        "shape_branch_on_spine": 4,
        "shape_branch_on_root": 2,
        "shape_depth": 7,
    }


def test_goose_records_the_shape_of_the_verified_tree():
    d = GooseDrafter()
    d.begin([1, 2, 3], torch.zeros(3, 64))
    d.route = "spine_tree"
    tree = hand_tree()
    d.observe(tree, VerifyOutcome(torch.zeros(len(tree), 64), [0] * len(tree), [0, 1], [10, 0]))
    assert d.stats["shape_spine_depth"] == 2 and d.stats["shape_branch_on_spine"] == 4
