"""A preallocated KV cache for tree verification, compacted in place (gpt-fast's static cache, eager): no
`torch.cat` per step. `compact` keeps prefix, root and accepted path by a pointer move for a contiguous
path, else one gather over a joint [num_layers, 2, B, H, capacity, D] buffer (a layer on another device
gets its own). Every layer keeps every key; the engine's masks do any windowing.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

_ROUND = 256  # capacities are rounded up to a multiple of this


def _round_up(n: int) -> int:
    return -(-n // _ROUND) * _ROUND


class TreeKVLayer(CacheLayerMixin):
    """One layer's rows: `keys` / `values` are views of the `length` valid rows; `update` appends in place."""

    is_compileable = False
    is_sliding = False  # keeps every key; the engine's masks apply windows
    is_croppable = True

    def __init__(self, owner: TreeKVCache, index: int) -> None:
        # CacheLayerMixin.__init__ would assign self.keys / self.values, which are views here.
        self.owner = owner
        self.index = index
        self.length = 0
        self.k_buf: torch.Tensor | None = None
        self.v_buf: torch.Tensor | None = None
        self.shared = False  # True when the buffers are views of the owner's joint storage
        self.is_initialized = False

    def __repr__(self) -> str:
        return f"TreeKVLayer(index={self.index}, length={self.length}, shared={self.shared})"

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self.k_buf is None else self.k_buf[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor | None:
        return None if self.v_buf is None else self.v_buf[:, :, : self.length]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.owner._bind(self, key_states, value_states)
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.length
        end = start + key_states.shape[-2]
        if end > self.k_buf.shape[-2]:
            self.owner.reserve(end)
        self.k_buf[:, :, start:end].copy_(key_states)
        self.v_buf[:, :, start:end].copy_(value_states)
        self.length = end
        return self.k_buf[:, :, :end], self.v_buf[:, :, :end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1  # grows on demand

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last |tokens_to_remove| rows (transformers' convention: a negative count)."""
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative number of rows to remove")
        self.length = max(0, self.length + tokens_to_remove)

    def reset(self) -> None:
        self.length = 0

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("TreeKVCache holds one sequence (batch size 1, no beam search)")


class TreeKVCache(Cache):
    """Preallocated per-layer KV buffers with a valid-length pointer; `capacity` grows on demand."""

    def __init__(self, num_layers: int, capacity: int = 1024) -> None:
        if num_layers <= 0:
            raise ValueError(f"num_layers must be positive, got {num_layers}")
        super().__init__(layers=[TreeKVLayer(self, i) for i in range(num_layers)])
        self.capacity = _round_up(max(capacity, 1))
        self.storage: torch.Tensor | None = None  # [num_layers, 2, B, H, capacity, D]
        self._spec: tuple | None = None  # (B, H, D, dtype, device) of the joint storage

    def _bind(self, layer: TreeKVLayer, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Give `layer` its buffers: views of the joint storage if its shape matches, else its own."""
        b, h, _, d = key_states.shape
        spec = (b, h, d, key_states.dtype, key_states.device)
        uniform = value_states.shape == (b, h, value_states.shape[-2], d)
        if uniform and self.storage is None:
            self._spec = spec
            self.storage = torch.empty(
                (len(self.layers), 2, b, h, self.capacity, d),
                dtype=key_states.dtype,
                device=key_states.device,
            )
        if uniform and spec == self._spec:
            layer.k_buf, layer.v_buf = self.storage[layer.index, 0], self.storage[layer.index, 1]
            layer.shared = True
        else:
            shape = (b, h, self.capacity)
            layer.k_buf = torch.empty((*shape, d), dtype=key_states.dtype, device=key_states.device)
            layer.v_buf = torch.empty(
                (*shape, value_states.shape[-1]), dtype=value_states.dtype, device=value_states.device
            )
            layer.shared = False

    def reserve(self, rows: int) -> None:
        """Make room for `rows` rows in every layer (reallocate at >= 2x and copy if needed)."""
        if rows <= self.capacity:
            return
        new_cap = _round_up(max(rows, 2 * self.capacity))
        if self.storage is not None:
            valid = max((layer.length for layer in self.layers if layer.shared), default=0)
            old = self.storage
            self.storage = torch.empty(
                (*old.shape[:4], new_cap, old.shape[5]), dtype=old.dtype, device=old.device
            )
            self.storage[:, :, :, :, :valid].copy_(old[:, :, :, :, :valid])
        for layer in self.layers:
            if layer.shared:
                layer.k_buf, layer.v_buf = self.storage[layer.index, 0], self.storage[layer.index, 1]
            elif layer.k_buf is not None:
                for name in ("k_buf", "v_buf"):
                    old = getattr(layer, name)
                    new = torch.empty(
                        (*old.shape[:2], new_cap, old.shape[3]), dtype=old.dtype, device=old.device
                    )
                    new[:, :, : layer.length].copy_(old[:, :, : layer.length])
                    setattr(layer, name, new)
        self.capacity = new_cap

    @property
    def length(self) -> int:
        return self.layers[0].length

    def reset(self) -> None:
        for layer in self.layers:
            layer.length = 0

    def compact(self, start: int, src: torch.Tensor | None, keep: int) -> None:
        """Keep rows [0, start) and `keep` rows after them. `src`: None when they already are [start, start +
        keep), else ascending row indices to gather there (the gather is materialised first: no aliasing).
        """
        end = start + keep
        if src is not None:
            if self.storage is not None and any(layer.shared for layer in self.layers):
                self.storage[:, :, :, :, start:end].copy_(self.storage.index_select(4, src))
            for layer in self.layers:
                if not layer.shared and layer.k_buf is not None:  # e.g. a layer on another GPU
                    idx = src if src.device == layer.k_buf.device else src.to(layer.k_buf.device)
                    layer.k_buf[:, :, start:end].copy_(layer.k_buf.index_select(2, idx))
                    layer.v_buf[:, :, start:end].copy_(layer.v_buf.index_select(2, idx))
        for layer in self.layers:
            layer.length = end
