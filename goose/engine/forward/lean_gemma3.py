"""The lean forward for Gemma 3 text models (`Gemma3ForCausalLM`), `LeanDecoder`'s recipe following
`transformers`' modeling_gemma3: scaled embedding, four fp32 RMSNorms (x̂ · (1 + w)) per layer, per-head
q/k norm, one RoPE table per layer type, query_pre_attn_scalar scaling, windowed masks on sliding layers,
gelu_tanh MLP and final logit soft-capping. Attention-logit soft-capping (Gemma 2) is refused: sdpa cannot
apply it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from goose.engine.core.backend import NO_SKIP, SkipSet
from goose.engine.forward.lean_forward import LeanDecoder, attend

if TYPE_CHECKING:
    from goose.engine.core.kv_cache import TreeKVCache
    from goose.engine.forward.packed_linear import PackedLinear, PlainLinear


def _gemma_rms_norm(x: torch.Tensor, one_plus_w: torch.Tensor, eps: float) -> torch.Tensor:
    """Gemma3RMSNorm: fp32 statistics, times (1 + w) in fp32, then back to x's dtype."""
    y = x.float()
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)
    return (y * one_plus_w).type_as(x)


def _norm_params(norm: torch.nn.Module) -> tuple[torch.Tensor, float]:
    """(1 + w) in fp32 (what Gemma3RMSNorm computes on every call) and eps."""
    return 1.0 + norm.weight.float(), norm.eps


@dataclass(frozen=True, slots=True)
class Gemma3Layer:
    """One Gemma 3 decoder layer as `LeanGemma3Decoder.forward` reads it; norms are ((1 + w) fp32, eps)."""

    norm_in: tuple[torch.Tensor, float]
    qkv_proj: PackedLinear | PlainLinear  # fused q|k|v
    heads: int  # query heads h
    kv_heads: int  # key/value heads
    head_dim: int  # d
    qk_norm: tuple[torch.Tensor, float]  # per-head q|k norm, weight [h + kv, d]
    scale: float  # attention scale (query_pre_attn_scalar)
    o_proj: PackedLinear | PlainLinear
    norm_post_attn: tuple[torch.Tensor, float]
    norm_pre_mlp: tuple[torch.Tensor, float]
    gate_up_proj: PackedLinear | PlainLinear  # fused gate|up
    down_proj: PackedLinear | PlainLinear
    norm_post_mlp: tuple[torch.Tensor, float]
    inter: int  # MLP intermediate size


class LeanGemma3Decoder(LeanDecoder):
    """`LeanDecoder`'s contract (same call, same cache, same masks) for `Gemma3ForCausalLM`."""

    MODEL_TYPES = ("gemma3_text",)

    @classmethod
    def unsupported(cls, model: torch.nn.Module) -> str | None:
        cfg = model.config
        reason = cls._common_unsupported(model, ("Gemma3ForCausalLM",))
        if reason:
            return reason
        if getattr(cfg, "attn_logit_softcapping", None) is not None:
            return "attention-logit soft-capping (sdpa cannot apply it)"
        if getattr(cfg, "hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
            return f"hidden_activation {cfg.hidden_activation!r} (the lean forward has gelu_pytorch_tanh)"
        if getattr(cfg, "use_bidirectional_attention", False):
            return "bidirectional attention"
        return None

    @torch.no_grad()
    def __init__(self, model: torch.nn.Module, prepack: bool | None = None) -> None:
        reason = self.unsupported(model)
        if reason:
            raise ValueError(f"lean forward unavailable: {reason}")
        torch.nn.Module.__init__(self)
        body, cfg = model.model, model.config
        self._choose_prepack(model, prepack)
        self.embed = body.embed_tokens  # scales by sqrt(hidden) itself
        self.rotary = body.rotary_emb
        self.final_norm = self._norm(body.norm)
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.layer_types = tuple(cfg.layer_types)
        self.layers: list[Gemma3Layer] = []
        for layer in body.layers:
            a, mlp = layer.self_attn, layer.mlp
            h, kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, a.head_dim
            wqkv, bqkv = self._fuse(a, ("q_proj", "k_proj", "v_proj"))
            wgu, bgu = self._fuse(mlp, ("gate_proj", "up_proj"))
            qk_w = torch.cat(
                [_norm_params(a.q_norm)[0].expand(h, d), _norm_params(a.k_norm)[0].expand(kv, d)]
            )
            qk_w = self._constant(qk_w)
            self.layers.append(
                Gemma3Layer(
                    norm_in=self._norm(layer.input_layernorm),
                    qkv_proj=self._linear(wqkv, bqkv),
                    heads=h,
                    kv_heads=kv,
                    head_dim=d,
                    qk_norm=(qk_w, a.q_norm.eps),
                    scale=a.scaling,
                    o_proj=self._linear(a.o_proj.weight, a.o_proj.bias),
                    norm_post_attn=self._norm(layer.post_attention_layernorm),
                    norm_pre_mlp=self._norm(layer.pre_feedforward_layernorm),
                    gate_up_proj=self._linear(wgu, bgu),
                    down_proj=self._linear(mlp.down_proj.weight, mlp.down_proj.bias),
                    norm_post_mlp=self._norm(layer.post_feedforward_layernorm),
                    inter=mlp.gate_proj.out_features,
                )
            )

    def _norm(self, norm: torch.nn.Module) -> tuple[torch.Tensor, float]:
        """`_norm_params` with (1 + w) registered as a buffer (`LeanDecoder._constant`)."""
        one_plus_w, eps = _norm_params(norm)
        return self._constant(one_plus_w), eps

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
        n = input_ids.shape[1]
        x = self.embed(input_ids)
        rope = {}
        for kind in set(self.layer_types):
            cos, sin = self.rotary(x, position_ids, kind)
            rope[kind] = (cos[:, :, None], sin[:, :, None])  # [1, n, 1, d]: broadcast over heads
        for i, layer in enumerate(self.layers):
            kind = self.layer_types[i]
            layer_mask = mask.get(kind) if isinstance(mask, dict) else mask
            h, kv, inter = layer.heads, layer.kv_heads, layer.inter
            if i not in skip.attention:
                qkv = layer.qkv_proj(_gemma_rms_norm(x, *layer.norm_in))
                qk, v = qkv.view(1, n, h + 2 * kv, layer.head_dim).split((h + kv, kv), dim=2)
                qk = _gemma_rms_norm(qk, *layer.qk_norm)
                o = attend(qk, v, *rope[kind], cache, i, layer_mask, layer.scale, kv)
                x = x + _gemma_rms_norm(layer.o_proj(o), *layer.norm_post_attn)
            if i in skip.mlp:
                continue
            gate, up = layer.gate_up_proj(_gemma_rms_norm(x, *layer.norm_pre_mlp)).split((inter, inter), -1)
            y = layer.down_proj(F.gelu(gate, approximate="tanh") * up)
            x = x + _gemma_rms_norm(y, *layer.norm_post_mlp)
        if last_only:
            x = x[:, -1:]
        logits = self.lm_head(_gemma_rms_norm(x, *self.final_norm))[0]
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits
