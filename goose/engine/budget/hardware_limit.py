"""The hardware floor of a verification step, so that a step time means the same on any machine.

A forward over n nodes after L cached tokens must read every weight and the KV cache once (at the measured
bandwidth) and do 2 · n · (matmul parameters) + 4 · n · L · layers · q_heads · head_dim FLOPs (at the
measured matmul throughput of the dtype); floor(n) = max of the two times (`StepFloor`). Tied weights count
once; the input embedding counts as matmul parameters only when it is the LM head. Caches, element-wise
work and softmax are ignored, so the floor is optimistic.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from goose.engine.forward.packed_linear import PackedLinear, prepack_unavailable


def measure_bandwidth(device: torch.device | str = "cpu", gib: float = 1.0, repeats: int = 5) -> float:
    """Bytes per second of a streaming read: `sum` over a `gib`-GiB fp32 tensor (median)."""
    n = int(gib * (1 << 30)) // 4
    x = torch.ones(n, dtype=torch.float32, device=device)
    x.sum()  # warm-up (page faults, thread pool)
    times = []
    for _ in range(repeats):
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        x.sum().item()
        times.append(time.perf_counter() - t0)
    del x
    return n * 4 / statistics.median(times)


def measure_matmul_flops(
    dtype: torch.dtype, k: int, n: int, m: int = 64, device: torch.device | str = "cpu", repeats: int = 7
) -> float:
    """FLOP/s of an [m, k] × [k, n] product in `dtype`: the faster of a plain matmul and the prepacked one the
    lean forward uses, so no engine kernel beats its own floor.
    """
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    products = [lambda: a @ b]
    if prepack_unavailable(b) is None:
        packed = PackedLinear.build(b.t().contiguous())
        products.append(lambda: packed(a))
    return max(_flops(product, m * k * n, device, repeats) for product in products)


def _flops(product, mkn: int, device: torch.device | str, repeats: int) -> float:
    product()
    reps = max(1, int(2e8 // (2 * mkn)))  # ~0.2 GFLOP per timing
    times = []
    for _ in range(repeats):
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            product()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t0) / reps)
    return 2.0 * mkn / statistics.median(times)


def _text_config(model: torch.nn.Module):
    cfg = model.config
    return cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters, each storage counted once (tied weights)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        ptr = p.untyped_storage().data_ptr()
        if ptr not in seen:
            seen.add(ptr)
            total += p.untyped_storage().nbytes()
    return total


def matmul_parameters(model: torch.nn.Module) -> int:
    """Parameters in matrix products per token: 2-D weights, the input embedding only when tied."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight.untyped_storage().data_ptr() == emb.untyped_storage().data_ptr()
    total, seen = 0, set()
    for p in model.parameters():
        ptr = p.untyped_storage().data_ptr()
        if p.dim() != 2 or ptr in seen:
            continue
        seen.add(ptr)
        if p is emb and not tied:
            continue
        total += p.numel()
    return total


@dataclass(frozen=True)
class StepFloor:
    """floor(n, L) of a verification step of this model on this machine (module docstring)."""

    weight_bytes: int
    matmul_params: int
    kv_bytes_per_token: int  # K and V of every layer for one cached token
    attention_flops_per_pair: int  # 4 · layers · q_heads · head_dim: scores + values per (query, key)
    bandwidth: float  # bytes / s
    matmul_flops: float  # FLOP / s

    @classmethod
    def of(cls, model: torch.nn.Module, bandwidth: float, matmul_flops: float) -> StepFloor:
        cfg = _text_config(model)
        heads = int(cfg.num_attention_heads)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        layers = int(cfg.num_hidden_layers)
        itemsize = next(model.parameters()).element_size()
        return cls(
            weight_bytes=weight_bytes(model),
            matmul_params=matmul_parameters(model),
            kv_bytes_per_token=2 * layers * kv_heads * head_dim * itemsize,
            attention_flops_per_pair=4 * layers * heads * head_dim,
            bandwidth=bandwidth,
            matmul_flops=matmul_flops,
        )

    def bytes(self, kv_len: int) -> int:
        return self.weight_bytes + self.kv_bytes_per_token * kv_len

    def flops(self, n: int, kv_len: int) -> float:
        return 2.0 * n * self.matmul_params + self.attention_flops_per_pair * n * (kv_len + n)

    def seconds(self, n: int, kv_len: int) -> float:
        return max(self.bytes(kv_len) / self.bandwidth, self.flops(n, kv_len) / self.matmul_flops)

    def bound(self, n: int, kv_len: int) -> str:
        return (
            "memory"
            if self.bytes(kv_len) / self.bandwidth >= self.flops(n, kv_len) / self.matmul_flops
            else "compute"
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "weight_bytes": self.weight_bytes,
            "matmul_params": self.matmul_params,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "bandwidth_gb_s": self.bandwidth / 1e9,
            "matmul_gflop_s": self.matmul_flops / 1e9,
        }


def measure_floor(model: torch.nn.Module, repeats: int = 5) -> StepFloor:
    cfg = _text_config(model)
    first = next(model.parameters())
    device, dtype = first.device, first.dtype
    bandwidth = measure_bandwidth(device, repeats=repeats)
    flops = measure_matmul_flops(dtype, int(cfg.hidden_size), int(cfg.intermediate_size), device=device)
    return StepFloor.of(model, bandwidth, flops)
