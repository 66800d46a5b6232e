"""The verification engine on tiny random models of each architecture: tree logits equal
sequential decoding along each node's path, compaction leaves the cache of the accepted tokens,
the walk and the stop rules."""

from __future__ import annotations

import random

import pytest
import torch

from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.tree import BRANCH, SPINE, DraftTree, ancestor_matrix, tree_attention_inputs
from goose.engine.core.verifier import NonFiniteLogitsError
from goose.engine.core.walk import cut_at_stop, greedy_walk
from goose.engine.forward.choose import verification_engine
from goose.engine.forward.packed_linear import prepack_unavailable
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
    inputs = tree_attention_inputs(tree, prefix_len=4)
    assert inputs.tokens[None].tolist() == [[10, 11, 12, 13, 14, 15]]
    assert inputs.positions[None].tolist() == [[4, 5, 5, 6, 6, 7]]
    # the engine's additive mask over the 4 cached prefix rows + the 6 nodes (0 = may attend)
    engine = verification_engine(tiny_model("llama"), eos_token_ids=())
    engine.prefill([1, 2, 3, 4])
    vis = engine._tree_mask(inputs.ancestors, inputs.positions, max(tree.depths))[0, 0] == 0
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
    chain = DraftTree.chain(1, list(range(2, n + 1)))  # the input builder's shortcut for chains
    assert torch.equal(tree_attention_inputs(chain, prefix_len=0).ancestors, anc)


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


@pytest.mark.parametrize("lean,prepack", [(None, None), (None, False), (False, None)])
@pytest.mark.parametrize("arch", ARCHS)
def test_tree_logits_equal_sequential_and_cache_compacts(arch, lean, prepack):
    model = tiny_model(arch)
    engine = verification_engine(model, eos_token_ids=(), context_length=256, lean=lean, prepack=prepack)
    assert (engine.lean is not None) == (lean is None and arch in ("llama", "qwen3", "gemma3"))
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
    ref_engine = verification_engine(model, eos_token_ids=(), context_length=256)
    ref_engine.prefill(prefix)
    for tok in committed[len(prefix) :]:
        ref_engine.verify(DraftTree.single(tok), budget=100)
    assert engine.prefix_len == ref_engine.prefix_len == len(committed)
    for got, ref in zip(engine.cache.layers, ref_engine.cache.layers, strict=True):
        assert got.keys.shape == ref.keys.shape
        assert torch.allclose(got.keys, ref.keys, atol=1e-5)
        assert torch.allclose(got.values, ref.values, atol=1e-5)
    # and decoding continues correctly from the compacted cache
    nxt = outcome.new_tokens[-1]
    out2 = engine.verify(DraftTree.single(nxt), budget=100)
    assert out2.predictions[0] == int(sequential_logits(model, committed + [nxt]).argmax())


@pytest.mark.parametrize("arch", ARCHS)
def test_a_replayable_forward_gives_the_step_logits_and_leaves_the_sequence(arch):
    model = tiny_model(arch)
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
    rng = random.Random(2)
    prefix = [rng.randrange(VOCAB) for _ in range(12)]
    anchor = int(engine.prefill(prefix)[-1].argmax())
    tree = random_tree(rng, anchor, greedy_continuation(model, prefix + [anchor], 3), n_extra=10)
    one = DraftTree.single(anchor)
    forward, forward_one = engine.replayable_forward(tree), engine.replayable_forward(one)
    first = forward()
    for _ in range(2):  # the same buffers, again and again, whatever ran in between
        assert torch.equal(forward_one(), forward_one())
        assert torch.equal(forward(), first)
    assert engine.prefix_len == engine.cache.length == len(prefix)
    outcome = engine.verify(tree, budget=100)  # the step itself, on the untouched sequence
    assert torch.equal(outcome.logits, first)
    ref = verification_engine(model, eos_token_ids=(), context_length=256)
    ref.prefill(prefix)
    assert ref.verify(tree, budget=100).new_tokens == outcome.new_tokens


@pytest.mark.parametrize("arch", ARCHS)
def test_ar_generation_equals_sequential_greedy(arch):
    model = tiny_model(arch, seed=3)
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
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
    gen = generate(verification_engine(model, eos_token_ids=(eos,)), ARDrafter(), prompt, max_new_tokens=8)
    assert gen.output_ids == ref[: first + 1]
    gen0 = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=0)
    assert gen0.output_ids == [] and gen0.forward_calls == 0


def test_ancestor_matrix_matches_python_reference():
    rng = random.Random(5)
    for n in (1, 2, 7, 40, 130):
        parents = [-1] + [rng.randrange(i) for i in range(1, n)]
        ref = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            j = i
            while j >= 0:
                ref[i, j] = True
                j = parents[j]
        tree = DraftTree(list(range(n)), parents, [0] + [BRANCH] * (n - 1))
        for bound in (None, max(tree.depths)):
            assert torch.equal(ancestor_matrix(torch.tensor(parents), bound), ref), (n, bound)


@pytest.mark.parametrize("arch", ARCHS)
def test_chain_and_tree_paths_agree_with_ar(arch):
    """A chain (lower-triangular fast path) and a planted tree commit what AR commits; the prefix
    length and the next predictions agree afterwards."""
    model = tiny_model(arch, seed=2)
    prefix = list(range(20, 34))  # longer than gemma3's window of 5
    ref = greedy_continuation(model, prefix, 8)
    for make in ("chain", "tree"):
        engine = verification_engine(model, eos_token_ids=(), context_length=256)
        anchor = int(engine.prefill(prefix)[-1].argmax())
        assert anchor == engine.first_token == ref[0]
        if make == "chain":
            tree = DraftTree.chain(anchor, ref[1:5] + [(ref[5] + 1) % VOCAB])
        else:
            tree = random_tree(random.Random(3), anchor, ref[1:5], n_extra=12)
        out = engine.verify(tree, budget=100)
        assert out.new_tokens == ref[1:6]
        assert engine.prefix_len == len(prefix) + 5
        nxt = engine.verify(DraftTree.single(out.new_tokens[-1]), budget=100)
        assert nxt.new_tokens == [ref[6]]


def test_duplicate_tokens_under_a_parent_fall_back_to_the_spine_tie_rule():
    model = tiny_model("llama", seed=3)
    prefix = list(range(5, 15))
    ref = greedy_continuation(model, prefix, 4)
    engine = verification_engine(model, eos_token_ids=())
    anchor = int(engine.prefill(prefix)[-1].argmax())
    tree = DraftTree.single(anchor)
    tree.add(ref[1], 0, BRANCH)  # 1: the same token twice under the root
    s = tree.add(ref[1], 0, SPINE)  # 2: the spine copy must win
    tree.add(ref[2], s, SPINE)  # 3
    out = engine.verify(tree, budget=100)
    assert out.accepted_nodes == [0, 2, 3]
    assert out.new_tokens == ref[1:4]


def test_a_node_matching_its_parents_argmax_is_rejected_when_an_ancestor_was():
    """The greedy walk's rule (Goose §4.2): a node is accepted only if every ancestor was. Node 3 is what
    the target predicts after the rejected node 2 (and node 4 after node 3): neither may be accepted, by
    the device walk of `verify` or by `greedy_walk`.

          0 anchor
         / \
        1   2        1 = the target's next token; 2 = another token (rejected)
        |   |
        5   3        5 = not the target's token after 1; 3 = the target's token after 2
            |
            4        4 = the target's token after 3
    """
    model = tiny_model("llama", seed=3)
    prefix = list(range(5, 15))
    ref = greedy_continuation(model, prefix, 3)  # anchor, then the target's two next tokens
    engine = verification_engine(model, eos_token_ids=())
    anchor = int(engine.prefill(prefix)[-1].argmax())
    assert anchor == ref[0]
    wrong = (ref[1] + 1) % VOCAB
    after_wrong = greedy_continuation(model, prefix + [anchor, wrong], 2)
    tree = DraftTree.single(anchor)
    tree.add(ref[1], 0, SPINE)  # 1
    rejected = tree.add(wrong, 0, BRANCH)  # 2
    tree.add(after_wrong[0], rejected, BRANCH)  # 3: matches node 2's argmax
    tree.add(after_wrong[1], 3, BRANCH)  # 4: matches node 3's argmax
    tree.add((ref[2] + 1) % VOCAB, 1, SPINE)  # 5
    out = engine.verify(tree, budget=100)
    assert out.predictions[rejected] == tree.tokens[3] and out.predictions[3] == tree.tokens[4]
    assert out.accepted_nodes == [0, 1]
    assert out.new_tokens == ref[1:3]
    assert greedy_walk(tree, out.predictions) == [0, 1]


def test_budget_cut_compacts_only_committed_nodes():
    model = tiny_model("qwen3", seed=1)
    prefix = list(range(30, 42))
    ref = greedy_continuation(model, prefix, 6)
    engine = verification_engine(model, eos_token_ids=())
    anchor = int(engine.prefill(prefix)[-1].argmax())
    out = engine.verify(random_tree(random.Random(0), anchor, ref[1:5], n_extra=6), budget=2)
    assert out.new_tokens == ref[1:3] and out.accepted_nodes == [0, 2, 3]
    assert engine.prefix_len == len(prefix) + 3
    nxt = engine.verify(DraftTree.single(ref[3]), budget=100)
    assert nxt.new_tokens == [ref[4]]


def test_cache_is_reused_across_prompts_and_grows():
    model = tiny_model("llama", seed=3)
    engine = verification_engine(model, eos_token_ids=(), context_length=1024)
    long_prompt, short_prompt = list(range(3, 60)), list(range(40, 47))
    generate(engine, ARDrafter(), long_prompt, max_new_tokens=4)
    storage = engine.cache.storage
    gen = generate(engine, ARDrafter(), short_prompt, max_new_tokens=10)
    assert engine.cache.storage is storage  # no reallocation for a sequence that fits
    assert gen.output_ids == greedy_continuation(model, short_prompt, 10)
    # generating past the reserved rows grows the cache (rows kept, decoding stays exact)
    engine.cache = None
    engine.prefill(short_prompt, max_new_tokens=0)
    cap = engine.cache.capacity
    tok = engine.first_token
    out = [tok]
    while engine.prefix_len <= cap + 2:
        tok = engine.verify(DraftTree.chain(tok, [1, 2]), budget=10).new_tokens[-1]
        out.append(tok)
    assert engine.cache.capacity > cap
    assert int(sequential_logits(model, short_prompt + out[:-1]).argmax()) == out[-1]
    assert out[:8] == greedy_continuation(model, short_prompt, 8)


def test_non_finite_logits_raise_and_name_the_step():
    model = tiny_model("llama", seed=3)
    # prepack=False: a prepacked forward holds a copy of the weights taken when it was built
    engine = verification_engine(model, eos_token_ids=(), prepack=False)
    engine.prefill(list(range(5, 15)))
    engine.verify(DraftTree.single(engine.first_token), budget=10)
    with torch.no_grad():
        model.lm_head.weight[7].fill_(float("nan"))
    try:
        with pytest.raises(NonFiniteLogitsError, match="verification step 2"):
            engine.verify(DraftTree.chain(3, [4, 5]), budget=10)
        with pytest.raises(NonFiniteLogitsError, match="prefill"):
            engine.prefill(list(range(5, 15)))
        assert issubclass(NonFiniteLogitsError, RuntimeError)  # the runner records a failed prompt
    finally:
        with torch.no_grad():
            model.lm_head.weight[7].normal_()


def test_time_split_has_forward_and_walk():
    model = tiny_model("llama", seed=3)
    gen = generate(
        verification_engine(model, eos_token_ids=()), ARDrafter(), list(range(5, 15)), max_new_tokens=5
    )
    split = gen.time_split()
    assert {"prefill_s", "draft_s", "verify_s", "update_s", "forward_s", "walk_s"} <= set(split)
    assert split["forward_s"] + split["walk_s"] == pytest.approx(split["verify_s"], rel=1e-6, abs=1e-9)
    assert 0.0 <= gen.overhead_share() < 1.0


def test_prefill_last_row_only_for_drafters_that_do_not_harvest():
    from baselines.pld import PromptLookupDrafter
    from goose.method.drafter import GooseDrafter

    model = tiny_model("gemma3", seed=1)
    prompt = list(range(5, 19))
    engine = verification_engine(model, eos_token_ids=())
    full = engine.prefill(prompt)
    last = engine.prefill(prompt, all_logits=False)
    assert full.shape[0] == len(prompt) and last.shape[0] == 1
    assert torch.allclose(full[-1:], last, atol=1e-5)
    assert engine.verify(DraftTree.single(engine.first_token), budget=5).predictions[0] == int(
        sequential_logits(model, prompt + [engine.first_token]).argmax()
    )
    # Each drafter class declares whether its begin() reads every prompt position's logits.
    from baselines.isotropic import IsotropicDrafter
    from baselines.token_recycling import TokenRecyclingDrafter

    assert not ARDrafter().needs_prefill_logits and not PromptLookupDrafter().needs_prefill_logits
    assert not TokenRecyclingDrafter().needs_prefill_logits  # TR does not harvest the prefill
    assert GooseDrafter().needs_prefill_logits and IsotropicDrafter(branching=3).needs_prefill_logits
    assert not GooseDrafter(prefill_harvest=False).needs_prefill_logits
    assert not IsotropicDrafter(branching=3, prefill_harvest=False).needs_prefill_logits


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3"])
def test_lean_forward_matches_transformers_and_keeps_the_model_intact(arch):
    from goose.engine.forward.lean_forward import LeanDecoder
    from goose.engine.forward.lean_gemma3 import LeanGemma3Decoder

    model = tiny_model(arch, seed=5)
    prompt = list(range(7, 27))
    with torch.no_grad():
        before = model(input_ids=torch.tensor([prompt])).logits[0]
    lean = verification_engine(model, eos_token_ids=())
    slow = verification_engine(model, eos_token_ids=(), lean=False)
    assert lean.lean is not None and slow.lean is None
    with torch.no_grad():  # the fused weights are views: the transformers forward is unchanged
        assert torch.equal(model(input_ids=torch.tensor([prompt])).logits[0], before)
    assert torch.allclose(lean.prefill(prompt), slow.prefill(prompt), atol=1e-4)
    tree = random_tree(random.Random(2), lean.first_token, [1, 2, 3], n_extra=9)
    a, b = lean.verify(tree, budget=100), slow.verify(tree, budget=100)
    assert torch.allclose(a.logits, b.logits, atol=1e-4) and a.accepted_nodes == b.accepted_nodes
    for _ in range(3):
        a = lean.verify(DraftTree.single(a.new_tokens[-1]), budget=100)
        b = slow.verify(DraftTree.single(b.new_tokens[-1]), budget=100)
        assert torch.allclose(a.logits, b.logits, atol=1e-4)
    fused = verification_engine(model, eos_token_ids=(), prepack=False).lean.layers[0].qkv_proj.weight
    plain = verification_engine(model, eos_token_ids=(), prepack=False).lean
    assert plain.layers[0].qkv_proj.weight.data_ptr() == fused.data_ptr() and not plain.prepacked  # reused
    attn = model.model.layers[0].self_attn
    assert attn.k_proj.weight.data_ptr() == fused[attn.q_proj.out_features].data_ptr()
    assert isinstance(lean.lean, LeanGemma3Decoder) == (arch == "gemma3")
    assert LeanDecoder.unsupported(tiny_model("gemma3")) is not None
    assert LeanGemma3Decoder.unsupported(tiny_model("llama")) is not None
    calls = []  # a forward hook on the model makes the engine run the transformers forward
    handle = model.register_forward_hook(lambda *args: calls.append(1))
    lean.verify(DraftTree.single(a.new_tokens[-1]), budget=100)
    handle.remove()
    assert calls == [1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "prepack"), [("llama", False), ("qwen3", False), ("llama", None), ("gemma3", None)]
)
def test_the_compiled_lean_forward_decodes_as_the_eager_one(arch, prepack):
    """compile_forward (torch.compile, dynamic shapes; on a CPU with frozen weights, the prepacked
    products and a C++ wrapper): the same AR tokens and, on a tree, the same accepted nodes and
    logits as the eager lean forward of the same weights; the flag is refused where it cannot
    apply."""
    if prepack is None and prepack_unavailable(torch.zeros(2, 2)):
        pytest.skip("no oneDNN prepacking in this torch build")
    model = tiny_model(arch, seed=4)
    eager = verification_engine(model, eos_token_ids=(), context_length=256, prepack=prepack)
    compiled = verification_engine(
        model, eos_token_ids=(), context_length=256, prepack=prepack, compile_forward=True
    )
    assert compiled.forward_name == eager.forward_name + "+compile"
    prompt = list(range(5, 17))
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert (
        generate(compiled, ARDrafter(), prompt, max_new_tokens=10).output_ids
        == generate(eager, ARDrafter(), prompt, max_new_tokens=10).output_ids
    )
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > graphs  # it did compile
    rng = random.Random(2)
    for engine in (eager, compiled):
        engine.prefill(prompt)
    good = greedy_continuation(model, prompt + [eager.first_token], 3)
    tree = random_tree(rng, eager.first_token, good, n_extra=8)
    got, want = compiled.verify(tree, budget=100), eager.verify(tree, budget=100)
    assert got.accepted_nodes == want.accepted_nodes
    torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="compile_forward needs the lean forward"):
        verification_engine(model, eos_token_ids=(), lean=False, compile_forward=True)


def test_compile_forward_without_a_cpp_compiler_is_refused_with_the_reason(monkeypatch):
    """On a CPU inductor needs a C++ compiler: without one, compile_forward is refused at once with
    a message that says so (instead of failing inside inductor at the first step)."""
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CXX", raising=False)
    model = tiny_model("llama", seed=4)
    with pytest.raises(ValueError, match="C\\+\\+ compiler"):
        verification_engine(model, eos_token_ids=(), compile_forward=True)
    monkeypatch.setenv("CXX", "/bin/sh")  # any executable named by CXX counts
    assert verification_engine(model, eos_token_ids=(), compile_forward=True).forward_name.endswith(
        "+compile"
    )


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_nodes_past_accept_limit_are_forwarded_but_never_accepted(temperature):
    """Lookahead's Jacobi nodes (`accept_limit`): a scratch chain that is exactly the target's continuation
    is never accepted (greedy or sampled); the acceptable chain is, the scratch nodes' logits are those of
    their paths, and the cache keeps only the committed path."""
    from goose.engine.core.sampling import SamplingParams

    model = tiny_model("llama", seed=3)
    prefix = list(range(5, 15))
    ref = greedy_continuation(model, prefix, 4)
    for limit_chain in (0, 1):  # acceptable nodes: the anchor alone, or the anchor and ref[1]
        engine = verification_engine(model, eos_token_ids=())
        sampling = SamplingParams(temperature=temperature)
        engine.prefill(prefix, sampling=sampling, seed=7)
        anchor = engine.first_token if temperature else ref[0]
        if temperature:  # AR's sample with the same seed plays the target's continuation
            ar = verification_engine(model, eos_token_ids=())
            ar.prefill(prefix, sampling=sampling, seed=7)
            ref = [anchor]
            for _ in range(3):
                ref += ar.verify(DraftTree.single(ref[-1]), budget=100).new_tokens
        tree = DraftTree.chain(anchor, ref[1 : 1 + limit_chain])
        scratch = tree.add(ref[1], 0, BRANCH)  # duplicates an acceptable token: allowed past the limit
        tree.add(ref[2], scratch, BRANCH)
        tree.accept_limit = 1 + limit_chain
        tree.validate()
        out = engine.verify(tree, budget=100)
        assert out.accepted_nodes == list(range(1 + limit_chain))
        assert out.new_tokens == ref[1 : 2 + limit_chain]
        if not temperature:
            assert out.predictions[scratch] == ref[2]  # the scratch node saw anchor -> ref[1]
        assert engine.prefix_len == len(prefix) + 1 + limit_chain
    assert DraftTree.chain(1, [2, 3], SPINE).prefix(2).accept_limit is None
    limited = DraftTree([1, 2, 3], [-1, 0, 0], [0, SPINE, BRANCH], accept_limit=2)
    assert limited.prefix(1).accept_limit == 1 and limited.truncate_depth(0).accept_limit == 1
    with pytest.raises(ValueError, match="accept_limit = 4"):
        DraftTree([1, 2, 3], [-1, 0, 0], [0, SPINE, BRANCH], accept_limit=4)
