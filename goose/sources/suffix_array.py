"""REST's datastore (He et al., arXiv 2311.08252, §3.1-3.2): the token ids of a corpus with a suffix array over
them; the longest suffix of the context (n from n_max down to n_min) is found by binary search, and the up to
`limit` occurrences yield the next `length` tokens each. Documents are separated by SEPARATOR (−1), which no
query holds, so matches and continuations stay inside one document (the reference concatenates them).
Token ids depend on the tokenizer: `save`/`load` keep them as one int32 .npy; the suffix array is rebuilt at
load (prefix doubling in numpy, O(n log² n)).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

SEPARATOR = -1
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "rest"  # corpora and token ids in the package


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """Start indices of the suffixes of `tokens` in lexicographic order (a proper prefix sorts first)."""
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.unique(tokens, return_inverse=True)[1].astype(np.int64).reshape(-1)
    order = np.argsort(rank, kind="stable")
    step = 1
    while step < n:
        second = np.full(n, -1, dtype=np.int64)
        second[: n - step] = rank[step:]
        order = np.lexsort((second, rank))
        r, s = rank[order], second[order]
        new_rank = np.empty(n, dtype=np.int64)
        new_rank[order] = np.concatenate(([0], np.cumsum((r[1:] != r[:-1]) | (s[1:] != s[:-1]))))
        rank = new_rank
        if rank[order[-1]] == n - 1:  # all ranks distinct: sorted
            break
        step *= 2
    return order


class TokenDatastore:
    """A corpus' token ids (documents joined by SEPARATOR) and their suffix array."""

    def __init__(self, tokens: Sequence[int] | np.ndarray) -> None:
        self.tokens = np.asarray(tokens, dtype=np.int32).reshape(-1)
        self.suffixes = suffix_array(self.tokens)
        self._ids = self.tokens.tolist()  # Python ints: fast slices for the binary search
        self._order = self.suffixes.tolist()

    @classmethod
    def from_documents(cls, documents: Iterable[Sequence[int]]) -> TokenDatastore:
        joined: list[int] = []
        for doc in documents:
            if joined:
                joined.append(SEPARATOR)
            joined.extend(int(t) for t in doc)
        return cls(joined)

    def save(self, path: str | Path) -> None:
        np.save(Path(path), self.tokens)

    @classmethod
    def load(cls, path: str | Path) -> TokenDatastore:
        return cls(np.load(Path(path)))

    def __len__(self) -> int:
        return len(self._ids)

    def match_range(self, query: Sequence[int]) -> tuple[int, int]:
        """[lo, hi) in the suffix array: the suffixes that start with `query` (empty if none)."""
        q, n, ids, order = list(query), len(query), self._ids, self._order
        lo, hi = 0, len(order)
        while lo < hi:  # first suffix whose n-token window is >= q
            mid = (lo + hi) // 2
            if ids[order[mid] : order[mid] + n] < q:
                lo = mid + 1
            else:
                hi = mid
        start, hi = lo, len(order)
        while lo < hi:  # first suffix whose window is > q
            mid = (lo + hi) // 2
            if ids[order[mid] : order[mid] + n] <= q:
                lo = mid + 1
            else:
                hi = mid
        return start, lo

    def continuations(self, query: Sequence[int], length: int, limit: int) -> list[list[int]]:
        """The next `length` tokens (cut at a document's end) after each of the first `limit` occurrences of
        `query` in suffix-array order; empty continuations are left out."""
        lo, hi = self.match_range(query)
        n, out = len(query), []
        for start in self._order[lo : min(hi, lo + limit)]:
            cont = self._ids[start + n : start + n + length]
            if SEPARATOR in cont:
                cont = cont[: cont.index(SEPARATOR)]
            if cont:
                out.append(cont)
        return out

    def retrieve(
        self, context: Sequence[int], max_span: int, min_span: int, length: int, limit: int
    ) -> tuple[int, list[list[int]]]:
        """REST's retrieval: for n = max_span … min_span, the continuations of the last n context tokens; the
        first n with any wins. Returns (n, continuations), or (0, []) when no suffix of length >= min_span
        occurs."""
        for n in range(min(max_span, len(context)), min_span - 1, -1):
            found = self.continuations(context[-n:], length, limit)
            if found:
                return n, found
        return 0, []


def cache_dir() -> Path:
    """Where built datastores go: $GOOSE_CACHE/rest (default ~/.cache/goose-bench/rest)."""
    root = Path(os.environ.get("GOOSE_CACHE", Path.home() / ".cache" / "goose-bench")).expanduser()
    return root / "rest"


def find_datastore(name: str) -> Path | None:
    """The .npy of datastore `name`: a path to a file, else `<name>.npy` in the shipped folder
    (goose/data/rest/), else in `cache_dir()`; None if none exists."""
    given = Path(name).expanduser()
    if given.suffix == ".npy" and given.is_file():
        return given
    for folder in (SHIPPED_DIR, cache_dir()):
        if (folder / f"{name}.npy").is_file():
            return folder / f"{name}.npy"
    return None


@functools.lru_cache(maxsize=4)
def load_datastore(path: str) -> TokenDatastore:
    """`TokenDatastore.load`, kept for the drafters of one process (a run builds several)."""
    return TokenDatastore.load(path)
