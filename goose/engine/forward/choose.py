"""Which forward a verification engine runs: the config's `lean`, `prepack`, `compile` and `cuda_graphs`
settings made into a `ForwardBackend` (goose.engine.core.backend) and handed to the engine. Kept out of core
so that the verifier knows the interface only, never the backends."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch

from goose.engine.core.backend import ForwardBackend
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.compiled_forward import compile_lean
from goose.engine.forward.lean import lean_decoder, lean_unsupported
from goose.engine.forward.static_step import StaticStep, static_steps_unsupported


def forward_backend(
    model: torch.nn.Module,
    lean: bool | None = None,
    prepack: bool | None = None,
    compile_forward: bool = False,
    cuda_graphs: bool = False,
) -> ForwardBackend | None:
    """The backend of `model` (None: its own `transformers` forward). lean: `LeanDecoder` (None = where
    supported); prepack: oneDNN-packed weights; compile_forward: the steps' lean forward through
    `torch.compile` (off by default: compiling takes minutes); cuda_graphs: static steps replayed from CUDA
    graphs. ValueError names a setting that cannot run here."""
    decoder = None
    if lean or (lean is None and lean_unsupported(model) is None):
        decoder = lean_decoder(model, prepack=prepack)
    compiled = None
    if compile_forward:
        if decoder is None:
            raise ValueError(
                f"compile_forward needs the lean forward: {lean_unsupported(model) or 'lean=False'}"
            )
        compiled = compile_lean(decoder, model.get_input_embeddings().weight.device)
    static_steps = None
    if cuda_graphs:
        if compile_forward:
            raise ValueError("compile_forward and cuda_graphs are alternatives: choose one")
        if decoder is None:
            raise ValueError(f"cuda_graphs: {static_steps_unsupported(None)}")
        static_steps = partial(StaticStep, capture=True)
    return None if decoder is None else ForwardBackend(decoder, compiled, static_steps)


def verification_engine(
    model: torch.nn.Module,
    eos_token_ids: Sequence[int],
    context_length: int | None = None,
    lean: bool | None = None,
    prepack: bool | None = None,
    compile_forward: bool = False,
    cuda_graphs: bool = False,
) -> VerificationEngine:
    """A `VerificationEngine` of `model` running the forward these settings choose (`forward_backend`)."""
    backend = forward_backend(model, lean, prepack, compile_forward, cuda_graphs)
    return VerificationEngine(model, eos_token_ids, context_length, backend=backend)
