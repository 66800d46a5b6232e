"""The KV rows of a batch of requests: one preallocated buffer [layers, 2, slots, H, capacity, D] in which
slot b's own sequence is rows [0, P_b). A step writes every slot's tree at the same rows [W, W + n) after
W = max_b P_b (`TreeKVLayer.update`'s common pointer); the gap [P_b, W) of a shorter slot is hidden by the
engine's mask. After the walk each slot's kept path moves to [P_b, P_b + keep) and W shrinks to the new
max. The active requests always occupy slots [0, k): the forward runs on views of those rows, never copies.

The buffer starts zeroed and holds only rows a forward wrote, so a hidden row is finite: an additive mask
turns its weight into exactly 0, and 0 · finite adds nothing (0 · NaN would).
"""

from __future__ import annotations

import torch

from goose.engine.core.kv_cache import TreeKVCache, _round_up


class BatchKVCache(TreeKVCache):
    """`slots` sequences' KV rows with per-slot lengths (`lengths`); the layers see the first `active` slots."""

    def __init__(
        self,
        num_layers: int,
        slots: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str,
        capacity: int = 1024,
    ) -> None:
        if slots <= 0:
            raise ValueError(f"slots must be positive, got {slots}")
        super().__init__(num_layers, capacity)
        self.slots = slots
        self.lengths = [0] * slots  # P_b: rows of slot b's own sequence
        self.active = 0
        self.storage = torch.zeros(
            (num_layers, 2, slots, kv_heads, self.capacity, head_dim), dtype=dtype, device=device
        )
        for layer in self.layers:
            layer.dtype, layer.device = dtype, torch.device(device)
            layer.shared = True
            layer.is_initialized = True
        self._bind_views()

    def _bind_views(self) -> None:
        for layer in self.layers:
            layer.k_buf = self.storage[layer.index, 0, : self.active]
            layer.v_buf = self.storage[layer.index, 1, : self.active]

    def set_active(self, active: int) -> None:
        """Let the layers see slots [0, active)."""
        if not 0 <= active <= self.slots:
            raise ValueError(f"active slots must lie in [0, {self.slots}], got {active}")
        self.active = active
        self._bind_views()

    @property
    def width(self) -> int:
        """W: the row where the next step's trees start (the longest active sequence)."""
        return max(self.lengths[: self.active], default=0)

    def _set_pointer(self, rows: int) -> None:
        for layer in self.layers:
            layer.length = rows

    def reserve(self, rows: int) -> None:
        """Room for `rows` rows per slot; a grown buffer is zeroed beyond the copied rows."""
        if rows <= self.capacity:
            return
        new_cap = _round_up(max(rows, 2 * self.capacity))
        old = self.storage
        self.storage = torch.zeros(
            (*old.shape[:4], new_cap, old.shape[5]), dtype=old.dtype, device=old.device
        )
        self.storage[..., : self.capacity, :].copy_(old)
        self.capacity = new_cap
        self._bind_views()

    def write_prefix(self, slot: int, rows: torch.Tensor) -> None:
        """Slot `slot`'s sequence becomes `rows` [layers, 2, H, P, D] (a batch-1 prefill's cache)."""
        p = rows.shape[-2]
        self.reserve(p)
        self.storage[:, :, slot, :, :p].copy_(rows)
        self.lengths[slot] = p

    def begin_step(self, nodes: int) -> int:
        """Before a forward over trees of up to `nodes` nodes: room, the common pointer at W; returns W."""
        w = self.width
        self.reserve(w + nodes)
        self._set_pointer(w)
        return w

    def keep_path(self, slot: int, src: list[int], keep: int) -> None:
        """After the forward: slot `slot` keeps rows `src` (its tree's kept nodes, absolute rows, ascending)
        at [P_b, P_b + keep)."""
        p = self.lengths[slot]
        if keep:
            idx = torch.tensor(src[:keep], dtype=torch.long, device=self.storage.device)
            rows = self.storage[:, :, slot].index_select(3, idx)  # materialised: no aliasing
            self.storage[:, :, slot, :, p : p + keep].copy_(rows)
        self.lengths[slot] = p + keep

    def end_step(self) -> None:
        self._set_pointer(self.width)

    def move(self, src: int, dst: int) -> None:
        """Slot `dst` takes slot `src`'s sequence (to keep the active slots first)."""
        p = self.lengths[src]
        if src != dst:
            self.storage[:, :, dst, :, :p].copy_(self.storage[:, :, src, :, :p])
            self.lengths[dst] = p
        self.lengths[src] = 0
