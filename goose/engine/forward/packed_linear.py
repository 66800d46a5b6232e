"""Linear layers whose weights are reordered once for oneDNN (CPU): the small-M products of
verification (M = 1 for AR, M = tree size for a tree) at close to the memory bandwidth.

Why. `F.linear` on a CPU hands an fp32 product with a few rows to MKL's sgemm / gemv, which reads
a [out, in] weight at 10-20 GB/s on the development machines and falls to a slower path from two
rows on (the verification cost curve's t(2)/t(1) = 1.9 in fp32, issue 16); a bf16 product goes to
oneDNN, which reorders the weight into its blocked layout on every call. Reordering each weight
once (`torch.ops.mkldnn._reorder_linear_weight`, with no batch-size hint so that one layout serves
every M) and calling `torch.ops.mkldnn._linear_pointwise` on it reads the weight at ~35-40 GB/s for
1 <= M <= 16 on the same machine (`python -m experiments.forward_speed` measures it). This is the
weight prepacking that inductor's freezing pass does for CPU linears, used here without compiling
(goose.engine.forward.compiled_forward compiles the rest of the step around these same packed weights).

Numerics: a reordered fp32 product sums in another order than sgemm (~1e-6 relative); bf16
products are bit-identical to `F.linear`'s (both are oneDNN). Every engine method, AR included,
runs the same forward, so losslessness between methods is unaffected; `PackedLinear.build`
checks each packed weight against `F.linear` on a random input and refuses one that disagrees.

Cost: the packed weights are a copy (the model's own weights stay, for the `transformers` forward),
so the lean forward holds the projection weights twice in host memory (+538 MB for SmolLM2 fp32),
and a change to the model's weights after the engine was built is not seen by the packed forward
(build a new engine, or use prepack=false).

bf16 on a CPU without bf16 kernels (AVX2 only: `native_bf16()` is False, e.g. AMD Zen 2/3 and
most laptop CPUs). There oneDNN cannot pack a bf16 weight, and `F.linear` emulates the bf16
product at a cost that grows with the rows: on a Zen 3 (2 threads, SmolLM2-135M, KV 256) a bf16
tree of 16 nodes took 7.3× a one-token step and one of 64 nodes 27× (figures/forward_speed_avx2.md),
so that nearly every tree cost more than it could win. Such a weight is packed as an
fp32 copy instead: a product of M > `EMULATED_BF16_MAX_ROWS` rows runs as the fp32 product of the
exactly upcast bf16 values (products exact in fp32, sums in fp32, result rounded to bf16: what a
native bf16 kernel computes, up to the order of the sums), and a product of one or two rows stays
with `F.linear` on the bf16 weight, which reads half the bytes. Cost: the fp32 copy (2× the bf16
weights in host memory).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Relative tolerance of the self-check against F.linear (fp32 sums in another order; bf16 is exact
# in practice but a different oneDNN build may block differently).
_CHECK_RTOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}

# Rows up to which a bf16 product on a CPU without bf16 kernels stays with `F.linear` on the bf16
# weight (measured on a Zen 3: 1 and 2 rows are faster there, from 3-4 rows on the fp32 copy is).
EMULATED_BF16_MAX_ROWS = 2


def native_bf16() -> bool:
    """True if this CPU's oneDNN has bf16 kernels (AVX-512 BF16, AMX); without them a bf16 weight
    is packed for fp32 compute (module docstring). False in a torch build without oneDNN."""
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def prepack_unavailable(weight: torch.Tensor) -> str | None:
    """Why `weight` cannot be prepacked on this machine (None if it can)."""
    if weight.device.type != "cpu":
        return f"weights on {weight.device.type}, prepacking is a CPU (oneDNN) feature"
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN (mkldnn)"
    if weight.dtype not in _CHECK_RTOL:
        return f"dtype {weight.dtype} (prepacking covers float32 and bfloat16)"
    if not all(hasattr(torch.ops.mkldnn, op) for op in ("_reorder_linear_weight", "_linear_pointwise")):
        return "this torch build lacks mkldnn._reorder_linear_weight / _linear_pointwise"
    return None


class PackedLinear(torch.nn.Module):
    """y = x Wᵀ + b with W reordered once into oneDNN's layout; called like `F.linear(x, W, b)`
    on inputs [..., in] (contiguous). `fp32_compute`: W is a bf16 weight packed as fp32 (module
    docstring); `weight` then keeps the bf16 original for the products of few rows. A module whose
    tensors are buffers, so that a compiled forward with inductor's freezing
    (goose.engine.forward.compiled_forward) takes them as constants and calls oneDNN on them directly."""

    def __init__(
        self,
        packed: torch.Tensor,
        bias: torch.Tensor | None,
        out_features: int,
        weight: torch.Tensor | None = None,
        plain_bias: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("bias", bias, persistent=False)
        self.register_buffer("weight", weight, persistent=False)
        self.register_buffer("plain_bias", plain_bias, persistent=False)
        self.out_features = out_features

    @property
    def fp32_compute(self) -> bool:
        return self.weight is not None

    @classmethod
    @torch.no_grad()
    def build(
        cls, weight: torch.Tensor, bias: torch.Tensor | None = None, fp32_compute: bool | None = None
    ) -> PackedLinear:
        """Pack `weight` [out, in]; raises RuntimeError if the packed product disagrees with
        `F.linear` beyond the dtype's tolerance on a random input (1 and 5 rows). fp32_compute
        (bf16 weights only): pack an fp32 copy; None = where this CPU has no bf16 kernels."""
        reason = prepack_unavailable(weight)
        if reason:
            raise RuntimeError(f"cannot prepack: {reason}")
        weight = weight.detach()
        bias = None if bias is None else bias.detach()
        if fp32_compute is None:
            fp32_compute = weight.dtype == torch.bfloat16 and not native_bf16()
        if fp32_compute and weight.dtype != torch.bfloat16:
            raise RuntimeError(f"cannot prepack: fp32_compute is for bfloat16 weights, not {weight.dtype}")
        if fp32_compute:
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.float(), None)
            linear = cls(packed, None if bias is None else bias.float(), weight.shape[0], weight, bias)
        else:
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
            linear = cls(packed, bias, weight.shape[0])
        gen = torch.Generator().manual_seed(0)
        for rows in (1, 5):
            x = torch.randn(1, rows, weight.shape[1], generator=gen).to(weight.dtype)
            want = F.linear(x, weight, bias).float()
            got = linear(x).float()
            scale = want.abs().max().clamp_min(1e-6)
            if got.shape != want.shape or float((got - want).abs().max() / scale) > _CHECK_RTOL[weight.dtype]:
                raise RuntimeError("packed product disagrees with F.linear; not using it")
        return linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        if x.shape[-2] <= EMULATED_BF16_MAX_ROWS:
            return F.linear(x, self.weight, self.plain_bias)
        y = torch.ops.mkldnn._linear_pointwise(x.float(), self.packed, self.bias, "none", [], "")
        return y.to(x.dtype)


class PlainLinear(torch.nn.Module):
    """`F.linear(x, W, b)` behind the same call as `PackedLinear` (the fallback)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.register_buffer("weight", weight.detach(), persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach(), persistent=False)
        self.out_features = weight.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


def make_linear(weight: torch.Tensor, bias: torch.Tensor | None, prepack: bool) -> PackedLinear | PlainLinear:
    """A packed linear if `prepack` (raising if it cannot be built), else a plain one."""
    return PackedLinear.build(weight, bias) if prepack else PlainLinear(weight, bias)
