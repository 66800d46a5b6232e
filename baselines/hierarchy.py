"""Hierarchy Drafting (Cho et al., arXiv 2502.05609, NAACL 2025, §3): token databases ordered by temporal
locality are queried from the most to the least local, and the first one with a hit supplies the drafts;
its several candidate sequences are verified in parallel as one tree (a trie under the anchor, `budget` nodes).

The three databases as this harness reads them (the paper's code was not found; the sizes are this harness's,
at LogitSpec's 64-node capacity):
- context: n-grams (n = max_ngram_size .. min_context_ngram) of this prompt + output; candidates are the
  continuations of the longest matched suffix's most recent occurrences (SPINE); a one-token key would hit
  whenever the anchor occurred before and so shadow the model database, hence min_context_ngram = 2;
- model: the target's own recent predictions, an adjacency table of the top-k tokens of every verified node's
  logits in this generation (goose/sources/adjacency.py); candidates are the anchor's top successors, each
  extended by top-1 successors (BRANCH);
- statistics: a run-long table counting the token after every n-gram of the run's text, earlier prompts
  and outputs included; candidates are the most frequent next tokens, each extended by the most frequent
  next token (SPINE).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from baselines.logitspec import DraftTrie
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.adjacency import AdjacencyTable
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_bool, check_int, check_str

TIERS: tuple[str, ...] = ("context", "model", "statistics")


class NgramStatistics:
    """Counts of the token after every n-gram (n = 1..max_order) of the texts added, one text per prompt."""

    def __init__(self, max_order: int) -> None:
        self.max_order = max_order
        self.counts: dict[tuple[int, ...], dict[int, int]] = {}

    def add(self, text: Sequence[int], start: int) -> None:
        """Count text[j] after each of its preceding n-grams, for j >= start (n-grams stay inside `text`)."""
        for j in range(max(start, 1), len(text)):
            token = int(text[j])
            for n in range(1, min(self.max_order, j) + 1):
                row = self.counts.setdefault(tuple(text[j - n : j]), {})
                row[token] = row.get(token, 0) + 1

    def next_tokens(self, context: Sequence[int]) -> list[int]:
        """Tokens seen after the longest suffix of `context` with counts, most frequent first (ties: smaller
        id); [] if none."""
        for n in range(min(self.max_order, len(context)), 0, -1):
            row = self.counts.get(tuple(context[len(context) - n :]))
            if row:
                return sorted(row, key=lambda t: (-row[t], t))
        return []


@dataclass(frozen=True)
class HierarchyConfig(DrafterConfig):
    """Hierarchy Drafting's hyperparameters, this harness's choices (the paper's code was not found), at
    LogitSpec's 64-node capacity."""

    owner = "HierarchyDrafter"
    max_ngram_size: int = 3  # longest n-gram key of the context and statistics databases
    min_context_ngram: int = 2  # shortest context key: a unigram hit would shadow the model database
    num_candidates: int = 8  # sequences drafted per step
    draft_len: int = 8  # tokens per sequence
    budget: int = 64  # tree nodes incl. the anchor
    k: int = 8  # top-k kept per row of the model database (Token Recycling's K)
    persistent_statistics: bool = True  # the statistics database lives for the whole run (the paper's)

    def _validate(self) -> None:
        owner = self.owner_name()
        check_int(f"{owner}.max_ngram_size", self.max_ngram_size, low=1, why="longest key")
        check_int(
            f"{owner}.min_context_ngram",
            self.min_context_ngram,
            low=1,
            high=self.max_ngram_size,
            why="shortest key of the context database, <= max_ngram_size",
        )
        check_int(f"{owner}.num_candidates", self.num_candidates, low=1, why="sequences drafted per step")
        check_int(f"{owner}.draft_len", self.draft_len, low=1, why="tokens per sequence")
        check_int(f"{owner}.budget", self.budget, low=2, why="nodes incl. the anchor")
        check_int(f"{owner}.k", self.k, low=1, why="successors kept per model-database row")
        check_bool(f"{owner}.persistent_statistics", self.persistent_statistics)
        super()._validate()  # budget and k, by goose.validation.HYPERPARAMETERS


class HierarchyDrafter(Drafter):
    """Hierarchy Drafting: context, then model, then statistics database; the first with a hit drafts up to
    `num_candidates` sequences of `draft_len` tokens. Keyword arguments are `HierarchyConfig`'s fields;
    `persistent_statistics` false starts the statistics database with each prompt's text. stats: hd_<tier>
    steps per database, hd_miss."""

    config_class = HierarchyConfig
    name = "hierarchy"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=check_str("HierarchyDrafter.name", self.name if name is None else name))
        self.cfg = HierarchyConfig(**hyperparameters)
        self.max_ngram_size = self.cfg.max_ngram_size
        self.min_context_ngram = self.cfg.min_context_ngram
        self.num_candidates = self.cfg.num_candidates
        self.draft_len = self.cfg.draft_len
        self.budget = self.cfg.budget
        self.k = self.cfg.k
        self.persistent_statistics = self.cfg.persistent_statistics
        self.matcher = ContextMatcher(
            range(self.min_context_ngram, self.max_ngram_size + 1), max_chain=self.draft_len
        )
        self.model_table: AdjacencyTable | None = None
        self.statistics = NgramStatistics(self.max_ngram_size)
        self._text: list[int] = []  # this prompt's tokens already counted in the statistics

    def config(self) -> dict[str, Any]:
        return {**self.cfg.as_dict(), "tiers": list(TIERS)}

    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        return self.persistent_statistics

    def run_state(self) -> Any:
        return copy.deepcopy(self.statistics) if self.persistent_statistics else None

    def restore_run_state(self, state: Any) -> None:
        if self.persistent_statistics and state is not None:
            self.statistics = copy.deepcopy(state)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self.stats = {f"hd_{tier}": 0 for tier in TIERS} | {"hd_miss": 0}
        self.matcher.reset()
        self.model_table = AdjacencyTable(prefill_logits.shape[-1], self.k, use_scores=False)
        if not self.persistent_statistics:
            self.statistics = NgramStatistics(self.max_ngram_size)
        self._text = []

    # ------------------------------------------------------------------ the three databases
    def context_candidates(self) -> list[list[int]]:
        """Continuations of the longest matched suffix, most recent occurrence first, distinct."""
        pool = self.matcher.tokens
        for n in self.matcher.ngram_lengths:
            if len(pool) < n:
                continue
            starts = self.matcher.occurrences(pool[len(pool) - n :])
            found: list[list[int]] = []
            for start in reversed(starts):
                follow = pool[start + n : start + n + self.draft_len]
                if follow not in found:
                    found.append(follow)
                if len(found) == self.num_candidates:
                    break
            if found:
                return found
        return []

    def model_candidates(self, anchor: int) -> list[list[int]]:
        """The anchor's top successors, each extended by top-1 successors."""
        table = self.model_table
        if table is None:
            return []
        found = []
        for first in table.successors(anchor)[0][: self.num_candidates]:
            path = [first]
            while len(path) < self.draft_len:
                nxt = table.successors(path[-1])[0]
                if not nxt:
                    break
                path.append(nxt[0])
            found.append(path)
        return found

    def statistics_candidates(self, committed: list[int]) -> list[list[int]]:
        """The most frequent next tokens, each extended by the most frequent next token."""
        width = self.max_ngram_size
        found = []
        for first in self.statistics.next_tokens(committed[-width:])[: self.num_candidates]:
            path = [first]
            while len(path) < self.draft_len:
                nxt = self.statistics.next_tokens((committed[-width:] + path)[-width:])
                if not nxt:
                    break
                path.append(nxt[0])
            found.append(path)
        return found

    def lookup(self, committed: list[int]) -> tuple[str, list[list[int]]]:
        """(tier, candidates) of the first database with a hit, ("", []) if none."""
        for tier in TIERS:
            if tier == "context":
                found = self.context_candidates()
            elif tier == "model":
                found = self.model_candidates(committed[-1])
            else:
                found = self.statistics_candidates(committed)
            if found:
                return tier, found
        return "", []

    # ------------------------------------------------------------------ the contract
    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        self.matcher.sync(committed)
        self._count_text(committed[len(self._text) :])
        tier, candidates = self.lookup(committed)
        if not candidates:
            self.count("hd_miss")
            self.route = "ar"
            return DraftTree.single(anchor)
        self.count(f"hd_{tier}")
        source = BRANCH if tier == "model" else SPINE
        trie = DraftTrie(anchor, self.budget)
        for path in candidates:
            if trie.full:
                break
            trie.insert(path, [source] * len(path))
        self.route = tier
        return trie.tree

    def _count_text(self, new: Sequence[int]) -> None:
        """Add this prompt's newly committed tokens to the statistics database."""
        start = len(self._text)
        self._text.extend(int(t) for t in new)
        self.statistics.add(self._text, start)

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: the anchor's logits (only with `learn_logits`) and the committed tokens, as
        after a drafted step."""
        if learn_logits:
            self.observe(DraftTree.single(committed[-1]), outcome)
        else:
            self._count_text(outcome.new_tokens)

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """The model database learns the top-k of every verified node's logits (rejected nodes included); the
        statistics count the step's tokens now, so a prompt's whole output is in them when it ends."""
        if self.model_table is not None:
            self.model_table.update(tree.tokens, outcome.logits)
        self._count_text(outcome.new_tokens)
