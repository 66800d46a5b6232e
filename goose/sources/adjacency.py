"""The adjacency table: the branch source of Goose, Token Recycling, iso and eagle2 (Goose §4.1, symbol K,
docs/paper.md).

For every token, the top-K next tokens the target predicted after it (softmax over those K logits), the
freshest forward winning; a (previous token, token) bigram tier is consulted first. The store is NumPy on the
host so that `successors`, called per node while a tree is built, never synchronises a device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

# ids travel packed with the scores as float32, exact for integers below 2**24 (any vocabulary).
_MAX_PACKED_VOCAB = 2**24
# Trees of at most this many nodes are written by `_update_small_tree` (Python-list deduplication, a few array
# writes); larger ones, and the prefill, by `update`'s vectorised sorts.
SMALL_TREE = 64


def _as_int_array(x: torch.Tensor | Sequence[int] | np.ndarray) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().reshape(-1).to("cpu", torch.long).numpy()
    return np.asarray(x, dtype=np.int64).reshape(-1)


def last_occurrence(values: np.ndarray) -> np.ndarray:
    """Positions of the last occurrence of each distinct value, by ascending value (a scatter with duplicate
    indices would leave the winner unspecified)."""
    n = values.shape[0]
    _, first_in_reversed = np.unique(values[::-1], return_index=True)
    return n - 1 - first_in_reversed


class AdjacencyTable:
    """Top-K successor table: V rows, K successors each. `use_scores` False (Token Recycling: ids only)
    returns rank placeholders 1/(rank+1); `use_bigram` keeps the (prev, token) tier; `half_unigram_scores`
    stores unigram scores in float16, as the official Goose code (compat=authors)."""

    def __init__(
        self,
        vocab_size: int,
        k: int,
        use_scores: bool = True,
        use_bigram: bool = False,
        half_unigram_scores: bool = False,
    ) -> None:
        if vocab_size <= 0 or k <= 0:
            raise ValueError(f"vocab_size and k must be positive, got {vocab_size}, {k}")
        if vocab_size > _MAX_PACKED_VOCAB:
            raise ValueError(f"vocab_size {vocab_size} exceeds {_MAX_PACKED_VOCAB}")
        self.vocab_size = vocab_size
        self.k = k
        self.width = min(k, vocab_size)
        self.use_scores = use_scores
        self.use_bigram = use_bigram
        self._placeholder = (1.0 / np.arange(1, self.width + 1)).astype(np.float32).tolist()
        self._ids = np.zeros((vocab_size, self.width), dtype=np.int64)
        self.half_unigram_scores = half_unigram_scores
        score_dtype = np.float16 if half_unigram_scores else np.float32
        self._scores = np.zeros((vocab_size, self.width), dtype=score_dtype) if use_scores else None
        self._seen = np.zeros(vocab_size, dtype=bool)
        self._reset_bigram()

    def _reset_bigram(self) -> None:
        self._bg_slot: dict[int, int] = {}  # key prev * V + tok -> its row in the row store
        self._bg_ids = np.zeros((0, self.width), dtype=np.int64)
        self._bg_scores = np.zeros((0, self.width), dtype=np.float32)
        self._bg_count = 0

    def reset(self) -> None:
        """Forget everything (the table is fresh per prompt for Goose, iso and eagle2: Goose §4.1)."""
        self._seen[:] = False
        self._reset_bigram()

    def absorb(self, other: AdjacencyTable) -> None:
        """Copy every unigram row `other` holds over this table's (its bigram tier is not taken): a table
        kept for a whole run taking the rows of a finished prompt's table."""
        if other.vocab_size != self.vocab_size or other.width != self.width:
            raise ValueError(
                f"cannot absorb a table of vocab {other.vocab_size} and width {other.width} into one of "
                f"vocab {self.vocab_size} and width {self.width}"
            )
        if self._scores is not None and other._scores is None:
            raise ValueError("cannot absorb a table without scores into one with scores")
        rows = np.flatnonzero(other._seen)
        self._ids[rows] = other._ids[rows]
        if self._scores is not None and other._scores is not None:
            self._scores[rows] = other._scores[rows]
        self._seen[rows] = True

    def __getstate__(self) -> dict:
        """Pickle (and deepcopy) only the written unigram rows and the used bigram slots: a run-long table
        (TR, hw_tree's run table) is checkpointed after every prompt, and its V × K store is mostly
        unwritten. Unwritten rows are never read (`successors` checks `_seen` first), so nothing observable
        is lost."""
        state = self.__dict__.copy()
        rows = np.flatnonzero(self._seen)
        state["_seen"] = rows
        state["_ids"] = self._ids[rows]
        if self._scores is not None:
            state["_scores"] = self._scores[rows]
        n = self._bg_count
        state["_bg_ids"] = self._bg_ids[:n]
        state["_bg_scores"] = self._bg_scores[:n]
        return state

    def __setstate__(self, state: dict) -> None:
        rows = state["_seen"]
        written_ids = state["_ids"]
        self.__dict__.update(state)
        self._seen = np.zeros(self.vocab_size, dtype=bool)
        self._seen[rows] = True
        self._ids = np.zeros((self.vocab_size, self.width), dtype=np.int64)
        self._ids[rows] = written_ids
        if state["_scores"] is not None:
            written_scores = state["_scores"]
            self._scores = np.zeros((self.vocab_size, self.width), dtype=written_scores.dtype)
            self._scores[rows] = written_scores

    @property
    def num_rows(self) -> int:
        return int(self._seen.sum())

    def has_row(self, token: int) -> bool:
        """Whether `token`'s unigram row was ever written (this prompt)."""
        return bool(self._seen[token])

    @property
    def num_bigrams(self) -> int:
        return self._bg_count

    def successors(
        self, token: int, prev: int | None = None, min_score: float = 0.0
    ) -> tuple[list[int], list[float]]:
        """Successor ids and scores of `token`, best first: the bigram row (prev, token) when on and `prev` is
        given, else the unigram row; ([], []) if never seen; scores below `min_score` dropped."""
        row = None
        if self.use_bigram and prev is not None and prev >= 0 and self._bg_count:
            slot = self._bg_slot.get(prev * self.vocab_size + token)
            if slot is not None:
                ids = self._bg_ids[slot].tolist()
                scores = self._bg_scores[slot].tolist() if self.use_scores else list(self._placeholder)
                row = (ids, scores)
        if row is None:
            if not self._seen[token]:
                return [], []
            ids = self._ids[token].tolist()
            scores = self._scores[token].tolist() if self._scores is not None else list(self._placeholder)
            row = (ids, scores)
        if min_score > 0.0:
            n = sum(1 for s in row[1] if s >= min_score)  # scores are descending
            return row[0][:n], row[1][:n]
        return row

    def _topk_to_host(
        self, logits: torch.Tensor, top: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """ids and scores (softmax over the K logits) of each row's top-K, on the host: from `top` (the
        engine's sorted (values, indices) of these rows, `VerifyOutcome.top`) when it is at least K wide,
        else topk on the logits' device; one transfer (on the CPU, the tensors' own memory: no packing)."""
        with torch.no_grad():
            if top is not None and top[1].shape[-1] == self.width:
                vals, idx = top
            elif top is not None and top[1].shape[-1] > self.width:
                vals, idx = top[0][:, : self.width], top[1][:, : self.width]
            else:
                vals, idx = torch.topk(logits.detach(), self.width, dim=-1)
            if not self.use_scores:
                return idx.to("cpu", torch.long).numpy(), None
            scores = torch.softmax(vals, dim=-1, dtype=torch.float32)  # one op: the same values
            if vals.device.type == "cpu":
                return idx.numpy(), scores.numpy()
            packed = torch.cat([idx.to(torch.float32), scores], dim=-1).cpu().numpy()
        return packed[:, : self.width].astype(np.int64), np.ascontiguousarray(packed[:, self.width :])

    def update_one(
        self,
        token: int,
        logits: torch.Tensor,
        prev: int | None = None,
        top: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """`update` for a single position (the anchor of a step without drafting or with an empty draft):
        the same rows written, without the batch path's deduplication and merge, whose fixed costs would
        otherwise be most of such a step's bookkeeping."""
        logits = logits.reshape(-1, logits.shape[-1])
        if logits.shape != (1, self.vocab_size):
            raise ValueError(
                f"update_one takes one row of {self.vocab_size} logits, got {tuple(logits.shape)}"
            )
        ids, scores = self._topk_to_host(logits, top)
        self._ids[token] = ids[0]
        if self._scores is not None:
            self._scores[token] = scores[0]
        self._seen[token] = True
        if not self.use_bigram or prev is None or prev < 0:
            return
        key = prev * self.vocab_size + token
        slot = self._bg_slot.get(key)
        if slot is None:
            slot = self._bg_slot[key] = self._bg_count
            self._grow(slot + 1)
            self._bg_count += 1
        self._bg_ids[slot] = ids[0]
        if scores is not None:
            self._bg_scores[slot] = scores[0]

    def update(
        self,
        tokens: torch.Tensor | Sequence[int],
        logits: torch.Tensor,
        prev_tokens: torch.Tensor | Sequence[int] | None = None,
        top: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Overwrite row tokens[i] with topk(logits[i]) for every i; prev_tokens[i] (−1: none) keys the bigram
        tier. Duplicates: the last position wins. `top`: the logits' sorted top-K, if the engine has it."""
        logits = logits.reshape(-1, logits.shape[-1])
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(f"logits have {logits.shape[-1]} columns, table vocab is {self.vocab_size}")
        tok = _as_int_array(tokens)
        if tok.shape[0] != logits.shape[0]:
            raise ValueError(f"{tok.shape[0]} tokens but {logits.shape[0]} logit rows")
        if tok.shape[0] == 0:
            return
        prev = None
        if self.use_bigram and prev_tokens is not None:
            prev = _as_int_array(prev_tokens)
            if prev.shape[0] != tok.shape[0]:
                raise ValueError(f"{prev.shape[0]} prev tokens but {tok.shape[0]} tokens")
        if tok.shape[0] == 1:  # a step without drafting, or an empty draft: the anchor alone
            self.update_one(int(tok[0]), logits, None if prev is None else int(prev[0]), top)
            return
        ids, scores = self._topk_to_host(logits, top)

        last = last_occurrence(tok)
        rows = tok[last]
        self._ids[rows] = ids[last]
        if self._scores is not None:
            self._scores[rows] = scores[last]
        self._seen[rows] = True

        if prev is not None:
            valid = np.flatnonzero(prev >= 0)
            if valid.size:
                keys = prev[valid] * self.vocab_size + tok[valid]
                sel = valid[last_occurrence(keys)]  # ascending key order
                self._bigram_write(
                    (prev[sel] * self.vocab_size + tok[sel]).tolist(),
                    ids[sel],
                    scores[sel] if scores is not None else None,
                )

    def _bigram_write(self, keys: list[int], ids: np.ndarray, scores: np.ndarray | None) -> None:
        """Overwrite / insert rows for sorted, distinct `keys` (new keys take the next rows, in key order)."""
        slots = []
        count = self._bg_count
        index = self._bg_slot
        for key in keys:
            slot = index.get(key)
            if slot is None:
                slot = index[key] = count
                count += 1
            slots.append(slot)
        self._grow(count)
        self._bg_count = count
        self._bg_ids[slots] = ids
        if scores is not None:
            self._bg_scores[slots] = scores

    def _grow(self, needed: int) -> None:
        cap = self._bg_ids.shape[0]
        if needed <= cap:
            return
        new_cap = max(needed, 2 * cap, 1024)
        ids = np.zeros((new_cap, self.width), dtype=np.int64)
        ids[:cap] = self._bg_ids
        self._bg_ids = ids
        if self.use_scores:
            scores = np.zeros((new_cap, self.width), dtype=np.float32)
            scores[:cap] = self._bg_scores
            self._bg_scores = scores

    def update_from_tree(
        self,
        tokens: Sequence[int],
        parents: Sequence[int],
        logits: torch.Tensor,
        prev_anchor: int | None = None,
        top: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Update from a verification forward over a tree, rejected nodes included (`prev_anchor`: the root's
        bigram predecessor; `top`: the engine's top-K of the logits, `VerifyOutcome.top`)."""
        if len(tokens) == 1:  # the anchor alone
            self.update_one(int(tokens[0]), logits, prev_anchor if self.use_bigram else None, top)
            return
        if len(tokens) <= SMALL_TREE:
            self._update_small_tree(tokens, parents, logits, prev_anchor, top)
            return
        prev = None
        if self.use_bigram:
            tok = np.asarray(tokens, dtype=np.int64)
            prev = tok[np.maximum(np.asarray(parents, dtype=np.int64), 0)]
            prev[0] = -1 if prev_anchor is None else prev_anchor
        self.update(tokens, logits, prev, top)

    def _update_small_tree(
        self,
        tokens: Sequence[int],
        parents: Sequence[int],
        logits: torch.Tensor,
        prev_anchor: int | None,
        top: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> None:
        """`update_from_tree` for a tree of at most SMALL_TREE nodes: the same rows and bigram slots written
        (last position wins, new bigram keys take rows in key order), the deduplication done on Python
        lists, so that a step's update costs a handful of array writes rather than `update`'s sorts."""
        logits = logits.reshape(-1, logits.shape[-1])
        n = len(tokens)
        if logits.shape != (n, self.vocab_size):
            raise ValueError(f"{n} tokens need ({n}, {self.vocab_size}) logits, got {tuple(logits.shape)}")
        if len(parents) != n:
            raise ValueError(f"{n} tokens but {len(parents)} parents")
        ids, scores = self._topk_to_host(logits, top)
        toks = [int(t) for t in tokens]
        last = {t: i for i, t in enumerate(toks)}  # a later position overwrites an earlier one
        if len(last) == n:
            rows, row_ids, row_scores = toks, ids, scores
        else:
            rows = sorted(last)
            picked = [last[t] for t in rows]
            row_ids, row_scores = ids[picked], None if scores is None else scores[picked]
        self._ids[rows] = row_ids
        if self._scores is not None:
            self._scores[rows] = row_scores
        self._seen[rows] = True
        if not self.use_bigram:
            return
        by_key: dict[int, int] = {}
        root_prev = -1 if prev_anchor is None else int(prev_anchor)
        for i, t in enumerate(toks):
            p = root_prev if i == 0 else toks[parents[i]]
            if p >= 0:
                by_key[p * self.vocab_size + t] = i
        if not by_key:
            return
        keys = sorted(by_key)
        picked = [by_key[k] for k in keys]
        self._bigram_write(keys, ids[picked], None if scores is None else scores[picked])

    def update_from_prefill(self, prompt_ids: Sequence[int], logits: torch.Tensor) -> None:
        """Prefill harvest (Goose App. C.1): row prompt[i] ← topk(logits[i]), bigram key (prompt[i−1],
        prompt[i]); fewer logits rows than prompt tokens align with the tail."""
        logits = logits.reshape(-1, logits.shape[-1])
        ids = np.asarray(prompt_ids, dtype=np.int64)
        prev = np.concatenate([np.array([-1], dtype=np.int64), ids[:-1]])
        n = logits.shape[0]
        if n > ids.shape[0]:
            raise ValueError(f"{n} prefill logit rows for a prompt of {ids.shape[0]} tokens")
        start = ids.shape[0] - n
        self.update(ids[start:], logits, prev[start:] if self.use_bigram else None)
