"""Linear layers with weights reordered once for oneDNN (CPU), for verification's small-M products, where
`F.linear` falls well below bandwidth: inductor's prepacking without compiling, checked against `F.linear`.
Without bf16 kernels a bf16 weight is also packed as fp32 for many-row products (emulated bf16 is slow)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Relative tolerance of the self-check against F.linear (fp32 sums in another order).
_CHECK_RTOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}

# Rows up to which an emulated bf16 product stays with `F.linear` on the bf16 weight.
EMULATED_BF16_MAX_ROWS = 2


def native_bf16() -> bool:
    """True if this CPU's oneDNN has bf16 kernels (AVX-512 BF16, AMX); False without oneDNN."""
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
    """y = x Wᵀ + b with W reordered once for oneDNN, called like `F.linear`. `fp32_compute`: a bf16 weight
    packed as fp32, `weight` keeping the bf16 original for few-row products."""

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
        """Pack `weight` [out, in]; RuntimeError if the packed product disagrees with `F.linear` on a random
        input. fp32_compute: None = where this CPU has no bf16 kernels."""
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
        if x.numel() <= EMULATED_BF16_MAX_ROWS * x.shape[-1]:  # rows of the product (all leading dims)
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
