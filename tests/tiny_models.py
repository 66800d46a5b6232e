"""Tiny random-weight models of every architecture the configured models use (Llama for Vicuna and
Llama-3, Qwen3, Gemma 3 with sliding-window layers), for engine mechanics tests only."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen3Config

VOCAB = 96
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=256,
)


def tiny_config(arch: str, vocab: int = VOCAB):
    common = {**COMMON, "vocab_size": vocab}
    if arch == "llama":
        return LlamaConfig(**common)
    if arch == "qwen3":
        return Qwen3Config(**common)
    if arch == "gemma3":
        # a window of 5 so that prefixes of ~12 tokens exercise the sliding mask
        return Gemma3TextConfig(
            **common,
            sliding_window=5,
            layer_types=["sliding_attention", "full_attention"],
            query_pre_attn_scalar=8,
        )
    raise ValueError(arch)


ARCHS = ("llama", "qwen3", "gemma3")


def tiny_model(
    arch: str, seed: int = 0, dtype: torch.dtype = torch.float32, vocab: int = VOCAB
) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = tiny_config(arch, vocab)
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    # larger weights than the default init so that argmax is not dominated by near-ties
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    return model.eval().requires_grad_(False)


def sequential_greedy(model, ids: list[int], n: int) -> list[int]:
    """The reference: n greedy tokens after `ids`, one full forward (no cache) per token."""
    out: list[int] = []
    with torch.no_grad():
        for _ in range(n):
            out.append(int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax()))
    return out
