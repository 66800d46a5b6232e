"""The verification engine on tiny random models of each architecture: tree logits equal
sequential decoding along each node's path, compaction leaves the cache of the accepted tokens,
the walk and the stop rules."""

from __future__ import annotations

import random

import pytest
import torch

from baselines.ar import ARDrafter
from goose.decode import generate
from goose.engine import VerificationEngine, cut_at_stop, greedy_walk
from goose.tree import BRANCH, SPINE, DraftTree, ancestor_matrix, tree_attention_inputs
from tests.tiny_models import ARCHS, VOCAB, tiny_model


def sequential_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


def greedy_continuation(model, ids: list[int], n: int) -> list[int]:
    out = []
    for _ in range(n):
        out.append(int(sequential_logits(model, ids + out).argmax()))
    return out


def path_tokens(tree: DraftTree, node: int) -> list[int]:
    toks = []
    while node >= 0:
        toks.append(tree.tokens[node])
        node = tree.parents[node]
    return toks[::-1]


def test_ancestor_mask_and_positions_hand_built():
    #      0
    #     / \
    #    1   2
    #    |    \
    #    3     4
    #          |
    #          5
    tree = DraftTree([10, 11, 12, 13, 14, 15], [-1, 0, 0, 1, 2, 4], [0, SPINE, BRANCH, SPINE, BRANCH, BRANCH])
    assert tree.depths == [0, 1, 1, 2, 2, 3]
    ids, pos, vis = tree_attention_inputs(tree, prefix_len=4)
    assert ids.tolist() == [[10, 11, 12, 13, 14, 15]]
    assert pos.tolist() == [[4, 5, 5, 6, 6, 7]]
    assert vis[:, :4].all()
    expected = [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 0],
        [1, 0, 1, 0, 1, 0],
        [1, 0, 1, 0, 1, 1],
    ]
    assert vis[:, 4:].int().tolist() == expected


def test_ancestor_matrix_deep_chain():
    n = 100
    parents = torch.tensor([-1] + list(range(n - 1)))
    anc = ancestor_matrix(parents, max_depth=n - 1)
    assert torch.equal(anc, torch.ones(n, n, dtype=torch.bool).tril())


def test_greedy_walk_spine_wins_tie_and_leaves_through_branch():
    # root(5) -> spine 7 -> spine 8 ; root -> branch 7 (same token: spine must win)
    # spine 7 -> branch 9 -> branch 4
    tree = DraftTree.single(5)
    tree.add(7, 0, BRANCH)  # 1
    s1 = tree.add(7, 0, SPINE)  # 2 (duplicate token on purpose, to test the tie rule)
    tree.add(8, s1, SPINE)  # 3
    b = tree.add(9, s1, BRANCH)  # 4
    tree.add(4, b, BRANCH)  # 5
    preds = [7, 0, 9, 0, 4, 1]
    assert greedy_walk(tree, preds) == [0, 2, 4, 5]
    assert greedy_walk(tree, [3, 0, 0, 0, 0, 0]) == [0]


def test_cut_at_stop():
    assert cut_at_stop([1, 2, 3, 4], eos_token_ids=(3,), budget=10) == [1, 2, 3]
    assert cut_at_stop([1, 2, 3, 4], eos_token_ids=(9,), budget=2) == [1, 2]
    assert cut_at_stop([1, 2], eos_token_ids=(9,), budget=0) == []


def random_tree(rng: random.Random, anchor: int, good_path: list[int], n_extra: int) -> DraftTree:
    """A tree holding `good_path` (the model's greedy continuation) behind a decoy first child,
    so that the accepted path is not contiguous in node order, plus random branches."""
    tree = DraftTree.single(anchor)
    decoy = (good_path[0] + 1) % VOCAB
    tree.add(decoy, 0, BRANCH)
    parent = 0
    for tok in good_path:
        parent = tree.add(tok, parent, SPINE)
    while len(tree) < 2 + len(good_path) + n_extra:
        p = rng.randrange(len(tree))
        tok = rng.randrange(VOCAB)
        if any(tree.parents[c] == p and tree.tokens[c] == tok for c in range(1, len(tree))):
            continue
        tree.add(tok, p, BRANCH)
    tree.validate()
    return tree


@pytest.mark.parametrize("arch", ARCHS)
def test_tree_logits_equal_sequential_and_cache_compacts(arch):
    model = tiny_model(arch)
    engine = VerificationEngine(model, eos_token_ids=(), context_length=256)
    rng = random.Random(1)
    prefix = [rng.randrange(VOCAB) for _ in range(12)]
    prefill_logits = engine.prefill(prefix)
    assert torch.allclose(prefill_logits[-1], sequential_logits(model, prefix), atol=1e-4)
    anchor = int(prefill_logits[-1].argmax())
    good = greedy_continuation(model, prefix + [anchor], 3)
    tree = random_tree(rng, anchor, good, n_extra=10)
    outcome = engine.verify(tree, budget=100)
    # every node's logits equal sequential decoding along its path
    for node in range(len(tree)):
        ref = sequential_logits(model, prefix + path_tokens(tree, node))
        assert torch.allclose(outcome.logits[node], ref, atol=1e-4), f"node {node}"
    # the greedy path was accepted (at least the 3 planted tokens) and is non-contiguous
    assert outcome.new_tokens[:3] == good
    assert outcome.accepted_nodes[1] == 2
    # the compacted cache equals the cache of decoding the committed tokens one by one
    committed = prefix + [anchor] + [tree.tokens[i] for i in outcome.accepted_nodes[1:]]
    ref_engine = VerificationEngine(model, eos_token_ids=(), context_length=256)
    ref_engine.prefill(prefix)
    for tok in committed[len(prefix) :]:
        ref_engine.verify(DraftTree.single(tok), budget=100)
    assert engine.prefix_len == ref_engine.prefix_len == len(committed)
    for got, ref in zip(engine.cache.layers, ref_engine.cache.layers):
        assert got.keys.shape == ref.keys.shape
        assert torch.allclose(got.keys, ref.keys, atol=1e-5)
        assert torch.allclose(got.values, ref.values, atol=1e-5)
    # and decoding continues correctly from the compacted cache
    nxt = outcome.new_tokens[-1]
    out2 = engine.verify(DraftTree.single(nxt), budget=100)
    assert out2.predictions[0] == int(sequential_logits(model, committed + [nxt]).argmax())


@pytest.mark.parametrize("arch", ARCHS)
def test_ar_generation_equals_sequential_greedy(arch):
    model = tiny_model(arch, seed=3)
    engine = VerificationEngine(model, eos_token_ids=(), context_length=256)
    prompt = list(range(5, 15))
    gen = generate(engine, ARDrafter(), prompt, max_new_tokens=12)
    assert gen.output_ids == greedy_continuation(model, prompt, 12)
    assert gen.forward_calls == 12 and gen.tau == 1.0


def test_generation_stops_at_eos_and_budget():
    model = tiny_model("llama", seed=3)
    prompt = list(range(5, 15))
    ref = greedy_continuation(model, prompt, 8)
    eos = ref[3]
    first = ref.index(eos)
    gen = generate(VerificationEngine(model, eos_token_ids=(eos,)), ARDrafter(), prompt, max_new_tokens=8)
    assert gen.output_ids == ref[: first + 1]
    gen0 = generate(VerificationEngine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=0)
    assert gen0.output_ids == [] and gen0.forward_calls == 0
