"""The lean forward through `torch.compile` (`VerificationEngine(compile_forward=True)`, config
`compile: true`): the verification steps' forward as one graph of fused kernels instead of ~45
eager ops per layer.

Why (CPU). With the weights prepacked (goose.engine.forward.packed_linear) the products of a one-token
step of SmolLM2-135M read the weights near the bandwidth the oneDNN kernels reach, but the
~1350 other ops of the step (norms, RoPE, residual adds, the cache writes, each a Python call and
a dispatch of a few microseconds) add ~8-11 ms to a ~40 ms fp32 step on a 2-core machine.
Compiled with inductor's *freezing* (`torch._inductor.config.freezing`: the decoder's buffers,
i.e. every weight, are constants of the graph), the pointwise ops fuse into a few C++ loops and
the prepacked products stay oneDNN calls on the very same packed weights (inductor lowers
`mkldnn._linear_pointwise` on a frozen weight to a direct call); `cpp_wrapper` runs the graph
from C++, so no Python runs between kernels. This is gpt-fast's "compile the decode step" recipe,
applied to a CPU; inductor's own fp32 weight packing (MKL's packed sgemm) is not used because the
weights arrive packed for oneDNN, which is the faster of the two on the development machines.

Shapes: automatic dynamic shapes. The one-node step (no mask) is one graph; the tree size and
the KV length become symbolic after their first change, so a run compiles a handful of graphs
in all (three in an fp32 `python run.py compile=true`; more on a CPU without bf16 kernels in
bf16, where products of 1-2 rows and of 3+ rows take different paths,
goose.engine.forward.packed_linear). The prefill stays eager. Compilation takes minutes at the first
steps of a process (3-9 minutes measured on a 2-core Zen 3: 200 s in `experiments.forward_speed`,
532 s in the start-up calibration of `experiments.bench --compile`); that is why it is off by
default.

Numerics: fused pointwise kernels sum the norms' statistics in another order (~1e-6 relative in
fp32); every engine method, AR included, runs the same compiled forward, so losslessness between
methods is unaffected (the tests compare compiled and eager decoding token for token in fp32).

On a GPU the weights stay plain graph inputs and nothing is frozen (the setting `make gpu-check`
measures); freezing and `cpp_wrapper` are CPU settings here.
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
    """`lean`'s forward through torch.compile, with `CPU_OPTIONS` on a CPU (module docstring);
    ValueError where `compile_unavailable` says why not.

    The options are patched into inductor's config around every call rather than passed as
    `torch.compile(options=...)`, which does not reach the freezing pass (torch 2.13): a graph
    compiled at any step, recompilations included, sees them, and nothing else does."""
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
