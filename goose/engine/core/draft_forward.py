"""The engine's forward for self-drafting drafters (SWIFT, Xia et al., arXiv 2410.06916; Draft & Verify, Zhang
et al., arXiv 2309.08168): the target's lean forward with some attention and MLP sub-layers skipped, over the
engine's own KV cache. Draft rows go past the committed prefix P only, so no cache is cloned: the committed
rows are never touched, and the verification forward rewrites rows P.. afterwards. Between calls the cache
holds exactly the prefix, as the engine left it; a skipped attention block writes no row.

A drafter that sets `needs_draft_forward` gets one per prompt from the decode loop (`use_draft_forward`);
it sees tokens, parents and logits, nothing of the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from goose.engine.core.backend import SkipSet
from goose.engine.core.masks import per_layer_kind

if TYPE_CHECKING:
    from goose.engine.core.verifier import VerificationEngine


def check_skip_set(skip: SkipSet, num_layers: int) -> SkipSet:
    """`skip` if every index names a layer of the model (0..L-1), else ValueError naming the bad index."""
    for kind, layers in (("attention", skip.attention), ("mlp", skip.mlp)):
        bad = sorted(i for i in layers if not 0 <= i < num_layers)
        if bad:
            raise ValueError(
                f"skip set: {kind} layer(s) {bad} out of range; the model has layers 0..{num_layers - 1}"
            )
    return skip


class DraftForward:
    """Skipped forwards after the engine's committed prefix. `tree` runs a draft tree's new nodes (node 0 =
    the anchor, at position P); `context` runs committed tokens again, teacher-forced, to score a skip set.
    Counts its forwards and the sub-layers they ran (`forwards`, `sublayers_run`)."""

    def __init__(self, engine: VerificationEngine) -> None:
        if engine.lean is None:
            raise ValueError(
                "a self-draft needs the lean forward (Llama family, Qwen3, Gemma 3 on one device)"
            )
        self.engine = engine
        self.num_layers = engine.num_layers
        self.forwards = 0
        self.sublayers_run = 0
        self._written: tuple[int, SkipSet, list[int], list[int]] | None = None  # (P, skip, tokens, parents)

    @property
    def prefix_len(self) -> int:
        return self.engine.prefix_len

    @torch.inference_mode()
    def tree(self, tokens: Sequence[int], parents: Sequence[int], first: int, skip: SkipSet) -> torch.Tensor:
        """Logits [n - first, V] of nodes first..n-1 of a draft tree (tokens, parents; parents[0] = -1), each
        node at position P + depth seeing the prefix and its ancestors. Nodes 0..first-1 must have been run by
        earlier calls for this prefix with the same skip set (checked)."""
        p, n = self.prefix_len, len(tokens)
        if not 0 <= first < n or len(parents) != n:
            raise ValueError(f"draft tree of {n} nodes ({len(parents)} parents): cannot run nodes {first}..")
        if first > 0:
            written = self._written
            if written is None or written[:2] != (p, skip) or len(written[2]) < first:
                raise RuntimeError("draft rows of the earlier nodes were not written for this prefix")
            if list(tokens[:first]) != written[2][:first] or list(parents[:first]) != written[3][:first]:
                raise RuntimeError("the draft tree's earlier nodes differ from those already run")
        depths = [0] * n
        for i in range(1, n):
            depths[i] = depths[parents[i]] + 1
        device = self.engine.device
        meta = torch.tensor([list(tokens), list(parents), depths], dtype=torch.long).to(device)
        ancestors = _ancestors(parents).to(device)  # [n, n]
        visible = torch.ones((n - first, p + n), dtype=torch.bool, device=device)
        visible[:, p:] = ancestors[first:]
        positions = meta[2] + p
        key_positions = torch.cat([torch.arange(p, device=device), positions])
        logits = self._run(meta[0, first:], positions[first:], visible, key_positions, p + first, skip)
        self._written = (p, skip, list(tokens), list(parents))
        return logits

    @torch.inference_mode()
    def context(self, tokens: Sequence[int], start: int, skip: SkipSet) -> torch.Tensor:
        """Logits [w, V] of committed tokens start..start+w-1 (`tokens`, w of them, start + w <= P) run again
        with `skip`: each sees the committed rows before `start` and the window's own earlier tokens (their
        skipped rows, written past P), as drafted tokens would."""
        p, w = self.prefix_len, len(tokens)
        if w == 0 or start < 0 or start + w > p:
            raise ValueError(
                f"context window {start}..{start + w - 1} is not inside the prefix of {p} tokens"
            )
        device = self.engine.device
        ids = torch.tensor(list(tokens), dtype=torch.long, device=device)
        positions = torch.arange(start, start + w, device=device)
        visible = torch.zeros((w, p + w), dtype=torch.bool, device=device)
        visible[:, :start] = True
        visible[:, p:] = torch.ones((w, w), dtype=torch.bool, device=device).tril_()
        key_positions = torch.cat([torch.arange(p, device=device), positions])
        self._written = None
        return self._run(ids, positions, visible, key_positions, p, skip)

    def _run(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        visible: torch.Tensor,
        key_positions: torch.Tensor,
        rows: int,
        skip: SkipSet,
    ) -> torch.Tensor:
        """The skipped forward of `ids` at `positions` with rows 0..rows-1 valid before it and `visible` [k,
        rows + k] (query, key); afterwards every layer's valid length is back to the prefix."""
        engine, cache = self.engine, self.engine.cache
        check_skip_set(skip, self.num_layers)
        if cache is None:
            raise RuntimeError("a draft forward before the prefill")
        p, k = engine.prefix_len, ids.shape[0]
        _set_length(cache, rows)  # before `reserve`: a reallocation keeps rows up to the longest layer
        try:
            engine.reserve(rows + k)
            masks = self._masks(visible, positions, key_positions)
            logits = engine.lean(ids[None], positions[None], masks, cache, False, skip)
        finally:
            _set_length(cache, p)
        self.forwards += 1
        self.sublayers_run += skip.sublayers_run(self.num_layers)
        return logits

    def _masks(
        self, visible: torch.Tensor, positions: torch.Tensor, key_positions: torch.Tensor
    ) -> torch.Tensor | dict[str, Any]:
        """Additive [1, 1, k, keys] mask(s): `visible`, and on sliding-window layers only keys within the
        window of the query's position."""
        spec = self.engine.mask_spec
        mask = torch.zeros(visible.shape, dtype=spec.dtype, device=visible.device)
        mask = mask.masked_fill_(~visible, spec.neg)[None, None]
        return per_layer_kind(mask, positions, lambda: key_positions, spec, 1 << 62)


def _ancestors(parents: Sequence[int]) -> torch.Tensor:
    """Boolean [n, n]: A[i, j] iff j is i or an ancestor of i (parents come first)."""
    n = len(parents)
    anc = torch.eye(n, dtype=torch.bool)
    for i in range(1, n):
        anc[i] |= anc[parents[i]]
    return anc


def _set_length(cache: Any, rows: int) -> None:
    """Every layer's valid rows = `rows` (the draft writes after them; `rows` = P restores the prefix)."""
    for layer in cache.layers:
        layer.length = rows
