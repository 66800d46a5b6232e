"""SuffixDecoding (Oliaro et al., "SuffixDecoding: Extreme Speculative Decoding for Emerging AI
Applications", arXiv 2411.04975) on the shared engine: greedy, lossless.

Per prompt, a depth-limited suffix tree over prompt + committed tokens (the reference's per-request
"local" tree; goose/sources/suffix_tree.py), updated incrementally as tokens are committed. Each
step the pattern is the last `max_depth` committed tokens (the anchor last); for every match length
m the tree drafts up to MAX_SPEC = min(max_spec_tokens, floor(m * max_spec_factor +
max_spec_offset)) tokens by empirical continuation probability, and the draft with the largest
score (sum of its nodes' path probabilities) is verified: as a tree (`mode: tree`, best-first
expansion, the paper's speculation tree) or as one chain (`mode: chain`, the most probable path:
the reference code's default, and the only mode vLLM uses).

`global_cache: true` adds the reference's second, run-long tree over the outputs of the run's
prompts (every earlier output, plus the current one as it grows, each its own sequence, as
ArcticInference's `SuffixDecodingCache.add_active_response` feeds it); each step both trees are
queried and the global draft replaces the local one only when it scores strictly higher (the
reference's rule). It carries information across prompts, so it is reported as its own setting
(`method=suffix_global`, conf/method/suffix_global.yaml), and the drafter declares it as state
carried across prompts (`carries_run_state`), so that a resumed cell restores it.

Drafted tokens are labelled SPINE: like PLD's chain they are copies of earlier text matched on the
context (the harness's "context-matched" source), so p_s of a suffix run is comparable with PLD's
and Goose's spine. The tree lists its nodes best first (probabilities non-increasing, parents
before children), so budget=auto's prefix cut (goose/engine/budget/auto_budget.py) drops the least
probable nodes first.

Where the paper and the reference are silent or differ, our choices (all in conf/method/suffix.yaml):
- mode: tree, the paper's method (its SCORE = sum of D(N) is defined over a speculation tree); the
  reference code's `speculate(use_tree_spec=False)` and vLLM draft a chain (`mode: chain`).
- max_spec_tokens: null = max_depth, the reference cache's default (vLLM: num_speculative_tokens,
  which falls back to its tree depth). With max_spec_factor = 1 it never binds: a match of length
  m drafts at most m nodes and at most max_depth - m levels.
- global_cache: false. The reference enables its global tree by default; the harness's rule
  (every method sees only the current prompt and its own output) makes local-only the main setting.
- Ties: deterministic (suffix_tree.py), where the reference follows hash-map and heap order.
- No FIFO eviction of the global tree (the reference's max_cached_requests; unlimited is its
  class default, 10,000 in vLLM): no run here is long enough to reach it.
- Cost: begin() inserts the prompt into a fresh local tree (O(len(prompt) * max_depth)) inside the
  prompt's timed region, as a serving system does at request start; a step then costs O(max_depth)
  per committed token plus the speculation.
"""

from __future__ import annotations

from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import ROOT, SPINE, DraftTree
from goose.sources.suffix_tree import SuffixDraft, SuffixTree
from goose.validation import check_bool, check_choice, check_float, check_int, check_str

LOCAL_SEQ = 0  # the local tree holds one sequence: prompt + output


class SuffixDecodingDrafter(Drafter):
    """SuffixDecoding: suffix-tree drafts scored by empirical continuation probability.

    mode             tree (best-first expansion) or chain (the most probable path)
    max_depth        longest suffix kept in the trees (tokens); also the pattern length
    max_spec_tokens  cap on drafted tokens per step (None = max_depth)
    max_spec_factor  α: a match of length m drafts at most floor(α m + offset) tokens
    max_spec_offset  the offset in that bound (negative values speculate less)
    min_token_prob   drafted tokens' path probability must be at least this
    global_cache     also query a run-long tree over the outputs of the run's prompts

    stats: suffix_drafts (steps that verified a draft), suffix_global_drafts (of which the global
    tree's won), suffix_match_len (summed match lengths of the drafts), suffix_score (summed
    scores: the frequency model's expected accepted tokens).
    """

    def __init__(
        self,
        mode: str = "tree",
        max_depth: int = 64,
        max_spec_tokens: int | None = None,
        max_spec_factor: float = 1.0,
        max_spec_offset: float = 0.0,
        min_token_prob: float = 0.1,
        global_cache: bool = False,
        name: str = "suffix",
    ) -> None:
        super().__init__(name=check_str("SuffixDecodingDrafter.name", name))
        owner = "SuffixDecodingDrafter"
        self.mode = check_choice(f"{owner}.mode", mode, ("tree", "chain"))
        self.max_depth = check_int(
            f"{owner}.max_depth", max_depth, low=2, why="a match of >= 1 token plus >= 1 drafted token"
        )
        if max_spec_tokens is not None:
            check_int(f"{owner}.max_spec_tokens", max_spec_tokens, low=1, why="null = max_depth")
        self.max_spec_tokens = self.max_depth if max_spec_tokens is None else max_spec_tokens
        self.max_spec_factor = float(
            check_float(
                f"{owner}.max_spec_factor", max_spec_factor, low=0.0, why="α, tokens per matched token"
            )
        )
        self.max_spec_offset = float(check_float(f"{owner}.max_spec_offset", max_spec_offset))
        self.min_token_prob = float(
            check_float(f"{owner}.min_token_prob", min_token_prob, 0.0, 1.0, why="a probability")
        )
        self.global_cache = check_bool(f"{owner}.global_cache", global_cache)
        self.local: SuffixTree | None = None
        self.global_tree: SuffixTree | None = SuffixTree(self.max_depth) if self.global_cache else None
        self._seq_id = -1  # the current prompt's sequence in the global tree
        self._synced = 0  # committed tokens already in the trees

    def config(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "max_depth": self.max_depth,
            "max_spec_tokens": self.max_spec_tokens,
            "max_spec_factor": self.max_spec_factor,
            "max_spec_offset": self.max_spec_offset,
            "min_token_prob": self.min_token_prob,
            "global_cache": self.global_cache,
        }

    # ------------------------------------------------------------------ state across prompts
    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        """Only the global tree outlives a prompt."""
        return self.global_cache

    def run_state(self) -> Any:
        """The global tree's sequences (outputs) in the order they were added: rebuilding from them
        replays the same appends, hence the same tree."""
        if self.global_tree is None:
            return None
        tree = self.global_tree
        return {"responses": [tree.sequence(i) for i in tree.sequence_ids()], "next_seq": self._seq_id + 1}

    def restore_run_state(self, state: Any) -> None:
        if not self.global_cache or state is None:
            return
        tree = SuffixTree(self.max_depth)
        for seq_id, response in enumerate(state["responses"]):
            tree.extend(seq_id, response)
        self.global_tree = tree
        self._seq_id = max(state["next_seq"], len(state["responses"])) - 1

    # ------------------------------------------------------------------ drafter contract
    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """A fresh local tree over the prompt; a new sequence in the global tree for the output."""
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
        self._seq_id += 1

    def _commit(self, tokens: list[int]) -> None:
        """Committed output tokens: into the local tree and the current global sequence."""
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

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """The step's committed tokens go into the trees now (so the global tree holds the whole
        output when the prompt ends)."""
        self._commit([int(t) for t in outcome.new_tokens])
