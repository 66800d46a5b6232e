"""The lean forward through `torch.compile` (`VerificationEngine(compile_forward=True)`, config `compile:
true`): a verification step as a few fused kernels instead of ~45 eager ops per layer.

Why: on a CPU the non-matmul ops of a small model's step (norms, RoPE, residuals, cache writes) cost a
large share of it in Python dispatch. Inductor's *freezing* makes the weights graph constants, so the
pointwise ops fuse while the prepacked products (goose.engine.forward.packed_linear) stay oneDNN calls, and
`cpp_wrapper` runs the graph without Python between kernels (gpt-fast's recipe). On a GPU nothing is
frozen. Shapes are automatically dynamic, so a run compiles a handful of graphs; the prefill stays eager.
Compiling takes minutes, hence off by default. Fused kernels reorder sums (~1e-6 relative in fp32), but
every method, AR included, runs the same forward, so losslessness between methods holds.
"""

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
    """Why the forward cannot be compiled for `device` (None if it can): inductor builds its CPU
    kernels with a C++ compiler (the `CXX` variable, else g++ / c++ / clang++ on the PATH)."""
    if torch.device(device).type != "cpu":
        return None
    candidates = [os.environ.get("CXX"), "g++", "c++", "clang++"]
    if not any(c and shutil.which(c) for c in candidates):
        return "inductor needs a C++ compiler for CPU kernels and none was found (g++, c++, clang++, $CXX)"
    return None


def compile_lean(lean: LeanDecoder, device: torch.device) -> Callable[..., torch.Tensor]:
    """`lean`'s forward through torch.compile, with `CPU_OPTIONS` on a CPU; ValueError where
    `compile_unavailable` says why not. The options are patched into inductor's config around every call
    because `torch.compile(options=...)` does not reach the freezing pass.
    """
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
