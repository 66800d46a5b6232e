"""SuffixDecoding (Oliaro et al., arXiv 2411.04975) on the shared engine: greedy, lossless.

A per-prompt suffix tree over prompt + output (goose/sources/suffix_tree.py) drafts, for each match length,
up to MAX_SPEC tokens; the best-scoring draft is verified as a tree (`mode: tree`, the paper's) or a chain
(the reference's and vLLM's default). `global_cache: true` adds the reference's run-long tree over earlier
outputs (its own setting, `method=suffix_global`, since it carries state across prompts). Drafts are SPINE,
comparable with PLD's and Goose's p_s; our choices where paper and reference differ are listed on
`SuffixConfig` (reference code: snowflakedb/ArcticInference, csrc/suffix_decoding/suffix_tree.cc and
arctic_inference/suffix_decoding/cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import ROOT, SPINE, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.suffix_tree import SuffixDraft, SuffixTree
from goose.validation import check_bool, check_choice, check_float, check_int, check_str

LOCAL_SEQ = 0  # the local tree holds one sequence: prompt + output


@dataclass(frozen=True)
class SuffixConfig(DrafterConfig):
    """SuffixDecoding's hyperparameters: the reference's defaults except `mode` (the paper's tree) and
    `global_cache` (off: the harness's rule, BEYOND.md "Fairness"). `max_spec_tokens` null is resolved to
    `max_depth` on creation, as the reference's speculate does."""

    owner = "SuffixDecodingDrafter"
    # paper: a speculation tree (greedy expansion by D(N), SCORE = sum of D(N)); the reference code's
    # default (use_tree_spec=False) and vLLM's: chain
    mode: str = "tree"
    max_depth: int = 64  # SuffixDecodingCache(max_tree_depth=64), suffix_cache_max_depth (vLLM: 24)
    # null = max_depth: SuffixDecodingCache.speculate's default (vLLM: num_speculative_tokens, else its depth)
    max_spec_tokens: int | None = None
    max_spec_factor: float = 1.0  # α in MAX_SPEC = α·p, p the match length (paper); reference default 1.0
    max_spec_offset: float = 0.0  # added to α·p (reference suffix_max_spec_offset 0.0; not in the paper)
    min_token_prob: float = 0.1  # drafted tokens' path probability >= this (reference suffix_min_token_prob)
    # local only (BEYOND.md "Fairness"); the reference enables its global tree (max_cached_requests=-1)
    global_cache: bool = False

    def _validate(self) -> None:
        owner = self.owner_name()
        check_choice(f"{owner}.mode", self.mode, ("tree", "chain"))
        check_int(
            f"{owner}.max_depth", self.max_depth, low=2, why="a match of >= 1 token plus >= 1 drafted token"
        )
        if self.max_spec_tokens is None:
            object.__setattr__(self, "max_spec_tokens", self.max_depth)
        else:
            check_int(f"{owner}.max_spec_tokens", self.max_spec_tokens, low=1, why="null = max_depth")
        factor = check_float(
            f"{owner}.max_spec_factor", self.max_spec_factor, low=0.0, why="α, tokens per matched token"
        )
        offset = check_float(f"{owner}.max_spec_offset", self.max_spec_offset)
        prob = check_float(f"{owner}.min_token_prob", self.min_token_prob, 0.0, 1.0, why="a probability")
        check_bool(f"{owner}.global_cache", self.global_cache)
        object.__setattr__(self, "max_spec_factor", float(factor))
        object.__setattr__(self, "max_spec_offset", float(offset))
        object.__setattr__(self, "min_token_prob", float(prob))


class SuffixDecodingDrafter(Drafter):
    """SuffixDecoding: suffix-tree drafts scored by empirical continuation probability. `mode` tree or chain;
    `max_depth` (also the pattern length); MAX_SPEC's `max_spec_tokens`, `max_spec_factor` α and
    `max_spec_offset`; `min_token_prob`; `global_cache` (keyword arguments: `SuffixConfig`'s fields).
    stats: suffix_drafts, suffix_global_drafts, suffix_match_len, suffix_score.
    """

    config_class = SuffixConfig
    name = "suffix"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=check_str("SuffixDecodingDrafter.name", self.name if name is None else name))
        self.cfg = SuffixConfig(**hyperparameters)
        self.mode = self.cfg.mode
        self.max_depth = self.cfg.max_depth
        self.max_spec_tokens: int = self.cfg.max_spec_tokens  # type: ignore[assignment]
        self.max_spec_factor = self.cfg.max_spec_factor
        self.max_spec_offset = self.cfg.max_spec_offset
        self.min_token_prob = self.cfg.min_token_prob
        self.global_cache = self.cfg.global_cache
        self.local: SuffixTree | None = None
        self.global_tree: SuffixTree | None = SuffixTree(self.max_depth) if self.global_cache else None
        self._seq_id = -1  # the current prompt's sequence in the global tree
        self._next_seq = [0]  # the next prompt's sequence id (one list for every drafter sharing the tree)
        self._synced = 0  # committed tokens already in the trees

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        return self.global_cache

    def run_state(self) -> Any:
        """The global tree's sequences in order; replaying them rebuilds the same tree."""
        if self.global_tree is None:
            return None
        tree = self.global_tree
        return {"responses": [tree.sequence(i) for i in tree.sequence_ids()], "next_seq": self._next_seq[0]}

    def restore_run_state(self, state: Any) -> None:
        if not self.global_cache or state is None:
            return
        tree = SuffixTree(self.max_depth)
        for seq_id, response in enumerate(state["responses"]):
            tree.extend(seq_id, response)
        self.global_tree = tree
        self._seq_id = max(state["next_seq"], len(state["responses"])) - 1
        self._next_seq = [self._seq_id + 1]

    shares_run_state = True

    def share_run_state(self, source: Any) -> None:
        """With `global_cache`: the same global tree as `source`'s, and its sequence numbering, so that every
        request of a batch (batch_state "shared") drafts from every other's responses as they are written."""
        if self.global_cache:
            if not isinstance(source, SuffixDecodingDrafter) or source.max_depth != self.max_depth:
                raise ValueError(
                    f"batch_state=shared: {self.name} shares its global tree only with its own kind"
                )
            self.global_tree, self._next_seq = source.global_tree, source._next_seq

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self.stats = {
            "suffix_drafts": 0,
            "suffix_global_drafts": 0,
            "suffix_match_len": 0,
            "suffix_score": 0.0,
        }
        self.local = SuffixTree(self.max_depth)
        self.local.extend(LOCAL_SEQ, prompt_ids)
        self._synced = len(prompt_ids)
        self._seq_id = self._next_seq[0]
        self._next_seq[0] += 1

    def _commit(self, tokens: list[int]) -> None:
        self.local.extend(LOCAL_SEQ, tokens)  # type: ignore[union-attr]
        if self.global_tree is not None:
            self.global_tree.extend(self._seq_id, tokens)
        self._synced += len(tokens)

    def speculate(self, committed: list[int]) -> tuple[SuffixDraft, bool]:
        """(the winning draft, whether it came from the global tree) after syncing the trees."""
        if self.local is None:
            raise RuntimeError("SuffixDecodingDrafter.begin() must be called before propose()")
        if len(committed) < self._synced:
            raise ValueError(
                f"committed has {len(committed)} tokens but the suffix tree already holds {self._synced}; "
                "call begin() for a new prompt"
            )
        # new tokens here: the prefill's token (first step), or a caller that skipped observe()
        if len(committed) > self._synced:
            self._commit([int(t) for t in committed[self._synced :]])
        knobs = (self.max_spec_tokens, self.max_spec_factor, self.max_spec_offset, self.min_token_prob)
        tree_mode = self.mode == "tree"
        draft = self.local.speculate_tail(LOCAL_SEQ, *knobs, tree=tree_mode)
        if self.global_tree is not None:
            pattern = committed[-self.max_depth :]
            other = self.global_tree.speculate(pattern, *knobs, tree=tree_mode)
            if other.score > draft.score:  # the reference's rule: the local draft wins ties
                return other, True
        return draft, False

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        draft, from_global = self.speculate(committed)
        if not draft.tokens:
            self.route = "ar"
            return DraftTree.single(anchor)
        self.route = self.mode
        self.count("suffix_drafts")
        self.count("suffix_global_drafts", int(from_global))
        self.count("suffix_match_len", draft.match_len)
        self.stats["suffix_score"] += draft.score
        n = len(draft.tokens)
        return DraftTree(
            [anchor, *draft.tokens],
            [-1, *(p + 1 for p in draft.parents)],
            [ROOT, *([SPINE] * n)],
        )

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: its committed tokens go into the trees, as after a drafted one (after any
        the trees have not seen yet: the prefill's token when the first step is skipped); no logits are read."""
        if len(committed) > self._synced:
            self._commit([int(t) for t in committed[self._synced :]])
        self._commit([int(t) for t in outcome.new_tokens])

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """The step's committed tokens go into the trees now (so the global tree holds the whole
        output when the prompt ends)."""
        self._commit([int(t) for t in outcome.new_tokens])
