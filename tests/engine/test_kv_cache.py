"""TreeKVCache: in-place writes, views of the valid rows, compaction, growth, reuse, and its use as
a `transformers` cache by real (tiny) models."""

from __future__ import annotations

import pytest
import torch

from goose.engine.core.kv_cache import TreeKVCache
from tests.tiny_models import ARCHS, VOCAB, tiny_model


def rows(n: int, start: float = 0.0, heads: int = 2, dim: int = 3) -> torch.Tensor:
    """[1, heads, n, dim] rows whose values encode their index (start + i)."""
    vals = torch.arange(n, dtype=torch.float32) + start
    return vals.view(1, 1, n, 1).expand(1, heads, n, dim).clone()


def test_update_writes_in_place_and_returns_valid_views():
    cache = TreeKVCache(num_layers=2, capacity=8)
    k, v = cache.update(rows(3), -rows(3), layer_idx=0)
    assert k.shape == (1, 2, 3, 3) and torch.equal(k, rows(3)) and torch.equal(v, -rows(3))
    storage = cache.storage
    k2, _ = cache.update(rows(2, start=3), -rows(2, start=3), layer_idx=0)
    assert cache.storage is storage  # no reallocation
    assert k2.data_ptr() == k.data_ptr()  # a view of the same buffer
    assert torch.equal(k2, rows(5))
    assert cache.get_seq_length(0) == 5 and cache.layers[1].length == 0
    assert cache.get_mask_sizes(4, 0) == (9, 0)


def test_compact_contiguous_and_gathered():
    cache = TreeKVCache(num_layers=3, capacity=16)
    for layer in range(3):
        cache.update(rows(10), -rows(10), layer_idx=layer)
    cache.compact(4, None, 2)  # keep rows 0..5
    assert all(layer.length == 6 for layer in cache.layers)
    assert torch.equal(cache.layers[2].keys, rows(6))
    for layer in range(3):
        cache.update(rows(5, start=100), -rows(5, start=100), layer_idx=layer)  # rows 6..10 = 100..104
    cache.compact(6, torch.tensor([6, 8, 10]), 3)
    for layer in cache.layers:
        got = layer.keys[0, 0, :, 0].tolist()
        assert got == [0, 1, 2, 3, 4, 5, 100, 102, 104]
        assert layer.values[0, 1, :, 2].tolist() == [-x for x in got]


def test_growth_keeps_rows_and_reuse_after_reset():
    cache = TreeKVCache(num_layers=2, capacity=4)
    cap = cache.capacity
    for layer in range(2):
        cache.update(rows(cap - 1), -rows(cap - 1), layer_idx=layer)
    k, _ = cache.update(rows(5, start=cap - 1), -rows(5, start=cap - 1), layer_idx=0)  # grows mid-forward
    assert cache.capacity >= 2 * cap
    assert torch.equal(k, rows(cap + 4))
    k1, _ = cache.update(rows(5, start=cap - 1), -rows(5, start=cap - 1), layer_idx=1)
    assert torch.equal(k1, rows(cap + 4))
    storage = cache.storage
    cache.reset()
    assert cache.get_seq_length() == 0
    k, _ = cache.update(rows(2, start=7), -rows(2, start=7), layer_idx=0)
    assert cache.storage is storage and torch.equal(k, rows(2, start=7))


def test_layers_of_another_shape_get_their_own_buffers():
    cache = TreeKVCache(num_layers=2, capacity=8)
    cache.update(rows(4), -rows(4), layer_idx=0)
    cache.update(rows(4, heads=5), -rows(4, heads=5), layer_idx=1)
    assert cache.layers[0].shared and not cache.layers[1].shared
    cache.compact(1, torch.tensor([2, 3]), 2)
    assert cache.layers[0].keys[0, 0, :, 0].tolist() == [0, 2, 3]
    assert cache.layers[1].keys[0, 4, :, 0].tolist() == [0, 2, 3]


@pytest.mark.parametrize("arch", ARCHS)
def test_model_forward_with_tree_cache_equals_no_cache(arch):
    model = tiny_model(arch)
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(0))
    cache = TreeKVCache(model.config.num_hidden_layers, capacity=4)  # forces growth
    with torch.no_grad():
        ref = model(input_ids=ids).logits[0]
        a = model(
            input_ids=ids[:, :5], position_ids=torch.arange(5)[None], past_key_values=cache, use_cache=True
        )
        b = model(
            input_ids=ids[:, 5:], position_ids=torch.arange(5, 9)[None], past_key_values=cache, use_cache=True
        )
    # transformers builds its own (causal, sliding-window) masks from the cache's sizes here
    got = torch.cat([a.logits[0], b.logits[0]])
    assert torch.allclose(got, ref, atol=1e-4)
    assert cache.get_seq_length() == 9
