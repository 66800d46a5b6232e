"""Verification steps on static shapes, replayed from CUDA graphs (`cuda_graphs: true`): where the host queues
a step's few hundred kernels slower than the GPU runs them, one replay launches them all (gpt-fast's
recipe, captured by hand so the eager lean forward's numerics are kept).

A graph needs fixed addresses and shapes: trees are padded to `BUCKETS`, attention spans a multiple of
`SPAN` rows under a mask, keys are written at device-held rows (`StaticCacheWriter`), and inputs are copied
into per-slot buffers. A reallocated cache invalidates the graphs, so `MIN_ROWS` are reserved and the
warm-up captures every slot. Free rows are zeroed, since a mask cannot hide NaN. With `capture=False` the
same code runs eagerly (the CPU tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

from goose.engine.core.window import slides

if TYPE_CHECKING:
    from goose.engine.core.kv_cache import TreeKVCache
    from goose.engine.core.tree import TreeInputs
    from goose.engine.forward.lean_forward import LeanDecoder

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # padded tree sizes b, one graph per (b, span)
SPAN = 512  # attention spans are multiples of this many cache rows
WARM_UP = 3  # eager calls on a side stream before a capture (torch's CUDA graph docs)
MIN_ROWS = 4096  # cache rows reserved at least while graphs are on (fewer reallocations)


class StepEngine(Protocol):
    """What static steps use of their engine (`VerificationEngine` is one); a protocol, so that this backend
    does not import the verifier that owns it."""

    device: torch.device
    dtype: torch.dtype
    lean: LeanDecoder | None
    cache: TreeKVCache | None
    prefix_len: int
    layer_types: tuple[str, ...]
    sliding_window: int | None

    def reserve(self, rows: int) -> None: ...


def static_steps_unsupported(lean: LeanDecoder | None) -> str | None:
    """Why an engine with the lean forward `lean` cannot run static steps (None if it can): they need the
    lean forward, and its cache in one buffer for every layer (one device, one shape)."""
    if lean is None:
        return "static steps need the lean forward (Llama family, Qwen3, Gemma 3 on one device)"
    return None


class StaticCacheWriter:
    """Stands in for the cache in the lean forward's `attend`: writes keys and values at the device-held
    `rows` and returns the first `span` rows of the layer's buffers.
    """

    def __init__(self, cache: Any, rows: torch.Tensor, span: int) -> None:
        self.cache = cache
        self.rows = rows
        self.span = span

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer: int):
        buffers = self.cache.layers[layer]
        buffers.k_buf.index_copy_(2, self.rows, key_states)
        buffers.v_buf.index_copy_(2, self.rows, value_states)
        return buffers.k_buf[:, :, : self.span], buffers.v_buf[:, :, : self.span]


@dataclass
class _Slot:
    """The fixed buffers of one (bucket b, span), and its graph once captured."""

    ids: torch.Tensor  # [1, b] input ids
    positions: torch.Tensor  # [1, b] position ids
    rows: torch.Tensor  # [b] cache rows written
    masks: dict[str, torch.Tensor]  # layer type ("" for all layers) -> additive [1, 1, b, span]
    writer: StaticCacheWriter
    logits: torch.Tensor | None = None  # the graph's output buffer [b, V]
    replay: Callable[[], Any] | None = None
    calls: int = field(default=0)


class StaticStep:
    """The verification forward on padded, fixed shapes, replayed from CUDA graphs when `capture` is True."""

    def __init__(self, engine: StepEngine, capture: bool | None = None, min_rows: int = MIN_ROWS) -> None:
        """capture: None = on CUDA; min_rows: cache rows reserved at least (0: what a sequence needs)."""
        reason = static_steps_unsupported(engine.lean)
        if reason:
            raise ValueError(f"cuda_graphs: {reason}")
        is_cuda = torch.device(engine.device).type == "cuda"
        if capture and not is_cuda:
            raise ValueError(f"cuda_graphs needs a CUDA device; the engine runs on {engine.device}")
        self.engine = engine
        self.capture = is_cuda if capture is None else capture
        self.largest = BUCKETS[-1]
        self.min_rows = min_rows
        self.captures = 0  # graphs captured so far (recaptures after a reallocation included)
        self.capture_s = 0.0  # seconds spent capturing them (warm-up calls included)
        self._slots: dict[tuple[int, int], _Slot] = {}
        self._storage_ptr: int | None = None
        self._pool = torch.cuda.graph_pool_handle() if self.capture else None

    @staticmethod
    def bucket(n: int) -> int | None:
        """The padded size of a tree of n nodes (None: larger than every bucket, run eagerly)."""
        return next((b for b in BUCKETS if b >= n), None)

    def _bind(self) -> None:
        """Follow the cache's storage: at a new allocation zero its free rows and drop the stale graphs."""
        cache = self.engine.cache
        storage = cache.storage
        if storage is None or not all(layer.shared for layer in cache.layers):
            raise ValueError(
                "cuda_graphs: every layer's cache must live in one buffer (one device, one shape)"
            )
        if storage.data_ptr() != self._storage_ptr:
            storage[:, :, :, :, cache.length :].zero_()
            if self._slots and self.capture:  # the dropped graphs' pool may not be reusable
                self._pool = torch.cuda.graph_pool_handle()
            self._slots.clear()
            self._storage_ptr = storage.data_ptr()

    def scrub(self) -> None:
        """Zero the cache rows past the prefix (after a non-finite step: module docstring)."""
        cache = self.engine.cache
        if cache is not None and cache.storage is not None:
            cache.storage[:, :, :, :, self.engine.prefix_len :].zero_()

    def _slot(self, b: int, span: int) -> _Slot:
        key = (b, span)
        if key not in self._slots:
            device, dtype = self.engine.device, self.engine.dtype
            rows = torch.zeros(b, dtype=torch.long, device=device)
            kinds = self.engine.layer_types or ("",)
            self._slots[key] = _Slot(
                ids=torch.zeros((1, b), dtype=torch.long, device=device),
                positions=torch.zeros((1, b), dtype=torch.long, device=device),
                rows=rows,
                masks={k: torch.zeros((1, 1, b, span), dtype=dtype, device=device) for k in kinds},
                writer=StaticCacheWriter(self.engine.cache, rows, span),
            )
        return self._slots[key]

    def _fill(
        self, slot: _Slot, tokens: torch.Tensor, positions: torch.Tensor, ancestors: torch.Tensor
    ) -> None:
        """Copy one step's inputs into `slot`'s buffers: n real nodes, then padding."""
        engine = self.engine
        p, n = engine.prefix_len, tokens.shape[0]
        b, span = slot.ids.shape[1], next(iter(slot.masks.values())).shape[-1]
        slot.ids[0, :n].copy_(tokens)
        slot.ids[0, n:].zero_()
        slot.positions[0, :n].copy_(positions)
        slot.positions[0, n:].fill_(p)
        torch.arange(p, p + b, out=slot.rows)
        neg = torch.finfo(engine.dtype).min
        full = torch.full((b, span), neg, dtype=engine.dtype, device=engine.device)
        full[:n, :p] = 0
        full[:n, p : p + n].masked_fill_(ancestors, 0)
        pad = torch.arange(n, b, device=engine.device)
        full[pad, p + pad] = 0
        key_pos = None
        for kind, mask in slot.masks.items():
            if kind and slides(kind, engine.sliding_window, int(p + b)):
                if key_pos is None:
                    key_pos = torch.arange(span, device=engine.device)
                    key_pos[p : p + b] = slot.positions[0]
                far = (slot.positions[0, :, None] - key_pos[None, :]) >= engine.sliding_window
                mask[0, 0].copy_(full.masked_fill(far, neg))
            else:
                mask[0, 0].copy_(full)

    def _run(self, slot: _Slot) -> torch.Tensor:
        masks = slot.masks if self.engine.layer_types else slot.masks[""]
        return self.engine.lean(slot.ids, slot.positions, masks, slot.writer, False)

    def _capture(self, slot: _Slot) -> None:
        """Capture `slot`'s forward: warm-up calls on a side stream, then capture into the shared pool."""
        t0 = time.perf_counter()
        stream = torch.cuda.Stream(self.engine.device)
        stream.wait_stream(torch.cuda.current_stream(self.engine.device))
        with torch.cuda.stream(stream):
            for _ in range(WARM_UP):
                self._run(slot)
        torch.cuda.current_stream(self.engine.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            slot.logits = self._run(slot)
        slot.replay = graph.replay
        self.captures += 1
        torch.cuda.synchronize(self.engine.device)
        self.capture_s += time.perf_counter() - t0

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, ancestors: torch.Tensor) -> torch.Tensor:
        """Logits [n, V] of the verification forward over n nodes after the cached prefix, through the
        (bucket, span) slot's graph; the cache then holds the n rows, as after the eager forward.
        """
        engine = self.engine
        p, n = engine.prefix_len, tokens.shape[0]
        b = self.bucket(n)
        if b is None:
            raise ValueError(f"a tree of {n} nodes is larger than the largest bucket ({self.largest})")
        engine.reserve(p + b)
        self._bind()
        span = min(-(-(p + b) // SPAN) * SPAN, engine.cache.capacity)
        slot = self._slot(b, span)
        self._fill(slot, tokens, positions, ancestors)
        if not self.capture:
            logits = self._run(slot)
        else:
            if slot.replay is None:
                self._capture(slot)
            slot.replay()
            logits = slot.logits
        slot.calls += 1
        for layer in engine.cache.layers:
            layer.length = p + n
        return logits[:n].clone() if self.capture else logits[:n]

    def capture_all(self) -> None:
        """Capture every (bucket, span) slot the current cache can hold, with dummy inputs, after a prefill
        and outside any timing.
        """
        engine = self.engine
        if not self.capture or engine.cache is None:
            return
        self._bind()
        p, capacity = engine.prefix_len, engine.cache.capacity
        for span in sorted({min(s, capacity) for s in range(SPAN, capacity + SPAN, SPAN)}):
            for b in BUCKETS:
                if p + b > span or (b, span) in self._slots and self._slots[(b, span)].replay:
                    continue
                slot = self._slot(b, span)
                tokens = torch.zeros(b, dtype=torch.long, device=engine.device)
                positions = torch.full((b,), p, dtype=torch.long, device=engine.device)
                self._fill(slot, tokens, positions, torch.eye(b, dtype=torch.bool, device=engine.device))
                self._capture(slot)

    def forward_tree(self, inputs: TreeInputs) -> torch.Tensor:
        """`forward` over a tree's device inputs."""
        return self.forward(inputs.tokens, inputs.positions, inputs.ancestors)

    def forward_one(self, token: int) -> torch.Tensor:
        """`forward` over a one-node tree (the anchor `token` at position P)."""
        engine = self.engine
        tokens = torch.full((1,), token, dtype=torch.long, device=engine.device)
        positions = torch.full((1,), engine.prefix_len, dtype=torch.long, device=engine.device)
        return self.forward(tokens, positions, torch.ones((1, 1), dtype=torch.bool, device=engine.device))

    def stats(self) -> dict[str, Any]:
        """What ran: graphs captured, and steps per (bucket, span)."""
        return {
            "captures": self.captures,
            "capture_s": self.capture_s,
            "steps": {f"{b}x{span}": slot.calls for (b, span), slot in sorted(self._slots.items())},
        }
