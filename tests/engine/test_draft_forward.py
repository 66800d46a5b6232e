"""The engine's skipped forward for self-drafts (goose.engine.core.draft_forward): a skipped sub-layer is the
identity (the same logits as the model with that block's output projection zeroed), an unskipped draft tree
run level by level gives the full model's logits of every node's path, and the committed cache rows and
lengths are never changed."""

from __future__ import annotations

import copy

import pytest
import torch

from goose.engine.core.backend import SkipSet
from goose.engine.core.draft_forward import DraftForward
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.choose import verification_engine
from tests.baselines.self_draft_models import deep_tiny_model
from tests.toy_harness import one_thread  # noqa: F401  (fixture: one intra-op thread)

PROMPT = [5, 9, 1, 7, 7, 3, 12, 40, 2, 8, 5, 9, 1, 30]  # longer than Gemma's window of 5
ARCHS = ("llama", "gemma3")


def _zeroed(model: torch.nn.Module, skip: SkipSet) -> torch.nn.Module:
    """A copy of `model` whose skipped blocks add nothing: o_proj / down_proj weights zero (Gemma's
    post-norms of a zero vector are zero too)."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        for i, layer in enumerate(out.model.layers):
            if i in skip.attention:
                layer.self_attn.o_proj.weight.zero_()
            if i in skip.mlp:
                layer.mlp.down_proj.weight.zero_()
    return out


def _logits(
    full: torch.nn.Module, skipped: torch.nn.Module, prefix: list[int], rest: list[int]
) -> torch.Tensor:
    """Logits after prefix + rest: `prefix` run by the full model into a cache, `rest` by the skipped one
    over that cache (a draft's view: committed rows are the full model's)."""
    with torch.no_grad():
        cache = full(input_ids=torch.tensor([prefix]), use_cache=True).past_key_values
        return skipped(input_ids=torch.tensor([rest]), cache=cache, use_cache=True).logits[0, -1]


def _engine(arch: str) -> VerificationEngine:
    engine = verification_engine(deep_tiny_model(arch), eos_token_ids=(), context_length=128)
    engine.prefill(PROMPT, max_new_tokens=16)
    return engine


# a small tree after the prefix: anchor 0; children 1, 2; grandchildren 3 (of 1), 4 (of 2); 5 (of 3)
TOKENS = [11, 4, 17, 23, 4, 60]
PARENTS = [-1, 0, 0, 1, 2, 3]
LEVELS = [(0, 1), (1, 3), (3, 5), (5, 6)]  # nodes run per call


def _path(node: int) -> list[int]:
    out = []
    while node >= 0:
        out.append(TOKENS[node])
        node = PARENTS[node]
    return out[::-1]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("skip", [SkipSet(), SkipSet(frozenset({2, 3}), frozenset({1, 4}))])
def test_tree_logits_equal_the_model_with_the_skipped_blocks_zeroed(arch, skip):
    engine = _engine(arch)
    reference = _zeroed(engine.model, skip)
    fwd = DraftForward(engine)
    for first, end in LEVELS:
        logits = fwd.tree(TOKENS[:end], PARENTS[:end], first, skip)
        for row, node in enumerate(range(first, end)):
            want = _logits(engine.model, reference, PROMPT, _path(node))
            torch.testing.assert_close(logits[row], want, rtol=1e-4, atol=1e-4)
    assert fwd.forwards == len(LEVELS)
    assert fwd.sublayers_run == len(LEVELS) * skip.sublayers_run(engine.num_layers)


@pytest.mark.parametrize("arch", ARCHS)
def test_context_scoring_sees_the_prefix_before_the_window_and_the_skipped_window(arch):
    """`context`: the window's own rows are skipped rows, the rows before it the full model's."""
    engine = _engine(arch)
    skip = SkipSet(frozenset({3}), frozenset({2, 4}))
    reference = _zeroed(engine.model, skip)
    start = 8
    logits = DraftForward(engine).context(PROMPT[start:], start, skip)
    for row, j in enumerate(range(start, len(PROMPT))):
        torch.testing.assert_close(
            logits[row],
            _logits(engine.model, reference, PROMPT[:start], PROMPT[start : j + 1]),
            rtol=1e-4,
            atol=1e-4,
        )


@pytest.mark.parametrize("arch", ARCHS)
def test_draft_forwards_leave_the_committed_prefix_untouched(arch):
    engine = _engine(arch)
    p = engine.prefix_len
    before = engine.cache.storage[:, :, :, :, :p].clone()
    fwd = DraftForward(engine)
    skip = SkipSet(frozenset({1}), frozenset({2}))
    for first, end in LEVELS:
        fwd.tree(TOKENS[:end], PARENTS[:end], first, skip)
        assert all(layer.length == p for layer in engine.cache.layers)
    fwd.context(PROMPT[4:], 4, skip)
    assert engine.prefix_len == p and all(layer.length == p for layer in engine.cache.layers)
    assert torch.equal(engine.cache.storage[:, :, :, :, :p], before)


def test_bad_calls_are_refused():
    engine = _engine("llama")
    fwd = DraftForward(engine)
    with pytest.raises(
        ValueError, match=r"attention layer\(s\) \[6\] out of range; the model has layers 0..5"
    ):
        fwd.tree([1], [-1], 0, SkipSet(frozenset({6}), frozenset()))
    with pytest.raises(RuntimeError, match="earlier nodes"):
        fwd.tree([1, 2], [-1, 0], 1, SkipSet())  # node 0 was never run
    fwd.tree([1], [-1], 0, SkipSet())
    with pytest.raises(RuntimeError, match="differ"):
        fwd.tree([3, 2], [-1, 0], 1, SkipSet())
    with pytest.raises(ValueError, match="not inside the prefix"):
        fwd.context(PROMPT, 1, SkipSet())
