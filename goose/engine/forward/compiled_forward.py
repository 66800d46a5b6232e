"""The lean forward through `torch.compile` (config `compile: true`): a verification step as a few fused
kernels, to cut a small model's Python dispatch. On a CPU, inductor's freezing fuses the pointwise ops around
the prepacked oneDNN products and `cpp_wrapper` drops Python between kernels (gpt-fast's recipe). Off by
default (compiling is slow); fused sums differ slightly, but every method runs the same forward."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

import torch
import torch._inductor.config as inductor_config

from goose.engine.forward.lean_forward import LeanDecoder

# inductor settings of the compiled CPU forward (module docstring)
CPU_OPTIONS = {"freezing": True, "cpp_wrapper": True}


def compile_unavailable(device: torch.device | str) -> str | None:
    """Why the forward cannot be compiled for `device` (None if it can): CPU kernels need a C++ compiler."""
    if torch.device(device).type != "cpu":
        return None
    candidates = [os.environ.get("CXX"), "g++", "c++", "clang++"]
    if not any(c and shutil.which(c) for c in candidates):
        return "inductor needs a C++ compiler for CPU kernels and none was found (g++, c++, clang++, $CXX)"
    return None


def compile_lean(lean: LeanDecoder, device: torch.device) -> Callable[..., torch.Tensor]:
    """`lean`'s forward through torch.compile (ValueError where it cannot be). `CPU_OPTIONS` are patched
    around every call because `torch.compile(options=...)` does not reach the freezing pass."""
    reason = compile_unavailable(device)
    if reason:
        raise ValueError(f"compile_forward: {reason}")
    compiled = torch.compile(lean)
    if torch.device(device).type != "cpu":
        return compiled

    def forward(*args: object) -> torch.Tensor:
        with inductor_config.patch(CPU_OPTIONS):
            return compiled(*args)

    return forward
