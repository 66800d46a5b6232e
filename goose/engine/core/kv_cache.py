"""A preallocated (static) KV cache for tree verification, with in-place compaction.

`TreeKVCache` is a `transformers` `Cache` whose layers write the new key/value rows of a forward
pass in place into preallocated buffers and hand the attention the views of the valid rows: no
`torch.cat` per step and no reallocation while the sequence fits (gpt-fast's static cache, kept
eager). After the verification forward the engine keeps the prefix, the root and the accepted path
and drops the rest with one `compact` call: for a contiguous path (AR, chains, spine prefixes) it
only moves the valid-length pointer; otherwise one gather and one copy over the buffer that holds
every layer's keys and values at once (not one pair of copies per layer).

Layout. When every attention layer has the same (batch, kv heads, head dim) (Llama, Qwen3,
Gemma 3, Vicuna, ...), all layers live in one tensor [num_layers, 2, B, H, capacity, D] and each
layer's keys / values are views of it; a layer of another shape, dtype or device (a model split
over two GPUs by device_map) gets a buffer of its own and is compacted on its own. Every layer keeps every key, sliding-window layers included: the engine's
masks do the windowing, so compaction is the same for every layer.

Capacity. `reserve(n)` makes room for n rows; when a sequence outgrows the buffer it is
reallocated at (at least) twice the size and the valid rows are copied over, so growth costs
O(log) reallocations per sequence. The engine reserves prompt + max_new_tokens + a tree's worth at
the prefill and reuses the buffer across prompts.

Only the methods that the `transformers` models call on a cache during a forward (`update`,
`get_seq_length`, `get_mask_sizes`, the per-layer flags) and a few housekeeping ones (`crop`,
`reset`) are implemented; beam search, offloading and `torch.compile` are out of scope.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

_ROUND = 256  # capacities are rounded up to a multiple of this


def _round_up(n: int) -> int:
    return -(-n // _ROUND) * _ROUND


class TreeKVLayer(CacheLayerMixin):
    """One attention layer's rows of a `TreeKVCache`.

    `length` is the number of valid rows; `keys` / `values` are views [B, H, length, D] of the
    layer's buffers. `update` writes the new rows at [length, length + n) and advances `length`.
    """

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
        """Write the new rows in place; return views of every valid row (old and new)."""
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
    """Preallocated per-layer KV buffers with a valid-length pointer and in-place compaction.

    num_layers  the model's decoder layers (config.num_hidden_layers of the text config)
    capacity    rows to allocate at the first forward (grown on demand)
    """

    def __init__(self, num_layers: int, capacity: int = 1024) -> None:
        if num_layers <= 0:
            raise ValueError(f"num_layers must be positive, got {num_layers}")
        super().__init__(layers=[TreeKVLayer(self, i) for i in range(num_layers)])
        self.capacity = _round_up(max(capacity, 1))
        self.storage: torch.Tensor | None = None  # [num_layers, 2, B, H, capacity, D]
        self._spec: tuple | None = None  # (B, H, D, dtype, device) of the joint storage

    # ------------------------------------------------------------------ allocation
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

    # ------------------------------------------------------------------ sequence bookkeeping
    @property
    def length(self) -> int:
        """Valid rows of the first layer (all layers agree between forwards)."""
        return self.layers[0].length

    def reset(self) -> None:
        """Start a new sequence; the buffers are kept (no reallocation)."""
        for layer in self.layers:
            layer.length = 0

    def compact(self, start: int, src: torch.Tensor | None, keep: int) -> None:
        """Keep rows [0, start) and `keep` rows after them; drop everything else.

        src  None when the kept rows are already [start, start + keep) (a contiguous path);
             else a long tensor of `keep` row indices (ascending, >= start, on the cache's device)
             that are moved to [start, start + keep). Rows only move towards lower indices and the
             gather is materialised before the write, so there is no aliasing.
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
