"""Suffix automaton: SAM-Decoding's token source (Hu et al., arXiv 2411.10666, "dynamic SAM").

The automaton indexes the prompt plus every committed token of one prompt and is extended online,
one token at a time, by the classic construction (Blumer et al. 1985; amortised O(1) states and
transitions per appended token, at most 2n - 1 states for n >= 2 tokens). Each state is one
endpos-equivalence class of substrings: `length` is the longest string of the class, `link` the
suffix link (the class of the longest suffix with a different end-position set), and `first` the
end position (0-based index of the last token) of the class's *first* occurrence.

The match. Alongside the automaton we keep the longest suffix of the text that also occurs
*earlier*, i.e. ending before the last token (its length `match_length` and its state). It is
advanced incrementally, as matching statistics are: before token t joins the automaton, follow
t's transition from the current match state, climbing suffix links until one exists; then t is
added. Matching against the text without t is what makes every occurrence found an earlier one
(it has at least one token after it: t at the latest). The climb is amortised O(1) per token (the
length grows by at most 1 per token and every climb step shortens it), so neither the update nor
the lookup rescans the history.

Which occurrence. `first` of the match state is the *earliest* end position of the matched
suffix: SAM-Decoding's draft is the text after the earliest occurrence (its code keeps exactly
this field, `min_endpos`, per state). It is also what the online construction maintains for free:
a new state's first end is the new position, a clone inherits the first end of the state it was
split from, and nothing changes afterwards. The latest end position, by contrast, changes for
every state on the suffix-link path of the text at every append (not O(1)). The earliest
occurrence also has the most text after it, so it can feed the longest drafts, and it is the
choice PLD and Goose's context matcher make in this harness.

`continuation(max_len, climb=True)` is the draft. With `climb` (SAM-Decoding's code, `to_anc`),
when fewer than max_len tokens follow the earliest occurrence of the longest match, it moves up
suffix links (shorter suffixes of the match, whose earliest occurrence can only be earlier) while
the parent is not the root, and copies from the first state that has max_len tokens after it (or
from the last one reached). The climb visits at most match_length states.

No torch; the drafter is baselines/sam.py.
"""

from __future__ import annotations

from collections.abc import Sequence


class SuffixAutomaton:
    """Online suffix automaton over one token sequence, with an incrementally advanced longest
    earlier-occurring suffix match.

    tokens        the indexed text (prompt + committed tokens)
    match_length  length of the longest suffix of `tokens` that occurs ending before the last token
                  (0: none, including the empty text and a one-token text)
    match_end     end position (0-based) of that suffix's earliest occurrence, -1 when none
    """

    __slots__ = ("tokens", "_next", "_link", "_len", "_first", "_last", "_match_state", "_match_len")

    def __init__(self, tokens: Sequence[int] = ()) -> None:
        self.reset()
        if tokens:
            self.extend(tokens)

    # ------------------------------------------------------------------ construction
    def reset(self) -> None:
        """Forget the text (a new prompt): only the root state remains."""
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
        """Append tokens one by one."""
        for token in tokens:
            self.append(token)

    def sync(self, committed: Sequence[int]) -> None:
        """Bring the text up to `committed` (prompt + generated), appending only the new tail.

        The text must be a prefix of `committed` (the decode loop only ever appends); only the
        lengths are compared, so this costs nothing beyond the new tokens."""
        if len(committed) < len(self.tokens):
            raise ValueError(
                f"committed has {len(committed)} tokens but the automaton already holds "
                f"{len(self.tokens)}; call reset() for a new prompt"
            )
        if len(committed) > len(self.tokens):
            self.extend(committed[len(self.tokens) :])

    # ------------------------------------------------------------------ queries
    @property
    def match_length(self) -> int:
        return self._match_len

    @property
    def match_end(self) -> int:
        return self._first[self._match_state] if self._match_state else -1

    def continuation(self, max_len: int, climb: bool = False) -> list[int]:
        """Up to `max_len` tokens that followed the earliest occurrence of the current match
        (empty when there is no match). With `climb`, move up suffix links first while fewer than
        `max_len` tokens follow and the parent is not the root (see the module docstring)."""
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
        """Whether `pattern` is a substring of the text (a walk from the root; for tests)."""
        state = 0
        for token in pattern:
            state = self._next[state].get(int(token), -1)
            if state < 0:
                return False
        return True
