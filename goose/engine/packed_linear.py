"""Linear layers whose weights are reordered once for oneDNN (CPU): the small-M products of
verification (M = 1 for AR, M = tree size for a tree) at close to the memory bandwidth.

Why. `F.linear` on a CPU hands an fp32 product with a few rows to MKL's sgemm / gemv, which reads
a [out, in] weight at 10-20 GB/s on the development machines and falls to a slower path from two
rows on (the verification cost curve's t(2)/t(1) = 1.9 in fp32, issue 16); a bf16 product goes to
oneDNN, which reorders the weight into its blocked layout on every call. Reordering each weight
once (`torch.ops.mkldnn._reorder_linear_weight`, with no batch-size hint so that one layout serves
every M) and calling `torch.ops.mkldnn._linear_pointwise` on it reads the weight at ~35-40 GB/s for
1 <= M <= 16 on the same machine (`python -m experiments.forward_speed` measures it). This is the
weight prepacking that inductor's freezing pass does for CPU linears, used here without compiling.

Numerics: a reordered fp32 product sums in another order than sgemm (~1e-6 relative); bf16
products are bit-identical to `F.linear`'s (both are oneDNN). Every engine method, AR included,
runs the same forward, so losslessness between methods is unaffected; `PackedLinear.build`
checks each packed weight against `F.linear` on a random input and refuses one that disagrees.

Cost: the packed weights are a copy (the model's own weights stay, for the `transformers` forward),
so the lean forward holds the projection weights twice in host memory (+538 MB for SmolLM2 fp32),
and a change to the model's weights after the engine was built is not seen by the packed forward
(build a new engine, or use prepack=false).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Relative tolerance of the self-check against F.linear (fp32 sums in another order; bf16 is exact
# in practice but a different oneDNN build may block differently).
_CHECK_RTOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


def prepack_unavailable(weight: torch.Tensor) -> str | None:
    """Why `weight` cannot be prepacked on this machine (None if it can)."""
    if weight.device.type != "cpu":
        return f"weights on {weight.device.type}, prepacking is a CPU (oneDNN) feature"
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN (mkldnn)"
    if weight.dtype not in _CHECK_RTOL:
        return f"dtype {weight.dtype} (prepacking covers float32 and bfloat16)"
    if weight.dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "this CPU has no oneDNN bf16 support"
    if not all(hasattr(torch.ops.mkldnn, op) for op in ("_reorder_linear_weight", "_linear_pointwise")):
        return "this torch build lacks mkldnn._reorder_linear_weight / _linear_pointwise"
    return None


class PackedLinear:
    """y = x Wᵀ + b with W reordered once into oneDNN's layout; called like `F.linear(x, W, b)`
    on inputs [..., in] (contiguous)."""

    def __init__(self, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int) -> None:
        self.packed = packed
        self.bias = bias
        self.out_features = out_features

    @classmethod
    @torch.no_grad()
    def build(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> PackedLinear:
        """Pack `weight` [out, in]; raises RuntimeError if the packed product disagrees with
        `F.linear` beyond the dtype's tolerance on a random input (1 and 5 rows)."""
        reason = prepack_unavailable(weight)
        if reason:
            raise RuntimeError(f"cannot prepack: {reason}")
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
        linear = cls(packed, None if bias is None else bias.detach(), weight.shape[0])
        gen = torch.Generator().manual_seed(0)
        for rows in (1, 5):
            x = torch.randn(1, rows, weight.shape[1], generator=gen).to(weight.dtype)
            want = F.linear(x, weight, bias).float()
            got = linear(x).float()
            scale = want.abs().max().clamp_min(1e-6)
            if got.shape != want.shape or float((got - want).abs().max() / scale) > _CHECK_RTOL[weight.dtype]:
                raise RuntimeError("packed product disagrees with F.linear; not using it")
        return linear

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


class PlainLinear:
    """`F.linear(x, W, b)` behind the same call as `PackedLinear` (the fallback)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        self.weight = weight
        self.bias = bias
        self.out_features = weight.shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


def make_linear(weight: torch.Tensor, bias: torch.Tensor | None, prepack: bool) -> PackedLinear | PlainLinear:
    """A packed linear if `prepack` (raising if it cannot be built), else a plain one."""
    return PackedLinear.build(weight, bias) if prepack else PlainLinear(weight, bias)
