"""The argmax read off a sorted top-K (`argmax_of_top`), as a greedy step with `topk_width` takes it: exactly
torch.argmax, ties included (the first maximal index), and the rows whose top-K is all tied flagged."""

from __future__ import annotations

import torch

from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.engine.core.walk import argmax_of_top
from goose.engine.forward.choose import verification_engine
from tests.tiny_models import tiny_model


def _check(logits: torch.Tensor, k: int) -> None:
    top = torch.topk(logits, k, dim=-1)
    pred, unsure = argmax_of_top(top.values, top.indices)
    want = logits.argmax(dim=-1)
    all_tied = (logits == logits.max(dim=-1, keepdim=True).values).sum(dim=-1) >= k
    assert torch.equal(unsure, all_tied)
    assert torch.equal(pred[~unsure], want[~unsure])


def test_argmax_of_top_is_argmax_with_ties():
    gen = torch.Generator().manual_seed(0)
    for k in (1, 2, 4, 10):
        # small integers: many rows with a tied maximum, some with k or more tied
        logits = torch.randint(0, 6, (400, 40), generator=gen).float()
        _check(logits, k)
        _check(logits.to(torch.bfloat16), k)
        _check(torch.randn(50, 300, generator=gen), k)


def test_the_top_k_first_index_alone_is_not_argmax():
    """The broken variant, topk's first index, differs from argmax on tied rows (topk orders ties freely),
    so the tie rule above is what makes the two agree."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randint(0, 8, (400, 12), generator=gen).float()
    top = torch.topk(logits, 4, dim=-1)
    assert not torch.equal(top.indices[:, 0], logits.argmax(dim=-1))
    pred, unsure = argmax_of_top(top.values, top.indices)
    assert torch.equal(pred[~unsure], logits.argmax(dim=-1)[~unsure]) and bool((~unsure).any())


def test_a_step_with_topk_width_returns_the_top_and_the_same_walk():
    """`topk_width` K > 0: the greedy step hands over every node's sorted top-K (torch.topk of its logits),
    with predictions, accepted path and committed tokens those of the plain argmax step; 0: no top. A tree
    whose logits are all tied (a zero LM head) takes the fallback and still walks as argmax says."""
    for zero_head in (False, True):
        model = tiny_model("llama", seed=3)
        if zero_head:
            with torch.no_grad():
                model.lm_head.weight.zero_()
        engine = verification_engine(model, eos_token_ids=(), context_length=128)
        prompt = list(range(5, 17))
        runs = []
        for width in (0, 4):
            engine.topk_width = width
            engine.prefill(prompt, max_new_tokens=8)
            a = engine.first_token
            tree = DraftTree([a, 3, 7, 3, 9], [-1, 0, 0, 1, 1], [ROOT, SPINE, BRANCH, SPINE, BRANCH])
            out = engine.verify(tree, budget=8)
            runs.append(out)
        plain, topped = runs
        assert plain.top is None and topped.top is not None
        assert (plain.predictions, plain.accepted_nodes, plain.new_tokens) == (
            topped.predictions,
            topped.accepted_nodes,
            topped.new_tokens,
        )
        want = torch.topk(topped.logits, 4, dim=-1)
        assert torch.equal(topped.top[0], want.values) and torch.equal(topped.top[1], want.indices)
        assert plain.predictions == topped.logits.argmax(dim=-1).tolist()
