"""Suffix automaton: SAM-Decoding's token source (Hu et al., arXiv 2411.10666, "dynamic SAM"). The automaton
over prompt + committed tokens grows online (Blumer et al. 1985, amortised O(1) per token); each state
keeps `first`, the end of its earliest occurrence (SAM-Decoding's `min_endpos`), which the construction
maintains for free. The longest earlier-occurring suffix advances before each token joins, so every match
is an earlier one; `continuation` copies after its earliest occurrence (PLD's and Goose's choice too),
climbing suffix links (`to_anc`) when too few tokens follow.
"""

from __future__ import annotations

from collections.abc import Sequence


class SuffixAutomaton:
    """Online suffix automaton over one token sequence, with `match_length` (longest suffix occurring ending
    before the last token; 0: none) and `match_end` (its earliest end, −1: none).
    """

    __slots__ = ("tokens", "_next", "_link", "_len", "_first", "_last", "_match_state", "_match_len")

    def __init__(self, tokens: Sequence[int] = ()) -> None:
        self.reset()
        if tokens:
            self.extend(tokens)

    def reset(self) -> None:
        self.tokens: list[int] = []
        self._next: list[dict[int, int]] = [{}]
        self._link: list[int] = [-1]
        self._len: list[int] = [0]
        self._first: list[int] = [-1]
        self._last = 0
        self._match_state = 0
        self._match_len = 0

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def num_states(self) -> int:
        """States, the root included (<= 2n - 1 for n >= 2 tokens)."""
        return len(self._len)

    def _new_state(self, length: int, link: int, first: int, nxt: dict[int, int]) -> int:
        self._next.append(nxt)
        self._link.append(link)
        self._len.append(length)
        self._first.append(first)
        return len(self._len) - 1

    def append(self, token: int) -> None:
        """Add one token: advance the match over the text so far, then extend the automaton."""
        token = int(token)
        nxt, link, lens = self._next, self._link, self._len
        # 1. the match: longest suffix of tokens + [token] that occurs in tokens (an earlier one)
        state, length = self._match_state, self._match_len
        while state and token not in nxt[state]:
            state = link[state]
            length = lens[state]
        if token in nxt[state]:
            state, length = nxt[state][token], length + 1
        else:
            state, length = 0, 0
        # 2. the automaton (classic online construction)
        pos = len(self.tokens)
        cur = self._new_state(lens[self._last] + 1, -1, pos, {})
        p = self._last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][token]
            if lens[p] + 1 == lens[q]:
                link[cur] = q
            else:
                clone = self._new_state(lens[p] + 1, link[q], self._first[q], dict(nxt[q]))
                while p != -1 and nxt[p].get(token) == q:
                    nxt[p][token] = clone
                    p = link[p]
                link[q] = link[cur] = clone
                if state == q and length <= lens[clone]:
                    state = clone  # the matched suffix now belongs to the clone's class
        self._last = cur
        self.tokens.append(token)
        self._match_state, self._match_len = state, length

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            self.append(token)

    def sync(self, committed: Sequence[int]) -> None:
        """Append the new tail of `committed`; the text must be a prefix of it (only lengths are compared)."""
        if len(committed) < len(self.tokens):
            raise ValueError(
                f"committed has {len(committed)} tokens but the automaton already holds "
                f"{len(self.tokens)}; call reset() for a new prompt"
            )
        if len(committed) > len(self.tokens):
            self.extend(committed[len(self.tokens) :])

    @property
    def match_length(self) -> int:
        return self._match_len

    @property
    def match_end(self) -> int:
        return self._first[self._match_state] if self._match_state else -1

    def continuation(self, max_len: int, climb: bool = False) -> list[int]:
        """Up to `max_len` tokens after the earliest occurrence of the current match; with `climb`, shorter
        suffixes first while too few tokens follow.
        """
        state = self._match_state
        if not state or max_len <= 0:
            return []
        if climb:
            last = len(self.tokens) - 1
            while self._link[state] != 0 and last - self._first[state] < max_len:
                state = self._link[state]
        start = self._first[state] + 1
        return self.tokens[start : start + max_len]

    def occurs(self, pattern: Sequence[int]) -> bool:
        state = 0
        for token in pattern:
            state = self._next[state].get(int(token), -1)
            if state < 0:
                return False
        return True
