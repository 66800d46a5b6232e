"""The engine on the device of the run (`pytest --device cuda`, default cpu) in fp32, fp16 and bf16,
on tiny random Llama, Qwen3 and Gemma-3 models: every tree node's logits equal sequential decoding
along its path within the dtype's tolerance, and KV compaction moves the accepted rows exactly
(bit for bit). `make gpu-check` runs this file on CUDA.

Tolerance: the tree forward and the sequential forwards multiply matrices of other shapes, so they
round differently; the bound is relative to the largest |logit| of the reference row: fp32 1e-4,
fp16 5e-3, bf16 2e-2 (measured on a CPU: at most 7e-7, 1.8e-3 and 9.5e-3 over the three
architectures, a few units in the last place of a half-precision logit after two layers). A broken
mask (a node seeing its siblings) moves logits by 0.5-1.0 of their scale, far above every bound;
`test_a_mask_that_lets_siblings_see_each_other_breaks_the_tolerance` shows it.
"""

from __future__ import annotations

import random

import pytest
import torch

from goose.engine.core.tree import DraftTree
from goose.engine.forward.choose import verification_engine
from tests.engine.test_engine import path_tokens, random_tree
from tests.tiny_models import ARCHS, VOCAB, tiny_model

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
RELATIVE_TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def sequential_row(model, ids: list[int], device: str) -> torch.Tensor:
    """Logits after `ids` from one plain forward without a cache (the reference), in fp32."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids], device=device)).logits[0, -1].float()


def relative_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.float() - ref).abs().max() / ref.abs().max().clamp(min=1e-6))


def greedy_path(model, ids: list[int], n: int, device: str) -> list[int]:
    out: list[int] = []
    for _ in range(n):
        out.append(int(sequential_row(model, ids + out, device).argmax()))
    return out


def tree_setup(arch: str, dtype: torch.dtype, device: str, seed: int = 1):
    model = tiny_model(arch, dtype=dtype).to(device)
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
    rng = random.Random(seed)
    prefix = [rng.randrange(VOCAB) for _ in range(12)]
    anchor = int(engine.prefill(prefix)[-1].argmax())
    good = greedy_path(model, prefix + [anchor], 3, device)
    return model, engine, prefix, random_tree(rng, anchor, good, n_extra=10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_tree_logits_equal_sequential_within_the_dtype_tolerance(arch, dtype, test_device):
    torch_dtype = DTYPES[dtype]
    model, engine, prefix, tree = tree_setup(arch, torch_dtype, test_device)
    assert engine.device.type == torch.device(test_device).type
    outcome = engine.verify(tree, budget=100)
    assert outcome.logits.device.type == torch.device(test_device).type
    tol = RELATIVE_TOLERANCE[torch_dtype]
    for node in range(len(tree)):
        ref = sequential_row(model, prefix + path_tokens(tree, node), test_device)
        err = relative_error(outcome.logits[node], ref)
        assert err <= tol, f"{arch} {dtype} node {node}: relative error {err:.2e} > {tol:.0e}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_one_node_steps_equal_sequential_within_the_dtype_tolerance(arch, dtype, test_device):
    """AR's step (a one-node tree, the engine's fast path) over 8 tokens, each against a plain
    forward of the whole sequence. In bf16/fp16 on a CPU its GQA query heads attend as rows of
    their KV head (goose.engine.forward.lean_forward.attend): a wrong grouping of heads breaks the
    tolerance (test_half_precision_one_query_attention_groups_heads_by_kv_head)."""
    torch_dtype = DTYPES[dtype]
    model, engine, prefix, _ = tree_setup(arch, torch_dtype, test_device)
    tokens = prefix + [int(engine.prefill(prefix)[-1].argmax())]
    tol = RELATIVE_TOLERANCE[torch_dtype]
    for step in range(8):
        outcome = engine.verify(DraftTree.single(tokens[-1]), budget=100)
        err = relative_error(outcome.logits[0], sequential_row(model, tokens, test_device))
        assert err <= tol, f"{arch} {dtype} step {step}: relative error {err:.2e} > {tol:.0e}"
        tokens += outcome.new_tokens


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_one_query_attention_groups_heads_by_kv_head(dtype, test_device):
    """`attend` for one query (n = 1, no mask) with 8 query heads over 2 KV heads equals sdpa's own
    GQA (query head i reads KV head i // 4) within the dtype's tolerance; the same rows grouped
    the other way (query head i reading KV head i % 2) do not, so the check can fail."""
    from goose.engine.core.kv_cache import TreeKVCache
    from goose.engine.forward.lean_forward import attend

    torch_dtype = DTYPES[dtype]
    gen = torch.Generator().manual_seed(0)
    h, kv, d, past = 8, 2, 16, 40

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(torch_dtype).to(test_device)

    cache = TreeKVCache(1, capacity=64)
    cache.reset()
    cache.update(rand(1, kv, past, d), rand(1, kv, past, d), 0)
    qk, v = rand(1, 1, h + kv, d), rand(1, 1, kv, d)
    cos = torch.ones(1, 1, 1, d, dtype=torch_dtype, device=test_device)  # RoPE at angle 0
    sin = torch.zeros_like(cos)
    got = attend(qk, v, cos, sin, cache, 0, None, d**-0.5, kv).float().view(h, d)
    q = qk[0, 0, :h].float()
    layer = cache.layers[0]
    assert layer.length == past + 1
    keys, values = (buf[0, :, : past + 1].float() for buf in (layer.k_buf, layer.v_buf))  # [kv, rows, d]

    def reference(kv_of_head):
        rows = []
        for i in range(h):
            w = torch.softmax(q[i] @ keys[kv_of_head(i)].T * d**-0.5, dim=-1)
            rows.append(w @ values[kv_of_head(i)])
        return torch.stack(rows)

    scale = reference(lambda i: i // (h // kv)).abs().max()
    assert float((got - reference(lambda i: i // (h // kv))).abs().max() / scale) <= 2e-2
    assert float((got - reference(lambda i: i % kv)).abs().max() / scale) > 0.1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_kv_compaction_moves_the_accepted_rows_exactly(arch, dtype, test_device):
    _, engine, prefix, tree = tree_setup(arch, DTYPES[dtype], test_device)
    p = engine.prefix_len
    snapshot: dict[str, list[torch.Tensor]] = {}
    compact = engine.cache.compact

    def spy(start, src, keep):  # the rows the forward wrote, just before compaction
        snapshot["k"] = [layer.k_buf.clone() for layer in engine.cache.layers]
        snapshot["v"] = [layer.v_buf.clone() for layer in engine.cache.layers]
        compact(start, src, keep)

    engine.cache.compact = spy
    outcome = engine.verify(tree, budget=100)
    path = outcome.accepted_nodes
    assert path[1] == 2, "the planted path sits behind a decoy: the compaction is a gather"
    rows = torch.tensor([p + i for i in path], device=engine.device)
    assert engine.prefix_len == p + len(path)
    for layer, k_before, v_before in zip(engine.cache.layers, snapshot["k"], snapshot["v"], strict=True):
        assert torch.equal(layer.keys[:, :, :p], k_before[:, :, :p])  # the prefix is untouched
        assert torch.equal(layer.keys[:, :, p:], k_before.index_select(2, rows.to(k_before.device)))
        assert torch.equal(layer.values[:, :, p:], v_before.index_select(2, rows.to(v_before.device)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_a_step_captured_in_a_cuda_graph_replays_the_eager_logits(arch, dtype, test_device):
    """experiments/gpu/graph_probe.py times such replays; here they must give the step's logits bit
    for bit, and leave the sequence as it was."""
    if torch.device(test_device).type != "cuda":
        pytest.skip("CUDA graphs need a CUDA device")
    from experiments.gpu.graph_probe import capture

    _, engine, prefix, tree = tree_setup(arch, DTYPES[dtype], test_device)
    forward = engine.replayable_forward(tree)
    eager = forward().clone()
    replay, logits = capture(forward)
    with torch.inference_mode():  # the captured output is an inference tensor
        logits.zero_()
    replay()
    torch.cuda.synchronize()
    assert torch.equal(logits, eager)
    assert engine.prefix_len == engine.cache.length == len(prefix)
    assert torch.equal(engine.verify(tree, budget=100).logits, eager)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_steps_replayed_from_cuda_graphs_give_the_sequential_logits_and_decode_as_ar(
    arch, dtype, test_device
):
    """`cuda_graphs=True` (goose.engine.forward.static_step): a padded tree step replayed from its graph
    gives every node the sequential logits within the dtype's tolerance; AR decoding through
    graphs (one capture, many replays) equals the eager engine's, token for token in fp32."""
    if torch.device(test_device).type != "cuda":
        pytest.skip(
            "CUDA graphs need a CUDA device (tests/engine/test_static_step.py runs the same steps eagerly)"
        )
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.static_step import BUCKETS

    torch_dtype = DTYPES[dtype]
    model, eager, prefix, tree = tree_setup(arch, torch_dtype, test_device)
    graphed = verification_engine(model, eos_token_ids=(), context_length=256, cuda_graphs=True)
    assert graphed.forward_name.endswith("+graphs")
    graphed.prefill(prefix)
    graphed.capture_graphs()  # every (bucket, span) the cache holds, as the runner's warm-up does
    captured = graphed.static.captures
    assert captured >= len(BUCKETS)
    outcome = graphed.verify(tree, budget=100)
    tol = RELATIVE_TOLERANCE[torch_dtype]
    for node in range(len(tree)):
        ref = sequential_row(model, prefix + path_tokens(tree, node), test_device)
        err = relative_error(outcome.logits[node], ref)
        assert err <= tol, f"{arch} {dtype} node {node}: relative error {err:.2e} > {tol:.0e}"
    assert outcome.new_tokens == eager.verify(tree, budget=100).new_tokens
    gen = generate(graphed, ARDrafter(), prefix, max_new_tokens=24)
    ar_eager = generate(eager, ARDrafter(), prefix, max_new_tokens=24).output_ids
    if torch_dtype == torch.float32:
        assert gen.output_ids == ar_eager
    assert gen.graph_captures == 0 and graphed.static.captures == captured  # replays only
    assert sum(graphed.static.stats()["steps"].values()) >= 24


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_mask_that_lets_siblings_see_each_other_breaks_the_tolerance(dtype, test_device):
    """The bound is tight enough to see a bug: with every node visible to every other (no
    ancestor mask), some node misses it by more than 10x, in each half precision."""
    torch_dtype = DTYPES[dtype]
    model, engine, prefix, tree = tree_setup("llama", torch_dtype, test_device)
    tree_mask = engine._tree_mask

    def no_ancestry(anc, positions, max_depth):
        return torch.zeros_like(tree_mask(anc, positions, max_depth))

    engine._tree_mask = no_ancestry
    outcome = engine.verify(tree, budget=100)
    worst = max(
        relative_error(outcome.logits[i], sequential_row(model, prefix + path_tokens(tree, i), test_device))
        for i in range(len(tree))
    )
    assert worst > 10 * RELATIVE_TOLERANCE[torch_dtype]
