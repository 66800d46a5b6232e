"""One verification forward for a batch of requests (Goose §4.2 per request, docs/batching.md): each active
request brings its own tree (ragged: any size and depth), the trees are padded to the largest, every slot
attends to its own cached rows and its tree's ancestors, and each request's walk and KV compaction is its own.
A request's prefill runs alone through the batch-1 engine (the same forward as a batch-1 run) and its rows
are copied into its slot. Greedy and sampled (every verifier of goose.engine.core.verify), as batch 1.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from goose.engine.batch.cache import BatchKVCache
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.sampling import GREEDY, SamplingParams, TargetNoise, warp_scores
from goose.engine.core.tree import DraftTree, TreeInputs, tree_attention_inputs
from goose.engine.core.verifier import (
    ContextLengthError,
    NonFiniteLogitsError,
    VerificationEngine,
)
from goose.engine.core.verify.step import match_samples, walk_proposals
from goose.engine.core.walk import commit_path, fast_argmax, greedy_walk


def batch_unsupported(engine: VerificationEngine) -> str | None:
    """Why `engine`'s model cannot be verified in batches (None if it can)."""
    if engine.lean is None or not hasattr(engine.lean, "forward_batch"):
        return f"the batched engine needs a lean forward with batches (this model runs {engine.forward_name})"
    if engine.layer_types and engine.sliding_window is not None:
        return "sliding-window layers are not batched yet"
    if engine.static is not None or engine.compiled:
        return "the batched engine runs eagerly (turn off cuda_graphs and compile_forward)"
    return None


@dataclass
class _Slot:
    """What the engine keeps of one active request."""

    sampling: SamplingParams
    noise: TargetNoise | None


class BatchEngine:
    """Verifies the trees of up to `slots` requests in one forward over a `BatchKVCache`.

    Requests occupy slots [0, active): `admit` appends one, `release(b)` moves the last one into slot b.
    """

    def __init__(self, single: VerificationEngine, slots: int) -> None:
        why = batch_unsupported(single)
        if why:
            raise ValueError(f"concurrency > 1: {why}")
        self.single = single
        self.device = single.device
        self.eos_token_ids = single.eos_token_ids
        self.context_length = single.context_length
        first = single.lean.layers[0]
        self.cache = BatchKVCache(
            single.num_layers, slots, first.kv_heads, first.head_dim, single.dtype, single.device
        )
        self._slots: list[_Slot] = []
        self.last_forward_s = 0.0
        self.forward_name = single.forward_name

    @property
    def active(self) -> int:
        return len(self._slots)

    def prefix_len(self, slot: int) -> int:
        """P_b: the tokens cached for the request in `slot` (its anchor's position)."""
        return self.cache.lengths[slot]

    @torch.inference_mode()
    def admit(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        all_logits: bool,
        sampling: SamplingParams | None = None,
        seed: int = 0,
    ) -> tuple[int, torch.Tensor, int]:
        """Prefill a new request alone and give it the next slot: (slot, prefill logits, first token)."""
        if self.active == self.cache.slots:
            raise RuntimeError(f"all {self.cache.slots} slots are busy")
        single = self.single
        logits = single.prefill(prompt_ids, max_new_tokens, all_logits, sampling, seed)
        slot = self.active
        p = single.prefix_len
        self.cache.write_prefix(slot, single.cache.storage[:, :, 0, :, :p])
        self._slots.append(_Slot(sampling or GREEDY, single.noise))
        self.cache.set_active(self.active)
        return slot, logits, single.first_token

    def release(self, slot: int) -> None:
        """The request in `slot` is done; the last active request moves into `slot`."""
        last = self.active - 1
        self.cache.move(last, slot)
        self._slots[slot] = self._slots[last]
        self._slots.pop()
        self.cache.set_active(self.active)

    def _inputs(self, trees: Sequence[DraftTree], w: int) -> tuple[torch.Tensor, ...]:
        """Padded input ids and positions [k, n_max], the additive mask [k, 1, n_max, W + n_max] and each
        tree's `TreeInputs`: slot b sees its rows [0, P_b) and its tree's ancestors at [W, W + n_b); a pad
        query sees row 0 only."""
        k, n_max = len(trees), max(len(t) for t in trees)
        neg = torch.finfo(self.single.dtype).min
        ids = torch.zeros((k, n_max), dtype=torch.long, device=self.device)
        positions = torch.zeros((k, n_max), dtype=torch.long, device=self.device)
        mask = torch.full((k, 1, n_max, w + n_max), neg, dtype=self.single.dtype, device=self.device)
        per_tree = []
        for b, tree in enumerate(trees):
            p, n = self.cache.lengths[b], len(tree)
            inputs = tree_attention_inputs(tree, p, self.device)
            ids[b, :n] = inputs.tokens
            positions[b, :n] = inputs.positions
            positions[b, n:] = p
            mask[b, 0, :n, :p] = 0
            mask[b, 0, :n, w : w + n].masked_fill_(inputs.ancestors, 0)
            mask[b, 0, n:, 0] = 0
            per_tree.append(inputs)
        return ids, positions, mask, per_tree

    @torch.inference_mode()
    def verify(self, trees: Sequence[DraftTree], budgets: Sequence[int]) -> list[VerifyOutcome]:
        """Verify `trees[b]` of every active slot b in one forward and commit each accepted path;
        `budgets[b]` = tokens still wanted by that request."""
        if len(trees) != self.active or len(budgets) != self.active:
            raise ValueError(
                f"{self.active} active requests, got {len(trees)} trees and {len(budgets)} budgets"
            )
        t0 = time.perf_counter()
        for b, tree in enumerate(trees):
            reach = self.cache.lengths[b] + max(tree.depths)
            if reach >= self.context_length:
                raise ContextLengthError(
                    f"request in slot {b}: draft tree reaches position {reach}; the context window is "
                    f"{self.context_length}"
                )
        w = self.cache.begin_step(max(len(t) for t in trees))
        ids, positions, mask, per_tree = self._inputs(trees, w)
        logits = self.single.lean.forward_batch(ids, positions, mask, self.cache)
        pred = fast_argmax(logits)
        finite = torch.isfinite(logits.gather(-1, pred[..., None])[..., 0])
        outcomes = []
        if all(s.sampling.greedy for s in self._slots):
            rows = torch.stack([pred, finite.long()]).tolist()  # the one host sync of the step
            self.last_forward_s = time.perf_counter() - t0
            for b, tree in enumerate(trees):
                n = len(tree)
                self._check_finite(b, rows[1][b][:n])
                predictions = rows[0][b][:n]
                path = greedy_walk(tree, predictions)
                outcomes.append(
                    self._commit(
                        b, tree, path, predictions[path[-1]], budgets[b], logits[b, :n], predictions, w
                    )
                )
        else:
            for b, tree in enumerate(trees):  # a host sync per request
                n = len(tree)
                walked = self._walk_sampled(b, tree, logits[b, :n], pred[b, :n], finite[b, :n], per_tree[b])
                predictions, flags, path, bonus, synced, view = walked
                if b == 0:
                    self.last_forward_s = synced - t0
                self._check_finite(b, flags)
                outcome = self._commit(b, tree, path, bonus, budgets[b], logits[b, :n], predictions, w)
                outcome.view = view
                outcomes.append(outcome)
        self.cache.end_step()
        return outcomes

    def _walk_sampled(
        self,
        b: int,
        tree: DraftTree,
        logits: torch.Tensor,
        pred: torch.Tensor,
        finite: torch.Tensor,
        inputs: TreeInputs,
    ) -> tuple:
        """Slot b's sampled walk, exactly as the batch-1 engine's (goose.engine.core.verify.step)."""
        slot = self._slots[b]
        p = self.cache.lengths[b]
        noise_rows = slot.noise.rows(p + 1, max(tree.depths) + 1)
        noise = noise_rows[inputs.positions - p]
        scores = warp_scores(logits, slot.sampling)
        if tree.proposals is not None:
            return walk_proposals(
                tree, scores, noise, pred, finite, slot.noise, p + 1, slot.sampling.verifier
            )
        return match_samples(tree, scores, noise, pred, finite, inputs if len(tree) > 1 else None)

    def _check_finite(self, slot: int, flags: Sequence[float]) -> None:
        if 0 in flags:
            raise NonFiniteLogitsError(
                f"non-finite logits (NaN or inf) in the request of slot {slot}, node(s) "
                f"{[i for i, ok in enumerate(flags) if not ok][:8]}"
            )

    def _commit(
        self,
        b: int,
        tree: DraftTree,
        path: list[int],
        bonus: int,
        budget: int,
        logits: torch.Tensor,
        predictions: list[int],
        w: int,
    ) -> VerifyOutcome:
        """Slot b commits its accepted `path` plus `bonus` (cut at EOS and its budget); its kept rows move
        from the tree's rows [W, W + n) to its own [P_b, P_b + keep)."""
        path, new_tokens = commit_path(tree, path, bonus, self.eos_token_ids, budget)
        self.cache.keep_path(b, [w + i for i in path], len(path))
        return VerifyOutcome(
            logits=logits, predictions=predictions, accepted_nodes=path, new_tokens=new_tokens
        )
