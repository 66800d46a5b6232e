"""Tiny random models deep enough for a self-draft (layers 1..L-2 skippable), for the self-draft tests."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from tests.tiny_models import VOCAB, tiny_config


def deep_tiny_model(arch: str, layers: int = 6, seed: int = 0, vocab: int = VOCAB) -> torch.nn.Module:
    """`tests.tiny_models.tiny_model` with `layers` layers (Gemma 3: sliding and global layers alternate)."""
    torch.manual_seed(seed)
    cfg = tiny_config(arch, vocab)
    cfg.num_hidden_layers = layers
    if arch == "gemma3":
        cfg.layer_types = ["sliding_attention", "full_attention"] * (layers // 2) + ["sliding_attention"] * (
            layers % 2
        )
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():  # larger weights than the default init, as tiny_model: fewer near-ties
        for p in model.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    return model.eval().requires_grad_(False)
