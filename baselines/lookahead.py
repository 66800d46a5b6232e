"""Lookahead decoding (Fu et al., arXiv 2402.02057, §3; Spec-Bench's `lookahead`): one forward per step holds
the verification branch (up to G n-grams of the pool whose first token is the anchor, merged into a trie) and
the lookahead branch, a 2-D Jacobi window of W columns and N − 1 levels whose nodes are forwarded for their
logits alone (`DraftTree.accept_limit`; source LOOKAHEAD). As a tree: level 0 (W − 1 tokens) is a chain off
the anchor; column j hangs levels 1 … N − 2 off the anchor (j = 0) or off level-0 node j − 1, so every token
sees the causal context of its position, as the reference's mask (`lade/models/llama.py`).

After a step, column j yields the n-gram (its hang token, its levels 1 … N − 2, the argmax at its last level)
for the pool (§3.1); the window then advances one Jacobi step (the reference's
ALWAYS_FWD_ONE = 1): level 0 ← level 1 without its first token, level l ← level l + 1, the last level ← the new
argmaxes. `advance_by_accepted` instead drops as many leading tokens as were accepted and pads with prompt
tokens (ALWAYS_FWD_ONE = 0). The window starts as W + N − 3 random prompt tokens (seeded) and fills one
level per step (N − 2 steps) before n-grams are collected, as the reference. The drafts never depend on the
sample, so sample-and-match keeps T > 0 exact.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, LOOKAHEAD, ROOT, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.ngram_pool import NgramPool
from goose.validation import check_bool, check_int


@dataclass(frozen=True)
class LookaheadConfig(DrafterConfig):
    """Lookahead's hyperparameters, at Spec-Bench's eval.sh (--level 5 --window 7 --guess 7, the leaderboard's
    runs) and the reference README's config_lade(LEVEL=5, WINDOW_SIZE=7, GUESS_SET_SIZE=7): about 56 nodes
    per step."""

    owner = "LookaheadDrafter"
    window: int = 7  # W, Jacobi window columns
    ngram: int = 5  # N, n-gram size: N − 1 levels
    guesses: int = 7  # G, n-grams verified per step
    seed: int = 10  # the window's initial tokens
    advance_by_accepted: bool = False  # the reference's ALWAYS_FWD_ONE = 0 (module docstring)

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
        check_int(f"{owner}.window", self.window, 1, why="W, Jacobi window columns")
        check_int(f"{owner}.ngram", self.ngram, 3, why="N, n-gram size: N − 1 >= 2 levels")
        check_int(f"{owner}.guesses", self.guesses, 1, why="G, n-grams verified per step")
        check_int(f"{owner}.seed", self.seed, 0, why="the window's initial tokens")
        check_bool(f"{owner}.advance_by_accepted", self.advance_by_accepted)


class LookaheadDrafter(Drafter):
    """Lookahead decoding: window W, n-gram size N (N − 1 levels), up to G verified n-grams per step.
    Keyword arguments are `LookaheadConfig`'s fields."""

    config_class = LookaheadConfig
    name = "lookahead"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=self.name if name is None else name)
        self.cfg = LookaheadConfig(**hyperparameters)
        self.window = self.cfg.window
        self.ngram = self.cfg.ngram
        self.guesses = self.cfg.guesses
        self.seed = self.cfg.seed
        self.advance_by_accepted = self.cfg.advance_by_accepted
        self.pool = NgramPool(self.guesses)
        self._reset([0])

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    def _reset(self, prompt_ids: list[int]) -> None:
        self._rng = random.Random(self.seed)
        self._history = list(prompt_ids) or [0]
        first = [self._rng.choice(self._history) for _ in range(self.window + self.ngram - 3)]
        # levels[l]: the window's level l; None until filled (the reference's past_tokens)
        self.levels: list[list[int] | None] = [first] + [None] * (self.ngram - 2)
        self.pool.clear()
        self._built: tuple[int, int, list[list[int]]] | None = None  # (tree size, anchor, node ids per level)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self._reset(prompt_ids)

    @property
    def filled(self) -> int:
        """The highest level filled so far (N − 2 once the window is complete)."""
        return max(level for level, tokens in enumerate(self.levels) if tokens is not None)

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        self._history = committed
        tree = DraftTree([anchor], [-1], [ROOT], [0])
        complete = self.levels[-1] is not None
        guesses = self.pool.get(anchor) if complete else []
        trie: dict[tuple[int, int], int] = {}  # (parent, token) -> node
        for gram in guesses:  # the verification branch: a trie of the anchor's n-grams, oldest first
            node = 0
            for token in gram:
                if (node, token) not in trie:
                    trie[node, token] = tree.add(token, node, BRANCH)
                node = trie[node, token]
        accept_limit = len(tree)
        levels: list[list[int]] = [[] for _ in self.levels]
        node = 0
        for token in self.levels[0]:  # level 0: a chain off the anchor
            node = tree.add(token, node, LOOKAHEAD)
            levels[0].append(node)
        hang = [0, *levels[0]]  # column j hangs off the anchor (j = 0) or level-0 node j − 1
        for level in range(1, self.filled + 1):
            above = hang if level == 1 else levels[level - 1]
            for j, token in enumerate(self.levels[level]):
                levels[level].append(tree.add(token, above[j], LOOKAHEAD))
        tree.accept_limit = accept_limit if accept_limit < len(tree) else None
        self._built = (len(tree) - accept_limit, anchor, levels)
        self.route = "lookahead" if accept_limit > 1 else "jacobi"
        self.count("lookahead_guesses", len(guesses))
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        if self._built is None:
            return
        window_nodes, anchor, nodes = self._built
        self._built = None
        # budget=auto may cut verification-branch nodes: the window (past accept_limit) stays whole and moves
        # down by as many places. A cut window (its depth at a prompt's end) leaves the window unchanged.
        if not window_nodes or len(tree) - tree.acceptable != window_nodes:
            self.count("lookahead_window_cut")
            return
        shift = tree.acceptable - nodes[0][0]  # nodes[0][0]: the first window node, at the old accept_limit
        pred = outcome.predictions
        top = self.filled
        new = [pred[i + shift] for i in nodes[top]]
        if top < self.ngram - 2:  # filling: every level drops its first token, the next level is born
            for level in range(top + 1):
                self.levels[level] = self.levels[level][1:]
            self.levels[top + 1] = new if top == 0 else new[1:]
            return
        for j, token in enumerate(new):  # column j's n-gram: hang token, levels 1 … N − 2, the new token
            key = anchor if j == 0 else self.levels[0][j - 1]
            gram = tuple(self.levels[level][j] for level in range(1, self.ngram - 1)) + (token,)
            self.pool.add(key, gram)
        self._advance(new, len(outcome.accepted_nodes) - 1 if self.advance_by_accepted else 0)

    def _advance(self, new: list[int], drop: int) -> None:
        """One Jacobi step of the window; `drop` > 0 also skips the accepted positions and pads at the end."""
        rows = [row for row in self.levels[1:] if row is not None] + [new]
        sizes = [self.window - 1] + [self.window] * (self.ngram - 2)
        for level, size in enumerate(sizes):
            row = rows[level][1 + drop :] if level == 0 else rows[level][drop:]
            pad = [self._rng.choice(self._history) for _ in range(size - len(row))]
            self.levels[level] = (row + pad)[:size]
