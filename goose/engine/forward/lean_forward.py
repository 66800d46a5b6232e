"""The lean forward pass for Llama-architecture models (Llama 2/3, Vicuna, SmolLM2) and Qwen3: the
`transformers` model's weights in a few lines of ops (gpt-fast's recipe), used by the verifier wherever
`LeanDecoder.unsupported` allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from goose.engine.core.backend import NO_SKIP, SkipSet
from goose.engine.forward.packed_linear import PackedLinear, PlainLinear, make_linear, prepack_unavailable

if TYPE_CHECKING:
    from goose.engine.core.kv_cache import TreeKVCache


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Llama/Qwen3 RMSNorm, op for op (fp32 statistics, weight applied last)."""
    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


_HALF = (torch.bfloat16, torch.float16)
# One-query half-precision attention with GQA heads as rows (`attend`); False: sdpa's own GQA.
GROUP_HALF_QUERY_ROWS = True


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def attend(
    qk: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cache: TreeKVCache,
    layer: int,
    mask: torch.Tensor | None,
    scale: float,
    kv: int,
) -> torch.Tensor:
    """One layer's attention after the projections: RoPE on the fused queries|keys `qk`, new keys and values
    written into `cache`, sdpa with the engine's `mask` (None: causal), heads merged.

    A one-token half-precision step on a CPU attends with each KV head's query heads as rows of one head:
    the same products, but CPU sdpa's single-query half-precision path is several times slower.
    """
    b, n, heads, d = qk.shape
    h = heads - kv
    qk = qk * cos + _rotate_half(qk) * sin
    q, k = qk.transpose(1, 2).split((h, kv), dim=1)
    k, v = cache.update(k, v.transpose(1, 2), layer)
    if (
        GROUP_HALF_QUERY_ROWS
        and b == 1
        and n == 1
        and mask is None
        and h != kv
        and q.device.type == "cpu"
        and q.dtype in _HALF
    ):
        o = F.scaled_dot_product_attention(q.reshape(1, kv, h // kv, d), k, v, scale=scale)
        return o.reshape(1, 1, h * d)
    if h != kv and not (q.device.type == "cpu" or mask is None):
        k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
    o = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=mask,
        is_causal=mask is None and n > 1,  # only the prefill (the engine keeps it eager)
        scale=scale,
        enable_gqa=h != k.shape[1],
    )
    return o.transpose(1, 2).reshape(b, n, h * d)


@dataclass(frozen=True, slots=True)
class LeanLayer:
    """One decoder layer as `LeanDecoder.forward` reads it (Llama family, Qwen3)."""

    w_in: torch.Tensor  # input RMSNorm weight
    eps_in: float
    qkv_proj: PackedLinear | PlainLinear  # fused q|k|v
    heads: int  # query heads h
    kv_heads: int  # key/value heads
    head_dim: int  # d
    qk_norm: tuple[torch.Tensor, float] | None  # Qwen3's per-head q|k norm (weight [h + kv, d], eps)
    scale: float  # attention scale
    o_proj: PackedLinear | PlainLinear
    w_post: torch.Tensor  # post-attention RMSNorm weight
    eps_post: float
    gate_up_proj: PackedLinear | PlainLinear  # fused gate|up
    down_proj: PackedLinear | PlainLinear
    inter: int  # MLP intermediate size


class LeanDecoder(torch.nn.Module):
    """A lean forward for Llama-architecture models and Qwen3 over the model's own weights: no hooks, no mask
    construction, fused q/k/v and gate/up matmuls (the model's projections become views of the fused
    weights, so nothing is duplicated). Every engine method, AR included, runs this forward, so a fused
    sum's rounding cannot break losslessness between methods. prepack: `PackedLinear` projections on a CPU
    (None = where available). An `nn.Module` so that inductor's freezing takes its buffers as constants.
    """

    MODEL_TYPES = ("llama", "qwen3")

    @classmethod
    def unsupported(cls, model: torch.nn.Module) -> str | None:
        """Why this model cannot use the lean forward (None if it can)."""
        cfg = model.config
        reason = cls._common_unsupported(model, ("LlamaForCausalLM", "Qwen3ForCausalLM"))
        if reason:
            return reason
        if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "pretraining_tp", 1) != 1:
            return "unusual MLP (activation or pretraining_tp)"
        return None

    @classmethod
    def _common_unsupported(cls, model: torch.nn.Module, classes: tuple[str, ...]) -> str | None:
        """What every lean forward needs: model type and class, sdpa, one device, plain float projections."""
        model_type = getattr(model.config, "model_type", None)
        if model_type not in cls.MODEL_TYPES:
            return f"model_type {model_type!r} is not one of {cls.MODEL_TYPES}"
        if type(model).__name__ not in classes:
            return f"{type(model).__name__} is not one of {', '.join(classes)}"
        if getattr(model.config, "_attn_implementation", "sdpa") != "sdpa":
            return "attention implementation is not sdpa"
        if len({p.device for p in model.parameters()}) != 1:
            return "model split over several devices"
        for layer in model.model.layers:
            a, mlp = layer.self_attn, layer.mlp
            linears = [getattr(a, n, None) for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
            linears += [getattr(mlp, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
            if any(type(m) is not torch.nn.Linear or not m.weight.is_floating_point() for m in linears):
                return "projections that are not plain floating-point nn.Linear (quantised?)"
        return None

    @torch.no_grad()
    def __init__(self, model: torch.nn.Module, prepack: bool | None = None) -> None:
        reason = self.unsupported(model)
        if reason:
            raise ValueError(f"lean forward unavailable: {reason}")
        super().__init__()
        body = model.model
        cfg = model.config
        self._choose_prepack(model, prepack)
        self.embed = body.embed_tokens
        self.rotary = body.rotary_emb
        self.norm_w = self._constant(body.norm.weight)
        self.norm_eps = body.norm.variance_epsilon
        self.layer_types = tuple(getattr(cfg, "layer_types", None) or ("full_attention",) * len(body.layers))
        self.layers: list[LeanLayer] = []
        for layer in body.layers:
            a, mlp = layer.self_attn, layer.mlp
            h, kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, a.head_dim
            wqkv, bqkv = self._fuse(a, ("q_proj", "k_proj", "v_proj"))
            wgu, bgu = self._fuse(mlp, ("gate_proj", "up_proj"))
            q_norm, k_norm = getattr(a, "q_norm", None), getattr(a, "k_norm", None)
            self.layers.append(
                LeanLayer(
                    w_in=self._constant(layer.input_layernorm.weight),
                    eps_in=layer.input_layernorm.variance_epsilon,
                    qkv_proj=self._linear(wqkv, bqkv),
                    heads=h,
                    kv_heads=kv,
                    head_dim=d,
                    qk_norm=None if q_norm is None else self._head_norm(q_norm, k_norm, h, kv),
                    scale=a.scaling,
                    o_proj=self._linear(a.o_proj.weight, a.o_proj.bias),
                    w_post=self._constant(layer.post_attention_layernorm.weight),
                    eps_post=layer.post_attention_layernorm.variance_epsilon,
                    gate_up_proj=self._linear(wgu, bgu),
                    down_proj=self._linear(mlp.down_proj.weight, mlp.down_proj.bias),
                    inter=mlp.gate_proj.out_features,
                )
            )

    def _choose_prepack(self, model: torch.nn.Module, prepack: bool | None) -> None:
        """Set `prepacked` (see the class docstring) and build the LM head with it."""
        self.projections = torch.nn.ModuleList()
        why_not = prepack_unavailable(model.lm_head.weight)
        if prepack and why_not:
            raise ValueError(f"prepack=true: {why_not}")
        self.prepacked = bool(prepack or (prepack is None and why_not is None))
        try:
            self.lm_head = self._linear(model.lm_head.weight, model.lm_head.bias)
        except RuntimeError:
            if prepack:
                raise
            self.prepacked = False
            self.lm_head = self._linear(model.lm_head.weight, model.lm_head.bias)

    def _linear(self, weight: torch.Tensor, bias: torch.Tensor | None) -> PackedLinear | PlainLinear:
        """A projection, packed or plain as `prepacked` says, registered as a submodule."""
        linear = make_linear(weight, bias, self.prepacked)
        self.projections.append(linear)
        return linear

    def _constant(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` detached and registered as a buffer, so a compiled forward freezes it."""
        tensor = tensor.detach()
        self.register_buffer(f"constant_{len(self._buffers)}", tensor, persistent=False)
        return tensor

    def _head_norm(
        self, q_norm: torch.nn.Module, k_norm: torch.nn.Module, h: int, kv: int
    ) -> tuple[torch.Tensor, float]:
        """Qwen3's per-head q_norm / k_norm as one weight [h + kv, d] over the fused q|k heads."""
        if q_norm.variance_epsilon != k_norm.variance_epsilon:
            raise ValueError("q_norm and k_norm with different eps")
        d = q_norm.weight.shape[0]
        weight = torch.cat([q_norm.weight.expand(h, d), k_norm.weight.expand(kv, d)])
        return self._constant(weight), q_norm.variance_epsilon

    @staticmethod
    def _fuse(module: torch.nn.Module, names: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One weight (and bias) for the linears `names` of `module`, whose own weights become views of it;
        idempotent across engines on the same model (`_goose_fused`).
        """
        linears = [getattr(module, n) for n in names]
        cached = getattr(module, "_goose_fused", {}).get(names)
        if cached is not None:
            fused, bias = cached
            offsets, start = [], 0
            for m in linears:
                offsets.append(start)
                start += m.weight.shape[0]
            if all(m.weight.data_ptr() == fused[o].data_ptr() for m, o in zip(linears, offsets, strict=True)):
                return fused, bias
        fused = torch.cat([m.weight for m in linears])
        start = 0
        for m in linears:
            rows = m.weight.shape[0]
            m.weight = torch.nn.Parameter(fused[start : start + rows], requires_grad=False)
            start += rows
        bias = torch.cat([m.bias for m in linears]) if linears[0].bias is not None else None
        if not hasattr(module, "_goose_fused"):
            module._goose_fused = {}
        module._goose_fused[names] = (fused, bias)
        return fused, bias

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor | dict[str, torch.Tensor | None] | None,
        cache: TreeKVCache,
        last_only: bool = False,
        skip: SkipSet = NO_SKIP,
    ) -> torch.Tensor:
        """Logits [n, V] (or [1, V] with last_only) of `input_ids` [1, n] at `position_ids`,
        writing their keys and values into `cache`; `skip`: sub-layers left out (a self-draft)."""
        return self.forward_batch(input_ids, position_ids, mask, cache, last_only, skip)[0]

    def forward_batch(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor | dict[str, torch.Tensor | None] | None,
        cache: TreeKVCache,
        last_only: bool = False,
        skip: SkipSet = NO_SKIP,
    ) -> torch.Tensor:
        """Logits [B, n, V] of `input_ids` [B, n] at `position_ids` [B, n] under `mask` [B, 1, n, keys]:
        the batched engine's forward (goose.engine.batch); a batch of one is `forward`."""
        b, n = input_ids.shape
        x = self.embed(input_ids)
        cos, sin = self.rotary(x, position_ids)
        cos, sin = cos[:, :, None], sin[:, :, None]  # [B, n, 1, d]: broadcast over heads
        for i, layer in enumerate(self.layers):
            layer_mask = mask.get(self.layer_types[i]) if isinstance(mask, dict) else mask
            h, kv, inter = layer.heads, layer.kv_heads, layer.inter
            if i not in skip.attention:
                y = _rms_norm(x, layer.w_in, layer.eps_in)
                qkv = layer.qkv_proj(y).view(b, n, h + 2 * kv, layer.head_dim)
                qk, v = qkv.split((h + kv, kv), dim=2)  # queries and keys get the same norm and RoPE
                if layer.qk_norm is not None:  # Qwen3: RMSNorm over each head (q_norm for q, k_norm for k)
                    qk = _rms_norm(qk, *layer.qk_norm)
                x = x + layer.o_proj(attend(qk, v, cos, sin, cache, i, layer_mask, layer.scale, kv))
            if i in skip.mlp:
                continue
            y = _rms_norm(x, layer.w_post, layer.eps_post)
            gate, up = layer.gate_up_proj(y).split((inter, inter), dim=-1)
            x = x + layer.down_proj(F.silu(gate) * up)
        if last_only:
            x = x[:, -1:]
        return self.lm_head(_rms_norm(x, self.norm_w, self.norm_eps))
