"""LogitSpec (Liu et al., arXiv 2507.01449, §3 "Method"): the last verified logit predicts the next token (here
the anchor) and, among its other top-ranked tokens, guesses the *next-next* token. Continuations are retrieved
by n-gram lookup over prompt + output (n = max_ngram_size .. 1, goose/sources/context_matcher.py) for the
anchor (up to num_pred_tokens tokens, SPINE) and for every guess g keyed by (..., anchor, g) (g BRANCH, its
continuation SPINE), and merged into one draft tree of at most draft_tree_capacity nodes.

Choices taken from the reference code (smart-lty/LogitSpec, model/logitspec/generate_drafts_util.py): guesses
are the top draft_tree_capacity tokens of the last logit in rank order, the anchor skipped; a guess of rank r
(0 = the argmax) drafts guess_lengths[i] tokens for the first i with r <= guess_rank_limits[i], else the last
length; a lookup takes the most recent occurrence whose continuation is complete (the earliest if none is).
Here the candidates share prefixes in a trie, so the capacity counts distinct nodes (the anchor included).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_int, check_int_list, check_str


def latest_complete_continuation(matcher: ContextMatcher, key: Sequence[int], length: int) -> list[int]:
    """Up to `length` tokens after an earlier occurrence of the longest suffix of `key` the matcher indexes
    (n = its lengths, longest first): the most recent occurrence with `length` tokens after it, else the
    earliest (the longest continuation there is); [] without any occurrence."""
    pool = matcher.tokens
    for n in matcher.ngram_lengths:
        if len(key) < n:
            continue
        starts = matcher.occurrences(key[len(key) - n :])
        if not starts:
            continue
        i = bisect_right(starts, len(pool) - n - length) - 1
        start = starts[i] if i >= 0 else starts[0]
        return pool[start + n : start + n + length]
    return []


class DraftTrie:
    """A DraftTree grown by inserting token sequences under the anchor, sharing prefixes, up to `capacity`
    nodes."""

    def __init__(self, anchor: int, capacity: int) -> None:
        self.tree = DraftTree.single(anchor)
        self.capacity = capacity
        self._child: dict[tuple[int, int], int] = {}

    @property
    def full(self) -> bool:
        return len(self.tree) >= self.capacity

    def insert(self, tokens: Sequence[int], sources: Sequence[int]) -> int:
        """Insert the path `tokens` (node sources `sources`); returns how many nodes were new."""
        node, added = 0, 0
        for token, source in zip(tokens, sources, strict=True):
            key = (node, int(token))
            child = self._child.get(key)
            if child is None:
                if self.full:
                    break
                child = self.tree.add(int(token), node, source)
                self._child[key] = child
                added += 1
            node = child
        return added


@dataclass(frozen=True)
class LogitSpecConfig(DrafterConfig):
    """LogitSpec's hyperparameters, at the paper's runner (smart-lty/LogitSpec, eval.sh: --max_ngram_size 3
    --num_pred_tokens 20 --draft_tree_capacity 64) and its draft-length-by-rank rule
    (model/logitspec/generate_drafts_util.py)."""

    owner = "LogitSpecDrafter"
    max_ngram_size: int = 3  # longest n-gram key (lookups try n = 3, 2, 1)
    num_pred_tokens: int = 20  # tokens retrieved after the anchor
    # nodes incl. the anchor; also how many of the last logit's top tokens are guesses
    draft_tree_capacity: int = 64
    # a guess of rank r <= 8 drafts 4 tokens, r <= 32 drafts 3, else 1 (the guess plus its continuation)
    guess_rank_limits: tuple[int, ...] = (8, 32)
    guess_lengths: tuple[int, ...] = (4, 3, 1)

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
        check_int(f"{owner}.max_ngram_size", self.max_ngram_size, low=1, why="longest key")
        check_int(
            f"{owner}.num_pred_tokens", self.num_pred_tokens, low=1, why="tokens retrieved for the anchor"
        )
        check_int(
            f"{owner}.draft_tree_capacity", self.draft_tree_capacity, low=2, why="nodes incl. the anchor"
        )
        limits = check_int_list(f"{owner}.guess_rank_limits", self.guess_rank_limits, low=0)
        if list(limits) != sorted(set(limits)):
            raise ValueError(f"{owner}.guess_rank_limits = {list(limits)!r}: must be strictly increasing")
        lengths = check_int_list(f"{owner}.guess_lengths", self.guess_lengths, low=1, distinct=False)
        if len(lengths) != len(limits) + 1:
            raise ValueError(
                f"{owner}.guess_lengths = {list(lengths)!r}: must have one more entry than "
                f"guess_rank_limits ({len(limits)}), the last for ranks above them"
            )
        object.__setattr__(self, "guess_rank_limits", tuple(int(x) for x in limits))
        object.__setattr__(self, "guess_lengths", tuple(int(x) for x in lengths))


class LogitSpecDrafter(Drafter):
    """LogitSpec: the anchor's retrieved continuation plus, per guess of the last logit, the guess and its
    retrieved continuation, as one tree. Keyword arguments are `LogitSpecConfig`'s fields. stats:
    logitspec_anchor_hits, logitspec_guess_hits, logitspec_guesses.
    """

    config_class = LogitSpecConfig
    name = "logitspec"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=check_str("LogitSpecDrafter.name", self.name if name is None else name))
        self.cfg = LogitSpecConfig(**hyperparameters)
        self.max_ngram_size = self.cfg.max_ngram_size
        self.num_pred_tokens = self.cfg.num_pred_tokens
        self.draft_tree_capacity = self.cfg.draft_tree_capacity
        self.guess_rank_limits = self.cfg.guess_rank_limits
        self.guess_lengths = self.cfg.guess_lengths
        self.matcher = ContextMatcher(range(1, self.max_ngram_size + 1), max_chain=self.num_pred_tokens)
        self._guesses: list[int] = []  # the last verified logit's top tokens, best first
        # a plain step's logit without `learn_logits`, read at the next propose (no forward runs before it)
        self._unread: torch.Tensor | None = None

    def config(self) -> dict[str, Any]:
        return {**self.cfg.as_dict(), "occurrence": "latest_complete"}

    def guess_length(self, rank: int) -> int:
        """Tokens drafted for the guess of rank `rank` (the guess itself plus its continuation)."""
        for limit, length in zip(self.guess_rank_limits, self.guess_lengths, strict=False):
            if rank <= limit:
                return length
        return self.guess_lengths[-1]

    def _remember_logit(self, logit: torch.Tensor) -> None:
        k = min(self.draft_tree_capacity, logit.shape[-1])
        self._guesses = torch.topk(logit.detach().reshape(-1).float(), k).indices.tolist()
        self._unread = None

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self.stats = {"logitspec_anchor_hits": 0, "logitspec_guess_hits": 0, "logitspec_guesses": 0}
        self.matcher.reset()
        self._remember_logit(prefill_logits[-1])

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        if self._unread is not None:
            self._remember_logit(self._unread)
        self.matcher.sync(committed)
        trie = DraftTrie(anchor, self.draft_tree_capacity)
        tail = list(committed[-self.max_ngram_size :])
        chain = latest_complete_continuation(self.matcher, tail, self.num_pred_tokens)
        if chain:
            self.count("logitspec_anchor_hits")
            trie.insert(chain, [SPINE] * len(chain))
        key = tail[1:] if len(tail) == self.max_ngram_size else tail
        for rank, guess in enumerate(self._guesses):
            if trie.full:
                break
            if guess == anchor:
                continue
            more = self.guess_length(rank) - 1
            follow = latest_complete_continuation(self.matcher, [*key, guess], more) if more else []
            self.count("logitspec_guesses")
            self.count("logitspec_guess_hits", int(bool(follow)))
            trie.insert([guess, *follow], [BRANCH] + [SPINE] * len(follow))
        tree = trie.tree
        self.route = "tree" if len(tree) > 1 else "ar"
        return tree

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: the anchor's logit predicted the next anchor; without `learn_logits` its
        top tokens are read only if the next step drafts (the gate's next plain step replaces it)."""
        if learn_logits:
            self.observe(DraftTree.single(committed[-1]), outcome)
        else:
            self._unread = outcome.logits[outcome.accepted_nodes[-1]]

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """The logit at the last accepted node predicted the next anchor: its top tokens are the next guesses."""
        self._remember_logit(outcome.logits[outcome.accepted_nodes[-1]])
