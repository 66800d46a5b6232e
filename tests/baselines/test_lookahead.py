"""Lookahead decoding: the tree of the two branches, the n-gram pool after hand-driven steps (fake outcomes,
no model), and identity with AR on a tiny random model, greedy and sampled."""

from __future__ import annotations

import pytest
import torch

from baselines.lookahead import LookaheadDrafter
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, VerifyOutcome
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import BRANCH, LOOKAHEAD, ROOT, DraftTree
from goose.engine.forward.choose import verification_engine
from goose.sources.ngram_pool import NgramPool
from tests.tiny_models import ARCHS, tiny_model


def step(drafter: LookaheadDrafter, committed: list[int], predict: dict[int, int]) -> DraftTree:
    """propose, then observe a fake outcome: nothing accepted, argmax of node i = predict.get(token of i)."""
    tree = drafter.propose(committed)
    tree.validate()
    preds = [predict.get(t, 0) for t in tree.tokens]
    drafter.observe(tree, VerifyOutcome(torch.zeros(0), preds, [0], [preds[0]]))
    return tree


def started(window: int, ngram: int, level0: list[int], guesses: int = 2) -> LookaheadDrafter:
    d = LookaheadDrafter(window=window, ngram=ngram, guesses=guesses)
    d.begin([7, 8, 9], torch.zeros(3, 4))
    assert len(d.levels[0]) == window + ngram - 3 and set(d.levels[0]) <= {7, 8, 9}  # prompt tokens
    d.levels[0] = list(level0)  # hand-set initial window
    return d


def test_pool_after_two_steps_n3():
    """W = 3, N = 3: step 1 fills level 1 from the level-0 chain's argmaxes; step 2 reads one n-gram per
    column: (hang token, level-1 token, its argmax)."""
    d = started(3, 3, [20, 21, 22])
    t1 = step(d, [7, 8, 9, 1], {20: 30, 21: 31, 22: 32})
    assert t1.tokens == [1, 20, 21, 22] and t1.parents == [-1, 0, 1, 2] and t1.accept_limit == 1
    assert t1.sources == [ROOT] + [LOOKAHEAD] * 3
    assert d.levels == [[21, 22], [30, 31, 32]] and len(d.pool) == 0
    t2 = step(d, [7, 8, 9, 1, 2], {30: 40, 31: 41, 32: 42})
    # level 0 chain 21 -> 22 off the anchor; column j hangs off the anchor (j = 0) or level-0 node j - 1
    assert t2.tokens == [2, 21, 22, 30, 31, 32]
    assert t2.parents == [-1, 0, 1, 0, 1, 2]
    assert t2.depths == [0, 1, 2, 1, 2, 3]  # position = prefix + depth, as the reference's position ids
    assert d.pool.as_dict() == {2: [(30, 40)], 21: [(31, 41)], 22: [(32, 42)]}
    assert d.levels == [[31, 32], [40, 41, 42]]  # one Jacobi step: level 0 <- level 1[1:], level 1 <- new


def test_pool_and_verification_branch_n4():
    """W = 2, N = 4: two fill steps, then the n-grams run down each column (hang, level 1, level 2, argmax);
    the next step with that anchor verifies them as a BRANCH trie before the window (accept_limit)."""
    d = started(2, 4, [20, 21, 22])
    step(d, [1], {20: 30, 21: 31, 22: 32})
    assert d.levels == [[21, 22], [30, 31, 32], None]
    t2 = step(d, [1, 2], {30: 40, 31: 41, 32: 42})
    assert t2.tokens == [2, 21, 22, 30, 31, 32] and t2.parents == [-1, 0, 1, 0, 1, 2]
    assert d.levels == [[22], [31, 32], [41, 42]] and len(d.pool) == 0  # filled: each level drops one
    t3 = step(d, [1, 2, 3], {41: 51, 42: 52})
    assert t3.tokens == [3, 22, 31, 32, 41, 42] and t3.parents == [-1, 0, 0, 1, 2, 3]
    assert d.pool.as_dict() == {3: [(31, 41, 51)], 22: [(32, 42, 52)]}
    assert d.levels == [[32], [41, 42], [51, 52]]
    d.pool.add(3, (31, 9, 9))  # a second n-gram of the anchor: shares the first token in the trie
    t4 = d.propose([1, 2, 3, 3])
    t4.validate()
    assert t4.tokens[:6] == [3, 31, 41, 51, 9, 9] and t4.parents[:6] == [-1, 0, 1, 2, 1, 4]
    assert t4.sources[:6] == [ROOT] + [BRANCH] * 5 and t4.accept_limit == 6
    assert t4.sources[6:] == [LOOKAHEAD] * (len(t4) - 6) and d.route == "lookahead"


def test_pool_keeps_the_newest_g_per_key():
    pool = NgramPool(2)
    for gram in [(1,), (2,), (1,), (3,)]:
        pool.add(5, gram)
    assert pool.get(5) == [(1,), (3,)]  # (1,) re-added moved to the end, then (2,) dropped


def test_advance_by_accepted_skips_accepted_positions():
    d = started(2, 3, [20, 21])
    step(d, [1], {20: 30, 21: 31})  # levels [[21], [30, 31]]
    tree = d.propose([1, 2])
    preds = [0] * len(tree)
    preds[tree.tokens.index(30)], preds[tree.tokens.index(31)] = 40, 41
    d.advance_by_accepted = True
    d.observe(tree, VerifyOutcome(torch.zeros(0), preds, [0, 1], [5, 6]))  # as if one token was accepted
    assert len(d.levels[0]) == 1 and d.levels[0][0] in (1, 2)  # level 1[2:] is empty: one prompt token
    assert d.levels[1][0] == 41 and len(d.levels[1]) == 2 and d.levels[1][1] in (1, 2)  # new[1:] + padding


def test_a_cut_tree_leaves_the_window_unchanged():
    d = started(3, 3, [20, 21, 22])
    tree = d.propose([1]).truncate_depth(1)
    d.observe(tree, VerifyOutcome(torch.zeros(0), [0] * len(tree), [0], [0]))
    assert d.levels == [[20, 21, 22], None] and d.stats["lookahead_window_cut"] == 1


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_identical_to_ar(arch, temperature):
    """Greedy: AR's tokens; T = 0.7: AR's sample with the same seed (drafts never depend on the sample)."""
    model = tiny_model(arch, seed=1, vocab=24)  # a small vocabulary: n-grams recur and get accepted
    prompt = [3, 5, 7, 3, 5, 7, 3, 5, 7, 2, 4]
    sampling = SamplingParams(temperature=temperature)
    drafter = LookaheadDrafter(window=4, ngram=3, guesses=4)
    outs, forwards, drafted = [], [], []
    for make in (ARDrafter, lambda: drafter):
        engine = verification_engine(model, eos_token_ids=(), context_length=256)
        steps: list[int] = []
        gen = generate(
            engine,
            make(),
            prompt,
            60,
            sampling=sampling,
            seed=11,
            on_step=lambda tree, outcome, record, steps=steps: steps.append(tree.acceptable - 1),
        )
        outs.append(gen.output_ids)
        forwards.append(gen.forward_calls)
        accepted = gen.totals("accepted")
        drafted.append((sum(steps), gen.totals("offered"), sum(gen.shape_totals()["depth_offered"])))
    assert outs[0] == outs[1]
    verified, offered, by_depth = drafted[1]
    # the Jacobi nodes are forwarded but never drafts: only the verification branch is counted
    assert offered == {"spine": 0, "branch": verified} and by_depth == verified
    assert accepted["branch"] > 0  # n-grams of the pool were accepted: the identity is not vacuous
