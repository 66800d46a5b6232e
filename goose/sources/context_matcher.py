"""Context matcher: Goose's spine source (Goose §4.1, docs/paper.md).

Per n-gram length (5, 4, 3), an index from n-gram to start positions in prompt + committed tokens, grown
incrementally; an n-gram is indexed once its next token is committed, so every hit is an earlier occurrence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ContextMatch:
    """One lookup: `chain` (up to max_chain tokens after the earliest occurrence), the matched `n`, its
    `start`, and `consensus` (>= 2 earlier occurrences, all with the same next token)."""

    chain: list[int]
    n: int = 0
    start: int = -1
    consensus: bool = False


NO_MATCH = ContextMatch([])


@dataclass
class _Occurrences:
    """Index entry of one n-gram: its start positions and the agreement of their next tokens."""

    starts: list[int]
    next_token: int  # the token after the first occurrence
    agree: bool = True  # every occurrence so far continued with next_token


class ContextMatcher:
    """Incremental n-gram index over prompt + committed tokens (ngram_lengths longest first; max_chain). No
    defaults here: each drafter passes its config's (Goose's: goose.method.config.ContextMatchConfig)."""

    def __init__(self, ngram_lengths: Sequence[int], max_chain: int) -> None:
        if max_chain < 1:
            raise ValueError(f"max_chain = {max_chain}: must be >= 1")
        if not ngram_lengths or min(ngram_lengths) < 1:
            raise ValueError(f"ngram_lengths = {ngram_lengths!r}: must be positive lengths")
        self.ngram_lengths = tuple(sorted(set(ngram_lengths), reverse=True))
        self.max_chain = max_chain
        self.tokens: list[int] = []
        self._index: dict[int, dict[tuple[int, ...], _Occurrences]] = {n: {} for n in self.ngram_lengths}

    def __len__(self) -> int:
        return len(self.tokens)

    def reset(self) -> None:
        self.tokens = []
        self._index = {n: {} for n in self.ngram_lengths}

    def append(self, tokens: Sequence[int]) -> None:
        """Add committed tokens to the pool; indexes every n-gram that now has a next token."""
        pool = self.tokens
        for token in tokens:
            token = int(token)
            j = len(pool)  # position of the new token: it follows the n-gram starting at j - n
            for n, index in self._index.items():
                p = j - n
                if p < 0:
                    continue
                key = tuple(pool[p:j])
                entry = index.get(key)
                if entry is None:
                    index[key] = _Occurrences([p], token)
                else:
                    entry.starts.append(p)
                    if token != entry.next_token:
                        entry.agree = False
            pool.append(token)

    def sync(self, committed: Sequence[int]) -> None:
        """Append the new tail of `committed`; the pool must be a prefix of it."""
        if len(committed) < len(self.tokens):
            raise ValueError(
                f"committed has {len(committed)} tokens but the matcher already holds {len(self.tokens)}; "
                "call reset() for a new prompt"
            )
        if len(committed) > len(self.tokens):
            self.append(committed[len(self.tokens) :])

    def occurrences(self, ngram: Sequence[int]) -> list[int]:
        index = self._index.get(len(ngram))
        if index is None:
            raise ValueError(f"no index for n = {len(ngram)}; lengths are {self.ngram_lengths}")
        entry = index.get(tuple(ngram))
        return list(entry.starts) if entry else []

    def match(self, suffix: Sequence[int] | None = None) -> ContextMatch:
        """Look up the last n tokens of `suffix` (default: the pool), longest n first; at the first n with
        earlier occurrences return the earliest one's continuation and consensus."""
        if suffix is None:
            suffix = self.tokens[-self.ngram_lengths[0] :]
        for n, index in self._index.items():
            if len(suffix) < n:
                continue
            entry = index.get(tuple(suffix[len(suffix) - n :]))
            if entry is None:
                continue
            start = entry.starts[0]
            chain = self.tokens[start + n : start + n + self.max_chain]
            consensus = len(entry.starts) >= 2 and entry.agree
            return ContextMatch(chain, n, start, consensus)
        return NO_MATCH

    def _match_after(self, extended: Sequence[int]) -> ContextMatch:
        width = self.ngram_lengths[0]
        tail = list(extended[-width:])
        if len(tail) < width:
            tail = self.tokens[max(0, len(self.tokens) - (width - len(tail))) :] + tail
        return self.match(tail)

    def extend_chain(self, chain: Sequence[int], limit: int, require_consensus: bool) -> list[int]:
        """Grow `chain` by repeated matching from the end of the drafted text (Goose §4.3) up to `limit`
        tokens; with `require_consensus` (c = 1) the first proposal without consensus ends it."""
        extended = list(chain)
        while len(extended) < limit:
            found = self._match_after(extended)
            if not found.chain or (require_consensus and not found.consensus):
                break
            extended.extend(found.chain[: limit - len(extended)])
        return extended

    def extend_chain_whole(self, chain: Sequence[int], limit: int, saturated: bool) -> list[int]:
        """The official extension (compat=authors): whole proposals are appended (overshooting `limit` by up
        to max_chain − 1), and at c = 1 the first proposal without consensus is appended before stopping."""
        extended = list(chain)
        while len(extended) < limit:
            found = self._match_after(extended)
            if not found.chain:
                break
            extended.extend(found.chain)
            if saturated and not found.consensus:
                break
        return extended
