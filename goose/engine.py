"""The shared verification engine: prefill, verify a draft tree in one forward pass, greedy walk,
KV compaction.

Every method (AR = a one-node tree, PLD = a chain, TR / iso / eagle2 / Goose = trees) goes
through `VerificationEngine.verify`, so every method is timed by the same code.

Attention: one forward over the n tree nodes after the cached prefix of length P, with a 4-D
additive mask in which node i sees the whole prefix, itself and its ancestors, and position ids
P + depth(i). Models with sliding-window layers (Gemma 3, some Qwen configs) get one mask per
layer type: the sliding layers' mask additionally hides keys at position distance >= window, so
the result equals sequential decoding (the cache keeps every key; the mask does the windowing).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache

from goose.drafter import VerifyOutcome
from goose.tree import SPINE, DraftTree, tree_attention_inputs


class ContextLengthError(ValueError):
    """Raised when a prompt or a draft tree would exceed the model's context window."""


def greedy_walk(tree: DraftTree, predictions: Sequence[int]) -> list[int]:
    """Longest path of the tree that the target model would itself have generated greedily.

    From the root, move to the child whose token equals argmax(logits[u]); a SPINE child wins a
    tie (SPEC); stop when no child matches. Returns node indices, root first.
    """
    children = tree.children()
    path = [0]
    node = 0
    while True:
        want = predictions[node]
        match = -1
        for child in children[node]:
            if tree.tokens[child] == want and (match < 0 or tree.sources[child] == SPINE):
                match = child
                if tree.sources[child] == SPINE:
                    break
        if match < 0:
            return path
        path.append(match)
        node = match


def cut_at_stop(tokens: list[int], eos_token_ids: Sequence[int], budget: int) -> list[int]:
    """Cut committed tokens at the first EOS (kept) and at the remaining token budget."""
    out = tokens[: max(budget, 0)]
    for i, t in enumerate(out):
        if t in eos_token_ids:
            return out[: i + 1]
    return out


class VerificationEngine:
    """Owns the target model's KV cache for one sequence at a time (batch size 1).

    Paper symbols: P is the cached prefix length; the anchor (node 0) is the last committed token,
    not yet in the cache.
    """

    def __init__(self, model: torch.nn.Module, eos_token_ids: Sequence[int], context_length: int | None = None):
        self.model = model
        self.eos_token_ids = tuple(eos_token_ids)
        cfg = model.config
        self.context_length = context_length or getattr(cfg, "max_position_embeddings", None) or 1 << 30
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        layer_types = getattr(cfg, "layer_types", None)
        self.layer_types: tuple[str, ...] = tuple(sorted(set(layer_types))) if layer_types else ()
        self.sliding_window: int | None = getattr(cfg, "sliding_window", None)
        self.cache: DynamicCache | None = None
        self.prefix_len = 0

    # ----------------------------------------------------------------------------- forward passes
    def _mask(self, visible: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
        """Additive [1, 1, n, P + n] mask(s) from the boolean visibility matrix."""
        neg = torch.finfo(self.dtype).min

        def additive(vis: torch.Tensor) -> torch.Tensor:
            zeros = torch.zeros(vis.shape, dtype=self.dtype, device=self.device)
            return zeros.masked_fill(~vis, neg)[None, None]

        if not self.layer_types:
            return additive(visible)
        masks: dict[str, torch.Tensor] = {}
        key_pos = torch.cat(
            [torch.arange(self.prefix_len, device=self.device), position_ids[0]]
        )  # positions of every key: prefix rows, then the tree nodes
        for kind in self.layer_types:
            vis = visible
            if kind == "sliding_attention" and self.sliding_window:
                dist = position_ids[0][:, None] - key_pos[None, :]
                vis = visible & (dist < self.sliding_window)
            masks[kind] = additive(vis)
        return masks

    @torch.inference_mode()
    def _forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=self._mask(visible, position_ids),
            past_key_values=self.cache,
            use_cache=True,
        )
        return out.logits[0]

    @torch.inference_mode()
    def prefill(self, prompt_ids: Sequence[int]) -> torch.Tensor:
        """Start a new sequence: forward the prompt into a fresh cache. Returns logits [P, V]."""
        n = len(prompt_ids)
        if n == 0:
            raise ValueError("empty prompt: the prefill needs at least one token")
        if n >= self.context_length:
            raise ContextLengthError(
                f"prompt has {n} tokens; the model's context window is {self.context_length}"
            )
        # A plain DynamicCache (no config) keeps every key of every layer, sliding layers included;
        # the masks do the windowing, so that compaction is the same for every layer.
        self.cache = DynamicCache()
        self.prefix_len = 0
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=self.device)
        pos = torch.arange(n, device=self.device)[None]
        visible = torch.ones(n, n, dtype=torch.bool, device=self.device).tril_()
        logits = self._forward(ids, pos, visible)
        self.prefix_len = n
        return logits

    @torch.inference_mode()
    def verify(self, tree: DraftTree, budget: int) -> VerifyOutcome:
        """Verify `tree` in one forward pass and commit the accepted path.

        budget: how many more tokens may be committed (max_new_tokens minus generated so far).
        The cache afterwards holds prefix + root + accepted path; the bonus token is the next anchor.
        """
        if self.cache is None:
            raise RuntimeError("verify() before prefill()")
        last_pos = self.prefix_len + max(tree.depths)
        if last_pos >= self.context_length:
            raise ContextLengthError(
                f"draft tree reaches position {last_pos}; the context window is {self.context_length}"
            )
        input_ids, position_ids, visible = tree_attention_inputs(tree, self.prefix_len, self.device)
        logits = self._forward(input_ids, position_ids, visible)
        predictions: list[int] = logits.argmax(dim=-1).tolist()  # the one host sync of the step
        path = greedy_walk(tree, predictions)
        proposed = [tree.tokens[i] for i in path[1:]] + [predictions[path[-1]]]
        new_tokens = cut_at_stop(proposed, self.eos_token_ids, budget)
        # Drafted nodes that made it into the output (the bonus token is not a node).
        path = path[: 1 + min(len(new_tokens), len(path) - 1)]
        self._compact(path, len(tree))
        return VerifyOutcome(logits=logits, predictions=predictions, accepted_nodes=path, new_tokens=new_tokens)

    def _compact(self, path: list[int], n_nodes: int) -> None:
        """Keep the KV rows of the prefix, the root and the accepted path; drop the rest."""
        p = self.prefix_len
        keep = len(path)
        contiguous = path[-1] == keep - 1  # path is 0, 1, ..., keep-1 (chains, AR, spine prefixes)
        if not contiguous:
            src = torch.tensor(path, dtype=torch.long, device=self.device) + p
        for layer in self.cache.layers:
            if not contiguous:
                layer.keys[..., p : p + keep, :] = layer.keys[..., src, :]
                layer.values[..., p : p + keep, :] = layer.values[..., src, :]
            layer.keys = layer.keys[..., : p + keep, :]
            layer.values = layer.values[..., : p + keep, :]
        self.prefix_len = p + keep

    @torch.inference_mode()
    def next_token_margin(self, token_ids: Sequence[int]) -> tuple[int, int, float, float]:
        """Teacher-forced check: forward `token_ids` in one pass (no cache) and return the top-2
        token ids, their logit margin and the top logit at the last position (used to classify a
        lossless mismatch as a near-tie)."""
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self.device)
        logits = self.model(input_ids=ids, use_cache=False).logits[0, -1].float()
        top = torch.topk(logits, 2)
        return int(top.indices[0]), int(top.indices[1]), float(top.values[0] - top.values[1]), float(top.values[0])
