"""Additive attention masks of the engine's forwards: the prefill's causal mask, a one-node step's and a tree
step's (the cached prefix plus the node's ancestors), each per layer kind where sliding-window layers (Gemma
3's local layers) also hide keys a window or more behind the query. Shared by the verifier and the
self-draft's forward (goose.engine.core.draft_forward).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from goose.engine.core.window import slides

Masks = torch.Tensor | dict[str, torch.Tensor]


@dataclass(frozen=True)
class MaskSpec:
    """What a model's masks depend on: dtype and device, its layer kinds (empty: one kind, no windows) and
    the sliding window."""

    dtype: torch.dtype
    device: torch.device
    layer_types: tuple[str, ...]
    sliding_window: int | None

    @property
    def neg(self) -> float:
        return torch.finfo(self.dtype).min


def per_layer_kind(
    mask: torch.Tensor,
    positions: torch.Tensor,
    key_positions: Callable[[], torch.Tensor],
    spec: MaskSpec,
    longest_distance: int,
) -> Masks:
    """`mask` [1, 1, n, keys] itself for a model with one layer kind; else per kind, on sliding-window kinds
    that reach `longest_distance` the mask that also hides keys >= window behind the query."""
    if not spec.layer_types:
        return mask
    masks: dict[str, torch.Tensor] = {}
    for kind in spec.layer_types:
        if slides(kind, spec.sliding_window, longest_distance):
            far = (positions[:, None] - key_positions()[None, :]) >= spec.sliding_window
            masks[kind] = mask.masked_fill(far[None, None], spec.neg)
        else:
            masks[kind] = mask
    return masks


def tree_mask(
    anc: torch.Tensor, positions: torch.Tensor, prefix_positions: torch.Tensor, max_depth: int, spec: MaskSpec
) -> Masks:
    """[1, 1, n, P + n]: the whole prefix plus each node's ancestors (`anc`); nodes sit at `positions`."""
    p, n = prefix_positions.shape[0], anc.shape[0]
    mask = torch.zeros((1, 1, n, p + n), dtype=spec.dtype, device=spec.device)
    mask[0, 0, :, p:].masked_fill_(~anc, spec.neg)
    return per_layer_kind(
        mask, positions, lambda: torch.cat([prefix_positions, positions]), spec, p + max_depth
    )


def ar_mask(prefix_len: int, spec: MaskSpec) -> dict[str, torch.Tensor | None] | None:
    """Mask(s) of a one-node step at position P: none, except a sliding-window row."""
    if not spec.layer_types:
        return None
    p = prefix_len
    masks: dict[str, torch.Tensor | None] = {}
    for kind in spec.layer_types:
        if slides(kind, spec.sliding_window, p):
            row = torch.zeros((1, 1, 1, p + 1), dtype=spec.dtype, device=spec.device)
            row[..., : p - spec.sliding_window + 1] = spec.neg
            masks[kind] = row
        else:
            masks[kind] = None
    return masks


def prefill_mask(positions: torch.Tensor, spec: MaskSpec) -> dict[str, torch.Tensor] | None:
    """Causal mask(s) of a prefill over `positions`; plain models use sdpa's causal path (no mask)."""
    if not spec.layer_types:
        return None
    n = positions.shape[0]
    causal = positions[:, None] >= positions[None, :]
    masks = {}
    for kind in spec.layer_types:
        vis = (
            causal & ((positions[:, None] - positions[None, :]) < spec.sliding_window)
            if slides(kind, spec.sliding_window, n - 1)
            else causal
        )
        masks[kind] = torch.zeros((n, n), dtype=spec.dtype, device=spec.device).masked_fill_(~vis, spec.neg)[
            None, None
        ]
    return masks
