"""The engine's transformers fallback (a model without a lean forward, here a tiny random Mistral) passes
its KV cache by the keyword the installed transformers names, so that no deprecated argument warns, and
its tree steps stay identical to sequential greedy decoding."""

from __future__ import annotations

import warnings

import torch
from transformers import AutoModelForCausalLM, MistralConfig

from baselines.pld import PromptLookupDrafter
from goose.engine.core.decode import generate
from goose.engine.forward.choose import verification_engine
from tests.tiny_models import COMMON, sequential_greedy


def tiny_mistral() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = MistralConfig(**COMMON, sliding_window=None)
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    return model.eval().requires_grad_(False)


def test_fallback_forward_warns_nothing_and_matches_greedy():
    model = tiny_mistral()
    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]  # repeats, so that PLD drafts chains
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        engine = verification_engine(model, eos_token_ids=())
        assert engine.lean is None and engine.forward_name == "transformers"
        drafter = PromptLookupDrafter()
        got = generate(engine, drafter, prompt, 24)
    assert got.output_ids == sequential_greedy(model, prompt, 24)
    assert got.forward_calls < 24  # drafts were accepted, so the tree path ran, not only AR steps
