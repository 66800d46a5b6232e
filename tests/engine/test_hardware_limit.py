"""The hardware floor of a verification step, on a tiny model whose sizes are counted by hand."""

from __future__ import annotations

import pytest

from goose.engine.budget.hardware_limit import StepFloor, matmul_parameters, measure_bandwidth, weight_bytes
from tests.tiny_models import tiny_model

# tests/tiny_models.COMMON: vocab 96, hidden 32, intermediate 64, 2 layers, 4 heads of 8, 2 KV heads
PER_LAYER_MATMUL = 32 * 32 + 32 * 16 + 32 * 16 + 32 * 32 + 3 * 32 * 64  # q, k, v, o, gate/up/down
PER_LAYER_NORMS = 2 * 32
EMBEDDING = 96 * 32


def test_weights_and_matmul_parameters_are_counted_once():
    model = tiny_model("llama")
    untied = model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    assert untied  # LlamaConfig's default: a separate LM head
    params = EMBEDDING + 2 * (PER_LAYER_MATMUL + PER_LAYER_NORMS) + 32 + EMBEDDING
    assert weight_bytes(model) == 4 * params
    assert matmul_parameters(model) == 2 * PER_LAYER_MATMUL + EMBEDDING  # input embedding left out

    model.lm_head.weight = model.model.embed_tokens.weight  # tie them
    assert weight_bytes(model) == 4 * (params - EMBEDDING)
    assert matmul_parameters(model) == 2 * PER_LAYER_MATMUL + EMBEDDING  # the tied matrix is the LM head


def test_floor_is_the_larger_of_memory_and_compute_time():
    model = tiny_model("llama")
    floor = StepFloor.of(model, bandwidth=1e9, matmul_flops=1e9)
    assert floor.kv_bytes_per_token == 2 * 2 * 2 * 8 * 4  # K and V, layers, KV heads, head dim, fp32
    one = floor.seconds(1, kv_len=100)
    assert one == pytest.approx(floor.bytes(100) / 1e9)  # one token: memory-bound
    assert floor.bound(1, 100) == "memory"
    slow_math = StepFloor.of(model, bandwidth=1e12, matmul_flops=1e6)
    assert slow_math.bound(64, 100) == "compute"
    assert slow_math.seconds(64, 100) == pytest.approx(slow_math.flops(64, 100) / 1e6)
    assert floor.flops(2, 10) > 2 * floor.flops(1, 10) - 1  # grows with the nodes


def test_bandwidth_measurement_is_positive_and_finite():
    bw = measure_bandwidth("cpu", gib=0.05, repeats=2)
    assert 1e8 < bw < 1e13
