"""Which lean forward runs a model: `LeanDecoder` (Llama family, Qwen3) or `LeanGemma3Decoder`. Kept apart
from both so that the Gemma 3 forward can extend `LeanDecoder` without a module cycle."""

from __future__ import annotations

import torch

from goose.engine.forward.lean_forward import LeanDecoder
from goose.engine.forward.lean_gemma3 import LeanGemma3Decoder


def lean_decoder(model: torch.nn.Module, prepack: bool | None = None) -> LeanDecoder:
    """The lean forward of `model`: `LeanGemma3Decoder` where it applies, else `LeanDecoder`."""
    cls = LeanGemma3Decoder if LeanGemma3Decoder.unsupported(model) is None else LeanDecoder
    return cls(model, prepack=prepack)


def lean_unsupported(model: torch.nn.Module) -> str | None:
    """Why no lean forward covers `model` (None if one does)."""
    reasons = [cls.unsupported(model) for cls in (LeanDecoder, LeanGemma3Decoder)]
    return None if None in reasons else "; ".join(reasons)
