"""Verification steps on static shapes, replayed from CUDA graphs (`VerificationEngine(cuda_graphs=
True)`, config `cuda_graphs: true`; the GPU issue, item 3).

Why. A 7B step in fp16 launches a few hundred kernels (32 layers x ~12 ops, plus the LM head);
where the host queues them more slowly than the GPU runs them, part of every step is launch
overhead. A CUDA graph replays the whole forward with one launch (gpt-fast's recipe, which gets it
from `torch.compile(mode="reduce-overhead")`; here the graphs are captured by hand, so the eager
lean forward's kernels, and so its numerics, are kept). experiments/graph_probe.py measures what
a replay saves; `make gpu-check` times this engine beside the eager one and keeps it only where it
helps.

What a graph needs, and how a step gets it: every tensor at a fixed address and of a fixed shape.
- Tree sizes are padded to a few buckets (`BUCKETS`: powers of two up to 256); a tree of n nodes
  runs in the smallest bucket b >= n. The b - n padding nodes (token 0, at position P) see only
  themselves; their rows are written to the cache past the tree's and dropped with the rest at
  compaction, and their logits are never read.
- Attention spans a fixed number of cache rows (`SPAN` rounding: the smallest multiple of 512 that
  holds P + b, at most the cache's capacity), with an additive mask [1, 1, b, span] that shows
  node i the prefix, itself and its ancestors (one mask per layer type; sliding-window layers'
  also hide keys at distance >= window): the span grows with the sequence in 512-row steps, so a
  generation replays a handful of graphs, one per (bucket, span), each captured at its first use.
  Rows beyond P + b inside the span are masked; they hold earlier sequences' keys or zeros (the
  cache's free rows are zeroed when this step is bound to it: uninitialised memory could hold
  NaNs, which a mask cannot hide).
- Keys and values are written at row indices held in a device tensor (`index_copy_`), not at a
  Python offset: `StaticCacheWriter` stands in for the cache in the lean forward's `attend`.
- Inputs (ids, position ids, row indices, masks) are copied into the graph's own buffers before
  each replay, with a few small eager kernels; the logits come out of the graph's output buffer
  and are cloned (a drafter may keep them while the next step replays the same graph).
- A reallocated cache (a sequence longer than every earlier one) moves the buffers the graphs
  point into: every graph is dropped and captured again on first use, into a fresh memory pool.
  To make that rare, the engine reserves at least `MIN_ROWS` cache rows (capped at the model's
  window) while graphs are on, and `capture_all` (called by the runner's untimed warm-up)
  captures every (bucket, span) the cache can hold, so timed steps replay and do not capture.
  A capture that still happens inside a timed prompt is counted: rows record `graph_captures`
  and `graph_capture_s`.
- Non-finite rows: a step that raises NonFiniteLogitsError (an fp16 overflow) may have written
  inf/NaN keys past the prefix, which a later step's span would read (a mask adds finfo.min; it
  cannot hide a NaN); the engine zeroes them (`scrub`) before it raises.

Numerics. The same lean forward, op for op, over more keys (masked ones contribute exact zeros to
the softmax) and over padded rows: products of other shapes may round differently, as a tree step
already does against a one-node step; every method, AR included, runs through the same padded
steps, so fp32 outputs stay identical to AR (tests/engine/test_static_step.py; on CUDA,
tests/engine/test_devices.py).

Without CUDA (`capture=False`, used by the CPU tests) the same buffers and calls run eagerly: this
is how CI checks the padding, the masks and the device-indexed cache writes that the graphs replay.
What the replay itself adds is checked on CUDA only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from goose.engine.core.tree import TreeInputs
    from goose.engine.core.verifier import VerificationEngine

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # padded tree sizes b, one graph per (b, span)
SPAN = 512  # attention spans are multiples of this many cache rows
WARM_UP = 3  # eager calls on a side stream before a capture (torch's CUDA graph docs)
MIN_ROWS = 4096  # cache rows reserved at least while graphs are on (fewer reallocations)


def static_steps_unsupported(engine: VerificationEngine) -> str | None:
    """Why `engine` cannot run static steps (None if it can): they need the lean forward, and its
    cache in one buffer for every layer (one device, one shape)."""
    if engine.lean is None:
        return "static steps need the lean forward (Llama family, Qwen3, Gemma 3 on one device)"
    return None


class StaticCacheWriter:
    """Stands in for the `TreeKVCache` in the lean forward's `attend`: writes the step's keys and
    values at the rows held in `rows` (a device tensor) and returns the first `span` rows of the
    layer's buffers (views at fixed addresses)."""

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
    """The engine's verification forward on padded, fixed shapes (module docstring), replayed from
    CUDA graphs when `capture` is True (the default on CUDA; False runs the same code eagerly)."""

    def __init__(
        self, engine: VerificationEngine, capture: bool | None = None, min_rows: int = MIN_ROWS
    ) -> None:
        """capture: None = on CUDA; min_rows: the cache rows the engine reserves at least (capped
        at the model's window; 0 = only what the sequence needs, as without graphs)."""
        reason = static_steps_unsupported(engine)
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

    # ----------------------------------------------------------------------------- buffers
    def _bind(self) -> None:
        """Follow the cache's storage: at a new allocation, zero its free rows and drop the slots
        (their graphs point into the old buffers)."""
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
            if kind and engine._slides(kind, int(p + b)):
                if key_pos is None:
                    key_pos = torch.arange(span, device=engine.device)
                    key_pos[p : p + b] = slot.positions[0]
                far = (slot.positions[0, :, None] - key_pos[None, :]) >= engine.sliding_window
                mask[0, 0].copy_(full.masked_fill(far, neg))
            else:
                mask[0, 0].copy_(full)

    # ----------------------------------------------------------------------------- the step
    def _run(self, slot: _Slot) -> torch.Tensor:
        masks = slot.masks if self.engine.layer_types else slot.masks[""]
        return self.engine.lean(slot.ids, slot.positions, masks, slot.writer, False)

    def _capture(self, slot: _Slot) -> None:
        """Capture `slot`'s forward (its buffers already hold a real step's inputs): warm-up calls
        on a side stream, then the capture into the shared memory pool."""
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
        """Logits [n, V] of the verification forward over n nodes after the cached prefix (inputs
        as `goose.engine.core.tree.TreeInputs` holds them), through the (bucket, span) slot's graph; the
        cache holds the n nodes' rows afterwards, as after the eager forward."""
        engine = self.engine
        p, n = engine.prefix_len, tokens.shape[0]
        b = self.bucket(n)
        if b is None:
            raise ValueError(f"a tree of {n} nodes is larger than the largest bucket ({self.largest})")
        engine._reserve(p + b)
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
        """Capture every (bucket, span) slot that the current cache can hold, with dummy inputs
        (the graphs do not depend on them), after a prefill and outside any timing (the runner's
        warm-up); the rows it writes past the prefix are never read unmasked. Nothing to do
        without `capture`."""
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
