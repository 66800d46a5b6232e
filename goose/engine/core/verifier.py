"""The shared verification engine: prefill, one-forward tree verification, greedy walk, KV compaction (Goose
§4.2, docs/paper.md). Every method goes through `VerificationEngine.verify`, so all are timed by the same
code. Sliding-window layers get a mask that also hides keys beyond the window, so results equal sequential
decoding. One host sync per step: node argmaxes, the on-device acceptance test and a finiteness flag come
back in one `.tolist()`. At T > 0 see goose.engine.core.sampling.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from itertools import compress
from typing import Any

import torch

from goose.engine.core.backend import ForwardBackend, LeanForward, StaticSteps, has_forward_hooks
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.kv_cache import TreeKVCache
from goose.engine.core.masks import MaskSpec, ar_mask, prefill_mask, tree_mask
from goose.engine.core.sampling import GREEDY, SamplingParams, TargetNoise, sample_and_match, warp_scores
from goose.engine.core.tree import DraftTree, TreeInputs, tree_attention_inputs
from goose.engine.core.verify.step import match_samples, walk_proposals
from goose.engine.core.walk import commit_path, fast_argmax, greedy_rows, greedy_walk

# Rows reserved beyond prompt + max_new_tokens for the tree of the last step (grown if needed).
TREE_SLACK = 128


class ContextLengthError(ValueError):
    """Raised when a prompt or a draft tree would exceed the model's context window."""


class NonFiniteLogitsError(RuntimeError):
    """Raised when a forward produced NaN or infinite logits; the runner records the prompt as failed."""


def sync_clock(device: torch.device | str) -> float:
    """time.perf_counter() after the device's queued work is done (CUDA: synchronise first)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class VerificationEngine:
    """Owns the target's KV cache for one sequence (batch size 1); P = cached prefix, anchor = node 0."""

    def __init__(
        self,
        model: torch.nn.Module,
        eos_token_ids: Sequence[int],
        context_length: int | None = None,
        backend: ForwardBackend | None = None,
    ):
        """backend: the forward every step runs through (goose.engine.core.backend); None: the model's own.
        goose.engine.forward.choose.verification_engine picks one from the config's settings.
        """
        self.model = model
        self.eos_token_ids = tuple(eos_token_ids)
        cfg = model.config
        text_cfg = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
        self.context_length = context_length or getattr(cfg, "max_position_embeddings", None) or 1 << 30
        first = next(model.parameters())
        embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        # With a device_map the inputs go where the embeddings are (accelerate's hooks move them on).
        self.device = embeddings.weight.device if embeddings is not None else first.device
        self.dtype = first.dtype
        self.num_layers = int(text_cfg.num_hidden_layers)
        layer_types = getattr(text_cfg, "layer_types", None)
        self.layer_types: tuple[str, ...] = tuple(sorted(set(layer_types))) if layer_types else ()
        self.sliding_window: int | None = getattr(text_cfg, "sliding_window", None)
        self.mask_spec = MaskSpec(self.dtype, self.device, self.layer_types, self.sliding_window)
        self.cache: TreeKVCache | None = None
        # The keyword the model's forward takes its KV cache by: transformers renamed past_key_values
        # to cache (the old name warns, then goes); older releases know only the old one.
        self._cache_kwarg = (
            "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        )
        self.prefix_len = 0
        self.steps = 0
        self.first_token: int | None = None
        self.last_forward_s = 0.0
        self.sampling: SamplingParams = GREEDY
        # K > 0: greedy steps also return every node's top-K logits (VerifyOutcome.top), the argmax read off
        # them (`argmax_of_top`); the decode loop sets it to the drafter's `logits_topk` per sequence.
        self.topk_width = 0
        self.noise: TargetNoise | None = None
        self._positions = torch.zeros(1, 0, dtype=torch.long, device=self.device)
        self._logits_to_keep = "logits_to_keep" in inspect.signature(model.forward).parameters
        self.lean: LeanForward | None = None
        self._lean_forward: Callable[..., torch.Tensor] | None = None  # the steps' forward: lean or compiled
        self.compiled = False
        self.static: StaticSteps | None = None
        if backend is not None:
            self.lean = backend.lean
            self.compiled = backend.compiled is not None
            self._lean_forward = backend.lean if backend.compiled is None else backend.compiled
            if backend.static_steps is not None:
                self.static = backend.static_steps(self)

    @property
    def forward_name(self) -> str:
        """Which forward runs, recorded in every row (`transformers`, `lean`, `+prepack`, `+compile`,
        `+graphs`).
        """
        if self.lean is None or has_forward_hooks(self.model):
            return "transformers"
        name = "lean+prepack" if self.lean.prepacked else "lean"
        if self.static is not None:
            return name + ("+graphs" if self.static.capture else "+static")
        return name + "+compile" if self.compiled else name

    def reserve(self, rows: int) -> None:
        """Room for `rows` cache rows and position ids 0..rows-1 on the device (after a prefill)."""
        assert self.cache is not None
        self.cache.reserve(rows)
        if self._positions.shape[1] < self.cache.capacity:
            self._positions = torch.arange(self.cache.capacity, device=self.device)[None]

    def _tree_mask(
        self, anc: torch.Tensor, positions: torch.Tensor, max_depth: int
    ) -> torch.Tensor | dict[str, torch.Tensor]:
        """Additive [1, 1, n, P + n] mask(s) of a tree step (goose.engine.core.masks.tree_mask)."""
        return tree_mask(anc, positions, self._positions[0, : self.prefix_len], max_depth, self.mask_spec)

    def _ar_mask(self) -> dict[str, torch.Tensor | None] | None:
        return ar_mask(self.prefix_len, self.mask_spec)

    def _prefill_mask(self, n: int) -> dict[str, torch.Tensor] | None:
        return prefill_mask(self._positions[0, :n], self.mask_spec)

    def _forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask,
        last_only: bool = False,
        eager: bool = False,
    ) -> torch.Tensor:
        """Logits [n, V] (or the last row) of one forward over the cache; eager: uncompiled (the prefill)."""
        if self.lean is not None and not has_forward_hooks(self.model):
            forward = self.lean if eager else self._lean_forward
            return forward(input_ids, position_ids, mask, self.cache, last_only)
        kwargs = {"logits_to_keep": 1} if last_only and self._logits_to_keep else {}
        out = self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=mask,
            use_cache=True,
            **{self._cache_kwarg: self.cache},
            **kwargs,
        )
        logits = out.logits[0, -1:] if last_only else out.logits[0]
        # A device_map model returns logits on the LM head's device; the tree tensors live on the embeddings'.
        return logits.to(self.device)

    def _non_finite(self, where: str, nodes: list[int]) -> NonFiniteLogitsError:
        if self.static is not None:  # its spans read rows past the prefix: no NaN may stay there
            self.static.scrub()
        return NonFiniteLogitsError(
            f"non-finite logits (NaN or inf) at {where} (prefix length {self.prefix_len}, node(s) "
            f"{nodes[:8]}); the model overflowed in {str(self.dtype).replace('torch.', '')} or its "
            "weights are broken"
        )

    @torch.inference_mode()
    def prefill(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int | None = None,
        all_logits: bool = True,
        sampling: SamplingParams | None = None,
        seed: int = 0,
    ) -> torch.Tensor:
        """Start a new sequence in the reused cache; logits [P, V], or the last row unless `all_logits`. Sets
        `first_token` and raises NonFiniteLogitsError on a non-finite row.
        """
        n = len(prompt_ids)
        if n == 0:
            raise ValueError("empty prompt: the prefill needs at least one token")
        if n > self.context_length:
            raise ContextLengthError(
                f"prompt has {n} tokens; the model's context window is {self.context_length}"
            )
        planned = n + (256 if max_new_tokens is None else max_new_tokens)
        rows = min(planned, self.context_length) + TREE_SLACK
        if self.static is not None:  # room for the largest padded tree, and MIN_ROWS: no recapture
            rows += self.static.largest
            rows = max(
                rows, min(self.static.min_rows, self.context_length + TREE_SLACK + self.static.largest)
            )
        if self.cache is None:
            self.cache = TreeKVCache(self.num_layers, capacity=rows)
        self.cache.reset()
        self.prefix_len = 0
        self.steps = 0
        self.first_token = None
        self.sampling = sampling or GREEDY
        self.reserve(rows)
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=self.device)
        logits = self._forward(
            ids, self._positions[:, :n], self._prefill_mask(n), last_only=not all_logits, eager=True
        )
        last = logits[-1:]
        pred = fast_argmax(last)
        finite = torch.isfinite(last.gather(-1, pred[:, None])[:, 0])
        if not self.sampling.greedy:
            self.noise = TargetNoise(seed, last.shape[-1], self.device)
            pred = sample_and_match(warp_scores(last, self.sampling), self.noise.rows(n, 1))[1]
        else:
            self.noise = None
        (first, finite) = torch.stack([pred, finite.long()])[:, 0].tolist()
        if not finite:
            raise self._non_finite("the prefill (step 0)", [n - 1])
        self.prefix_len = n
        self.first_token = first
        return logits

    @torch.inference_mode()
    def verify(self, tree: DraftTree, budget: int) -> VerifyOutcome:
        """Verify `tree` in one forward pass and commit the accepted path; `budget` = tokens still wanted. The
        cache then holds prefix + root + accepted path; the bonus token is the next anchor.
        """
        t0 = time.perf_counter()
        if self.cache is None:
            raise RuntimeError("verify() before prefill()")
        p = self.prefix_len
        n = len(tree)
        max_depth = max(tree.depths)
        if p + max_depth >= self.context_length:
            raise ContextLengthError(
                f"draft tree reaches position {p + max_depth}; the context window is {self.context_length}"
            )
        self.reserve(p + n)
        self.steps += 1
        if not self.sampling.greedy:
            return self._verify_sampled(tree, budget, t0)
        logits, inputs = self._tree_forward(tree, max_depth)
        rows, top = greedy_rows(logits, inputs, self.topk_width)  # the one host sync of the step
        t1 = time.perf_counter()
        predictions: list[int] = rows[0]
        self._raise_if_non_finite(rows[1])
        if top is not None and any(rows[-1]):  # a row whose top-K is all tied: argmax the logits
            predictions = fast_argmax(logits).tolist()
            path = greedy_walk(tree, predictions)
        elif n == 1:
            path = [0]
        else:
            path = list(compress(range(tree.acceptable), rows[2]))
            if tree.depths[path[-1]] != len(path) - 1:  # not a chain: duplicate tokens under a parent
                path = greedy_walk(tree, predictions)
        outcome = self._commit(tree, path, predictions[path[-1]], budget, logits, predictions, t1 - t0)
        outcome.top = top
        return outcome

    def _tree_forward(self, tree: DraftTree, max_depth: int) -> tuple[torch.Tensor, TreeInputs | None]:
        """Logits [n, V] of the verification forward and the tree's device inputs (None for AR)."""
        static = self.static
        if static is not None and len(tree) <= static.largest and not has_forward_hooks(self.model):
            if len(tree) == 1:
                return static.forward_one(tree.tokens[0]), None
            inputs = tree_attention_inputs(tree, self.prefix_len, self.device)
            return static.forward_tree(inputs), inputs
        ids, positions, mask, inputs = self._step_inputs(tree, max_depth)
        return self._forward(ids, positions, mask), inputs

    def _step_inputs(
        self, tree: DraftTree, max_depth: int
    ) -> tuple[torch.Tensor, torch.Tensor, Any, TreeInputs | None]:
        """The verification forward's input ids [1, n], position ids [1, n] and mask(s) for `tree`
        after the cached prefix, and the tree's device inputs (None for a one-node tree)."""
        p = self.prefix_len
        if len(tree) == 1:
            ids = torch.tensor([[tree.tokens[0]]], dtype=torch.long, device=self.device)
            return ids, self._positions[:, p : p + 1], self._ar_mask(), None
        inputs = tree_attention_inputs(tree, p, self.device)
        mask = self._tree_mask(inputs.ancestors, inputs.positions, max_depth)
        return inputs.tokens[None], inputs.positions[None], mask, inputs

    @torch.inference_mode()
    def capture_graphs(self) -> None:
        """With `cuda_graphs`: capture every replayable graph now, outside any timing."""
        if self.static is not None:
            self.static.capture_all()

    @torch.inference_mode()
    def replayable_forward(self, tree: DraftTree) -> Callable[[], torch.Tensor]:
        """`verify`'s forward over `tree` as a function that commits nothing, for a CUDA graph to capture."""
        if self.cache is None:
            raise RuntimeError("replayable_forward() before prefill()")
        p = self.prefix_len
        self.reserve(p + len(tree))
        ids, positions, mask, _ = self._step_inputs(tree, max(tree.depths))

        def forward() -> torch.Tensor:
            with torch.inference_mode():
                logits = self._forward(ids, positions, mask)
            self.truncate(p)
            return logits

        return forward

    def _commit(
        self,
        tree: DraftTree,
        path: list[int],
        bonus: int,
        budget: int,
        logits: torch.Tensor,
        predictions: list[int],
        forward_s: float,
    ) -> VerifyOutcome:
        """Commit the accepted `path` plus the `bonus` token (cut at EOS and the budget) and
        compact the cache to prefix + root + the kept path."""
        p = self.prefix_len
        path, new_tokens = commit_path(tree, path, bonus, self.eos_token_ids, budget)
        keep = len(path)
        src = None if path[-1] == keep - 1 else torch.tensor(path, dtype=torch.long, device=self.device) + p
        self.cache.compact(p, src, keep)
        self.prefix_len = p + keep
        self.last_forward_s = forward_s
        return VerifyOutcome(
            logits=logits, predictions=predictions, accepted_nodes=path, new_tokens=new_tokens
        )

    def _verify_sampled(self, tree: DraftTree, budget: int, t0: float) -> VerifyOutcome:
        """`verify` at T > 0: sample-and-match, or for trees with proposals the walk of `sampling.verifier`."""
        assert self.noise is not None
        p = self.prefix_len
        max_depth = max(tree.depths)
        noise_rows = self.noise.rows(p + 1, max_depth + 1)
        logits, inputs = self._tree_forward(tree, max_depth)
        noise = noise_rows[:1] if inputs is None else noise_rows[inputs.positions - p]
        scores = warp_scores(logits, self.sampling)
        pred = fast_argmax(logits)
        finite = torch.isfinite(logits.gather(-1, pred[:, None])[:, 0])
        if tree.proposals is not None:
            walked = walk_proposals(
                tree, scores, noise, pred, finite, self.noise, p + 1, self.sampling.verifier
            )
        else:
            walked = match_samples(tree, scores, noise, pred, finite, inputs)
        predictions, flags, path, bonus, t1, view = walked
        self._raise_if_non_finite(flags)
        outcome = self._commit(tree, path, bonus, budget, logits, predictions, t1 - t0)
        outcome.view = view
        return outcome

    def _raise_if_non_finite(self, flags: Sequence[float]) -> None:
        if 0 in flags:
            raise self._non_finite(
                f"verification step {self.steps}", [i for i, ok in enumerate(flags) if not ok]
            )

    def score(self, tree: DraftTree) -> VerifyOutcome:
        """Verify `tree` and roll back: the target's verdict on a draft that is not the step's (a selector's
        training data, experiments.selector_data); cache, step count and last forward time as before."""
        p, steps, last = self.prefix_len, self.steps, self.last_forward_s
        outcome = self.verify(tree, budget=1 << 30)
        self.truncate(p)
        self.steps, self.last_forward_s = steps, last
        return outcome

    def truncate(self, prefix_len: int) -> None:
        """Roll the sequence back to its first `prefix_len` cached tokens (used by calibration)."""
        if self.cache is None or not 0 <= prefix_len <= self.prefix_len:
            raise ValueError(f"cannot truncate a prefix of {self.prefix_len} tokens to {prefix_len}")
        self.cache.compact(prefix_len, None, 0)
        self.prefix_len = prefix_len

    @torch.inference_mode()
    def next_token_margin(
        self, token_ids: Sequence[int], sampling: SamplingParams | None = None, seed: int = 0
    ) -> tuple[int, int, float, float]:
        """Teacher-forced top-2 ids, margin and top logit at the end of `token_ids`, to classify a mismatch as
        a near-tie.
        """
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self.device)
        logits = self.model(input_ids=ids, use_cache=False).logits[0, -1].float().to(self.device)
        scores = logits
        if sampling is not None and not sampling.greedy:
            noise = TargetNoise(seed, logits.shape[-1], self.device).row(len(token_ids))
            scores = warp_scores(logits[None], sampling)[0] + noise
        top = torch.topk(scores, 2)
        return (
            int(top.indices[0]),
            int(top.indices[1]),
            float(top.values[0] - top.values[1]),
            float(logits.max()),
        )
