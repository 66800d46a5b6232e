"""The self-draft (baselines/self_draft/): identical to AR at T = 0 for every shape on Llama and Gemma 3,
skip sets never touching the first or last layer, bad skip sets refused with the field and the range, the
proposal contract (children in their parent's truncated q, which sums to 1; i.i.d. paths as a trie) and the
counters of the result row."""

from __future__ import annotations

import pytest

from baselines.self_draft import SHAPES, SelfDraftDrafter
from baselines.self_draft.search import skip_count, skippable
from goose.engine.core.decode import generate
from goose.engine.core.draft_forward import DraftForward
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.choose import verification_engine
from tests.baselines.self_draft_models import deep_tiny_model
from tests.toy_harness import one_thread  # noqa: F401  (fixture: one intra-op thread)

PROMPTS = [
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3, 4, 5, 11, 12],
    [40, 41, 7, 7, 7, 50, 3, 40, 41, 7, 9, 22, 23, 60, 61, 62, 40, 41],
]
LAYERS = 6


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def engine(request) -> VerificationEngine:
    return verification_engine(deep_tiny_model(request.param, LAYERS), eos_token_ids=(), context_length=256)


@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_output_is_ar_token_for_token(engine, shape):
    drafted = 0
    for prompt in PROMPTS:
        ar = generate(engine, ARDrafter(), prompt, 40)
        for drafter in (
            SelfDraftDrafter(shape=shape, confidence=0.2),  # searched skip set
            SelfDraftDrafter(shape=shape, confidence=0.0, skip_attention=[1, 3], skip_mlp=[2, 4]),
        ):
            gen = generate(engine, drafter, prompt, 40)
            assert gen.output_ids == ar.output_ids, (shape, drafter.config())
            drafted += gen.drafter_stats["drafted_nodes"]
            assert gen.forward_calls <= ar.forward_calls
    assert drafted > 0


def test_searched_skip_sets_never_hold_the_first_or_last_layer(engine):
    assert all(1 <= i <= LAYERS - 2 for _, i in skippable(LAYERS))
    assert len(skippable(LAYERS)) == 2 * (LAYERS - 2)
    for ratio in (0.3, 0.45, 1.0):
        for prompt in PROMPTS:
            gen = generate(engine, SelfDraftDrafter(skip_ratio=ratio, search_trials=6), prompt, 4)
            stats = gen.drafter_stats
            chosen = stats["skip_attention"] + stats["skip_mlp"]
            assert len(chosen) == skip_count(LAYERS, ratio)
            assert all(1 <= i <= LAYERS - 2 for i in chosen), stats
            assert 0.0 <= stats["skip_matchness"] <= 1.0 and stats["search_forwards"] >= 1


def test_bad_skip_sets_are_refused_with_the_field_and_the_range(engine):
    with pytest.raises(ValueError, match=r"SelfDraftDrafter.skip_attention = \[0, 2\]: .*first layer"):
        SelfDraftDrafter(skip_attention=[0, 2])
    with pytest.raises(ValueError, match=r"SelfDraftDrafter.skip_mlp = \[2, 2\]: .*distinct"):
        SelfDraftDrafter(skip_mlp=[2, 2])
    for field, layers, bad in (("skip_mlp", [2, 5], [5]), ("skip_attention", [9], [9])):
        drafter = SelfDraftDrafter(**{field: layers})
        message = rf"SelfDraftDrafter.{field} = \[.*\]: layer\(s\) \{bad}.*only 1..4 may be skipped"
        with pytest.raises(
            ValueError, match=message.replace("{bad}", str(bad).replace("[", r"\[").replace("]", r"\]"))
        ):
            generate(engine, drafter, PROMPTS[0], 4)
    with pytest.raises(
        ValueError, match="SelfDraftDrafter.shape = 'star': must be one of chain, tree, iid, delayed"
    ):
        SelfDraftDrafter(shape="star")


def _first_tree(engine, drafter, params, prompt, seed):
    """The drafter's first tree after a prefill, without verifying it."""
    drafter.set_sampling(params, seed)
    logits = engine.prefill(prompt, max_new_tokens=16, all_logits=True, sampling=params, seed=seed)
    drafter.use_draft_forward(DraftForward(engine))
    drafter.begin(prompt, logits)
    return drafter.propose([*prompt, engine.first_token])


@pytest.mark.parametrize("shape", SHAPES)
def test_sampled_drafts_lie_in_their_parents_truncated_q(engine, shape):
    params = SamplingParams(temperature=1.0)
    for seed in range(5):
        drafter = SelfDraftDrafter(shape=shape, top_k=5, confidence=0.0, skip_attention=[2], skip_mlp=[3])
        tree = _first_tree(engine, drafter, params, PROMPTS[seed % 2], seed)
        tree.validate()  # no repeated token under a parent; every child in its parent's support
        assert len(tree) > 1 and tree.proposals is not None
        for u, q in enumerate(tree.proposals):
            has_children = any(p == u for p in tree.parents[1:])
            assert (q is not None) == has_children
            if q is not None:
                assert len(q[0]) <= 5 and abs(sum(q[1]) - 1.0) < 1e-12 and min(q[1]) > 0.0
        if shape in ("iid", "delayed"):
            assert tree.paths is not None and len(tree.paths) == drafter.paths
            trunk = drafter.trunk if shape == "delayed" else 0  # the paths start after the trunk
            assert tree.depths[tree.parents[tree.paths[0][0]]] == trunk
            for path in tree.paths:
                assert [tree.parents[v] for v in path[1:]] == list(path[:-1])
                assert tree.parents[path[0]] == tree.parents[tree.paths[0][0]]
                assert len(path) == drafter.path_length
        else:
            assert tree.paths is None


@pytest.mark.parametrize("verifier", ["auto", "rrs_iid", "traversal", "gbv"])
def test_iid_shapes_run_at_t_above_0_under_their_verifiers(engine, verifier):
    for shape in ("iid", "delayed"):
        params = SamplingParams(temperature=1.0, verifier=verifier)
        engine.sampling = params
        gen = generate(engine, SelfDraftDrafter(shape=shape, confidence=0.0), PROMPTS[0], 12, sampling=params)
        assert len(gen.output_ids) == 12 and gen.tau >= 1.0


def test_row_counters_give_the_skip_set_and_the_draft_cost_in_sub_layers(engine):
    drafter = SelfDraftDrafter(
        shape="chain", confidence=0.0, max_depth=3, skip_attention=[1, 2], skip_mlp=[4]
    )
    gen = generate(engine, drafter, PROMPTS[0], 20)
    stats = gen.drafter_stats
    assert stats["skip_attention"] == [1, 2] and stats["skip_mlp"] == [4]
    assert (
        stats["sublayers_per_forward"] == 2 * LAYERS
        and stats["draft_sublayers_per_forward"] == 2 * LAYERS - 3
    )
    # confidence 0: every step drafts max_depth tokens with max_depth forwards (the last node needs none)
    assert stats["mean_drafted_nodes"] == 3.0 == stats["drafted_nodes"] / stats["steps"]
    assert stats["draft_forwards"] == 3 * stats["steps"]
    assert stats["draft_sublayers"] == stats["draft_forwards"] * (2 * LAYERS - 3)
    assert stats["draft_cost_per_step"] == pytest.approx(3 * (2 * LAYERS - 3) / (2 * LAYERS))
