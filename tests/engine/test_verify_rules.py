"""The draft trees' i.i.d. paths through cuts, the with-replacement rounds they imply, and STAND's draft
shapes (chain, K i.i.d. paths, delayed) with the contract the verifiers rely on."""

from __future__ import annotations

import pytest

from baselines.stand import StandConfig, StandDrafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import BRANCH, DraftTree
from goose.engine.core.verify.inputs import Dist
from goose.engine.core.verify.rules import check_verifier
from goose.engine.core.verify.view import SampledTree


def _trie() -> DraftTree:
    """Paths (a, b), (a, c), (d, e) from the anchor."""
    tree = DraftTree.single(9)
    a = tree.add(1, 0, BRANCH)
    b = tree.add(2, a, BRANCH)
    c = tree.add(3, a, BRANCH)
    d = tree.add(4, 0, BRANCH)
    e = tree.add(5, d, BRANCH)
    tree.paths = [(a, b), (a, c), (d, e)]
    return tree


def test_paths_survive_cuts_as_their_kept_prefixes():
    tree = _trie()
    assert tree.prefix(4).paths == [(1, 2), (1, 3), ()]
    assert tree.truncate_depth(1).paths == [(1,), (1,), (2,)]
    assert tree.truncate_depth(1).tokens == [9, 1, 4]


def test_i_i_d_rounds_repeat_a_shared_draw_once_per_path():
    tree = _trie()
    view = SampledTree(
        tree.tokens, tree.parents, tree.children(), [None] * 6, [Dist({}, 1.0)] * 6, tree.paths
    )
    assert view.raw_draws() == [[1, 1, 4], [2, 3], [], [], [5], []]
    assert view.branch_point() == 0 and view.num_paths() == 3


def test_rules_name_the_shapes_each_verifier_needs():
    check_verifier("gbv", samples_drafts=True, shape="delayed", temperature=1.0, method="m")
    with pytest.raises(ValueError, match="chain"):
        check_verifier("block", samples_drafts=True, shape="iid", temperature=1.0, method="m")
    check_verifier("auto", samples_drafts=False, shape="tree", temperature=0.0, method="m")


def _propose(shape: str, **kw) -> DraftTree:
    drafter = StandDrafter(shape=shape, k=4, max_order=1, **kw)
    drafter.set_sampling(SamplingParams(temperature=1.0), seed=3)
    import torch

    vocab = 6
    prompt = [0, 1, 2, 3, 4, 5] * 3
    logits = torch.randn(len(prompt), vocab, generator=torch.Generator().manual_seed(0))
    drafter.begin(prompt, logits)
    return drafter.propose(prompt)


def test_stand_chain_is_a_chain_with_its_proposals():
    tree = _propose("chain", max_depth=4)
    assert len(tree) > 2 and all(len(k) <= 1 for k in tree.children())
    assert all(tree.proposals[u] is not None for u in range(len(tree)) if tree.children()[u])


@pytest.mark.parametrize(("shape", "trunk"), [("iid", 0), ("delayed", 2)])
def test_stand_paths_are_the_k_draws_merged_into_their_trie(shape, trunk):
    tree = _propose(shape, num_paths=3, trunk_len=2, path_len=2)
    tree.validate()  # no token twice under one parent
    assert len(tree.paths) == 3 and all(len(p) == 2 for p in tree.paths)
    branch = {tree.parents[p[0]] for p in tree.paths}
    assert len(branch) == 1 and tree.depths[branch.pop()] == trunk
    for path in tree.paths:
        for parent, child in zip(path, path[1:], strict=False):
            assert tree.parents[child] == parent
    assert len(tree) <= 1 + trunk + 3 * 2


def test_stand_config_omits_the_shape_fields_of_a_tree_and_checks_the_budget():
    assert "shape" not in StandConfig().as_dict() and "num_paths" not in StandConfig().as_dict()
    assert StandConfig(shape="delayed").as_dict()["trunk_len"] == 2
    with pytest.raises(ValueError, match="StandDrafter.budget"):
        StandConfig(shape="iid", num_paths=8, path_len=8, budget=40)
    with pytest.raises(ValueError, match="StandDrafter.shape"):
        StandConfig(shape="star")
