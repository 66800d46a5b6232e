"""The static steps that CUDA graphs replay (goose.engine.forward.static_step), run eagerly on the CPU
(`capture=False`): trees padded to a bucket, attention over a fixed span of cache rows with a mask,
keys and values written at device-held row indices. They must give every node the logits of
sequential decoding, leave the cache as the eager engine does, and decode exactly as AR in fp32,
across buckets, spans, a reallocated cache and trees larger than every bucket. The capture itself
is checked on CUDA (tests/engine/test_devices.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch

from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.tree import BRANCH, DraftTree
from goose.engine.core.verifier import NonFiniteLogitsError, VerificationEngine
from goose.engine.forward.choose import verification_engine
from goose.engine.forward.static_step import BUCKETS, MIN_ROWS, SPAN, StaticStep
from tests.engine.test_engine import greedy_continuation, path_tokens, random_tree, sequential_logits
from tests.tiny_models import ARCHS, VOCAB, tiny_model


def static_engine(model, context_length: int = 256, min_rows: int = MIN_ROWS) -> VerificationEngine:
    engine = verification_engine(model, eos_token_ids=(), context_length=context_length)
    engine.static = StaticStep(engine, capture=False, min_rows=min_rows)
    return engine


@pytest.mark.parametrize("arch", ARCHS)
def test_a_padded_static_step_gives_every_node_the_sequential_logits(arch):
    model = tiny_model(arch)
    engine = static_engine(model)
    assert engine.forward_name.endswith("+static")
    rng = random.Random(1)
    prefix = [rng.randrange(VOCAB) for _ in range(12)]  # longer than gemma3's window of 5
    anchor = int(engine.prefill(prefix)[-1].argmax())
    good = greedy_continuation(model, prefix + [anchor], 3)
    tree = random_tree(rng, anchor, good, n_extra=10)  # 15 nodes: padded to 16
    outcome = engine.verify(tree, budget=100)
    assert engine.static.stats()["steps"] == {f"16x{SPAN}": 1}
    assert outcome.logits.shape[0] == len(tree)
    for node in range(len(tree)):
        ref = sequential_logits(model, prefix + path_tokens(tree, node))
        assert torch.allclose(outcome.logits[node], ref, atol=1e-4), f"node {node}"
    assert outcome.new_tokens[:3] == good and outcome.accepted_nodes[1] == 2  # a gathered path
    committed = prefix + [anchor] + [tree.tokens[i] for i in outcome.accepted_nodes[1:]]
    ref_engine = verification_engine(model, eos_token_ids=(), context_length=256)
    ref_engine.prefill(prefix)
    for tok in committed[len(prefix) :]:
        ref_engine.verify(DraftTree.single(tok), budget=100)
    assert engine.prefix_len == engine.cache.length == ref_engine.prefix_len
    for got, ref in zip(engine.cache.layers, ref_engine.cache.layers, strict=True):
        assert torch.allclose(got.keys, ref.keys, atol=1e-5)
        assert torch.allclose(got.values, ref.values, atol=1e-5)
    nxt = engine.verify(DraftTree.single(outcome.new_tokens[-1]), budget=100)  # bucket 1
    assert nxt.predictions[0] == int(sequential_logits(model, committed + [outcome.new_tokens[-1]]).argmax())


def test_padding_nodes_that_real_nodes_could_see_break_the_logits(monkeypatch):
    """The check above can fail: a mask that shows node 0 the padding rows moves its logits."""
    model = tiny_model("llama")
    engine = static_engine(model)
    rng = random.Random(1)
    prefix = [rng.randrange(VOCAB) for _ in range(12)]
    anchor = int(engine.prefill(prefix)[-1].argmax())
    tree = random_tree(rng, anchor, greedy_continuation(model, prefix + [anchor], 3), n_extra=10)
    fill = StaticStep._fill

    def leaky_fill(self, slot, tokens, positions, ancestors):
        fill(self, slot, tokens, positions, ancestors)
        p, n, b = self.engine.prefix_len, tokens.shape[0], slot.ids.shape[1]
        slot.masks[""][0, 0, 0, p + n : p + b] = 0

    monkeypatch.setattr(StaticStep, "_fill", leaky_fill)
    outcome = engine.verify(tree, budget=100)
    assert not torch.allclose(outcome.logits[0], sequential_logits(model, prefix + [anchor]), atol=1e-4)


@dataclass
class RandomTreeDrafter(Drafter):
    """Trees of the sizes in `sizes`, in turn: a chain of the model's own next tokens (from a
    reference run) plus random branches; a size of 1 is an AR step."""

    reference: tuple[int, ...] = ()
    sizes: tuple[int, ...] = (1,)
    prompt_len: int = 0
    name: str = "random-trees"

    def propose(self, committed: list[int]) -> DraftTree:
        n = self.sizes[len(self.stats.get("trees", [])) % len(self.sizes)]
        self.stats.setdefault("trees", []).append(n)
        done = len(committed) - self.prompt_len
        tree = DraftTree.single(committed[-1])
        for tok in self.reference[done : done + min(n - 1, 4)]:
            tree.add(tok, len(tree) - 1, BRANCH)
        rng = random.Random(n + done)
        while len(tree) < n:
            parent, tok = rng.randrange(len(tree)), rng.randrange(VOCAB)
            if all(tree.tokens[c] != tok for c in range(1, len(tree)) if tree.parents[c] == parent):
                tree.add(tok, parent, BRANCH)
        return tree


@pytest.mark.parametrize("arch", ARCHS)
def test_decoding_through_static_steps_equals_ar_across_buckets_spans_and_a_reallocation(arch):
    """fp32: AR and tree decoding through static steps give AR's eager output token for token,
    with trees of every bucket up to 64, trees larger than the largest bucket (run eagerly in the
    same sequence), a prompt long enough that the span grows past 512 rows mid-sequence, and a
    cache reallocated between two prompts (the slots are dropped and rebuilt)."""
    model = tiny_model(arch, seed=3)
    context = 1400
    model.config.max_position_embeddings = context
    prompt = [random.Random(7).randrange(VOCAB) for _ in range(500)]
    eager = verification_engine(model, eos_token_ids=(), context_length=context)
    reference = generate(eager, ARDrafter(), prompt, max_new_tokens=40).output_ids
    engine = static_engine(model, context_length=context, min_rows=0)  # so that the cache grows
    assert generate(engine, ARDrafter(), prompt[:20], max_new_tokens=5).output_ids == greedy_continuation(
        model, prompt[:20], 5
    )
    storage = engine.cache.storage.data_ptr()
    sizes = (BUCKETS[-1] + 4, 1, 2, 3, 5, 9, 17, 33, 64, 1)
    drafter = RandomTreeDrafter(reference=tuple(reference), sizes=sizes, prompt_len=len(prompt))
    got = generate(engine, drafter, prompt, max_new_tokens=40)
    assert got.output_ids == reference
    assert engine.cache.storage.data_ptr() != storage, "the longer prompt reallocated the cache"
    spans = {key.split("x")[1] for key in engine.static.stats()["steps"]}
    assert spans == {str(SPAN), str(2 * SPAN)}, "the span grew past 512 rows mid-sequence"
    steps = engine.static.stats()["steps"]
    assert {int(key.split("x")[0]) for key in steps} >= {1, 2, 4, 8, 16, 32, 64}
    eager_steps = sum(step.tree_size > BUCKETS[-1] for step in got.steps)
    assert eager_steps >= 1 and sum(steps.values()) + eager_steps == len(got.steps)
    assert got.tau > 1.0


class EagerGraphs(StaticStep):
    """`StaticStep` on its capture path, with a CPU stand-in for a CUDA graph: the "capture" runs
    the forward once, and each "replay" runs it again on the slot's buffers into the slot's
    output, as a graph would. It checks the capture path's bookkeeping (which slots are captured
    when, the inputs a replay reads, the counters), not CUDA itself."""

    def __init__(self, engine: VerificationEngine) -> None:
        super().__init__(engine, capture=False)
        self.capture = True

    def _capture(self, slot) -> None:
        def replay(slot=slot):
            slot.logits = self._run(slot)

        slot.logits = self._run(slot)
        slot.replay = replay
        self.captures += 1


def test_the_warm_up_captures_every_slot_and_a_prompt_then_only_replays():
    from goose.harness.runner import warm_up

    model = tiny_model("qwen3", seed=3)
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
    engine.static = EagerGraphs(engine)
    warm_up(engine, list(range(5, 40)))  # a prefill, a small tree, then capture_all
    capacity = engine.cache.capacity
    spans = {min(s, capacity) for s in range(SPAN, capacity + SPAN, SPAN)}
    captured = engine.static.captures
    assert captured == len(spans) * len(BUCKETS) and len(spans) == 2
    prompt = [random.Random(4).randrange(VOCAB) for _ in range(150)]
    reference = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, 40).output_ids
    drafter = RandomTreeDrafter(reference=tuple(reference), sizes=(1, 3, 7, 12, 40, 100), prompt_len=150)
    gen = generate(engine, drafter, prompt, max_new_tokens=40)
    assert gen.output_ids == reference
    assert gen.graph_captures == 0 and gen.graph_capture_s == 0.0 and engine.static.captures == captured
    assert engine.cache.capacity == capacity, "no reallocation: the warm-up's graphs still hold"


def test_a_non_finite_step_leaves_no_nan_rows_for_the_next_prompt():
    """Static steps attend over rows past the prefix (masked), and a mask cannot hide a NaN: after
    a step that wrote NaN keys and values and raised, the next prompt must decode as AR does."""
    model = tiny_model("llama", seed=3)
    engine = verification_engine(model, eos_token_ids=(), context_length=256, prepack=False)
    engine.static = StaticStep(engine, capture=False)
    prompt = list(range(5, 25))
    output = generate(engine, ARDrafter(), prompt, max_new_tokens=8).output_ids
    weight = model.model.layers[1].self_attn.v_proj.weight  # a view of the lean forward's weight
    saved = weight.clone()
    with torch.no_grad():
        weight.fill_(float("nan"))
    try:
        with pytest.raises(NonFiniteLogitsError):
            engine.verify(DraftTree.chain(output[-1], [1, 2, 3, 4, 5, 6]), budget=10)
    finally:
        with torch.no_grad():
            weight.copy_(saved)
    assert torch.isfinite(engine.cache.storage).all()
    short = prompt[:10]
    assert generate(engine, ARDrafter(), short, max_new_tokens=8).output_ids == greedy_continuation(
        model, short, 8
    )


def test_cuda_graphs_are_refused_without_cuda_and_beside_compile():
    model = tiny_model("llama")
    with pytest.raises(ValueError, match="cuda_graphs needs a CUDA device; the engine runs on cpu"):
        verification_engine(model, eos_token_ids=(), cuda_graphs=True)
    with pytest.raises(ValueError, match="static steps need the lean forward"):
        verification_engine(model, eos_token_ids=(), lean=False, cuda_graphs=True)
    with pytest.raises(ValueError, match="alternatives"):
        verification_engine(model, eos_token_ids=(), compile_forward=True, cuda_graphs=True)


def test_a_run_with_cuda_graphs_on_a_cpu_stops_with_the_reason(monkeypatch):
    """`python run.py cuda_graphs=true` without CUDA: a UserError naming the device, before any
    prompt runs (the model here is a tiny random one standing in for the configured model)."""
    from goose.harness import compose as harness_compose
    from goose.harness.models.load import LoadedModel
    from tests.harness.test_validation import compose_cfg

    model = tiny_model("llama")
    loaded = LoadedModel(model, None, "tiny", "tiny", torch.float32, torch.device("cpu"), [], 256)
    monkeypatch.setattr(harness_compose, "load_model", lambda **spec: loaded)
    harness_compose.release_engines()
    with pytest.raises(harness_compose.UserError, match="cuda_graphs needs a CUDA device"):
        harness_compose.load_engine(compose_cfg("cuda_graphs=true"))
