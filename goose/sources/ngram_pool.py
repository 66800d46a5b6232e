"""Lookahead decoding's n-gram pool (Fu et al., arXiv 2402.02057, §3.1-3.2): per first token, the (N − 1)-token
continuations collected from the Jacobi trajectory, at most G of them; the verification branch drafts the
continuations of the anchor. As the reference (LookaheadDecoding `lade/decoding.py`): re-adding a stored
n-gram moves it to the newest place, and a full list drops its oldest entry.
"""

from __future__ import annotations


class NgramPool:
    """n-grams keyed by their first token: `add(key, gram)`, `get(key)` (oldest first), at most `capacity` per key."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"NgramPool capacity = {capacity}: must be >= 1")
        self.capacity = capacity
        self._grams: dict[int, list[tuple[int, ...]]] = {}

    def add(self, key: int, gram: tuple[int, ...]) -> None:
        grams = self._grams.setdefault(key, [])
        if gram in grams:
            grams.remove(gram)
        elif len(grams) >= self.capacity:
            del grams[0]
        grams.append(gram)

    def get(self, key: int) -> list[tuple[int, ...]]:
        return list(self._grams.get(key, ()))

    def clear(self) -> None:
        self._grams.clear()

    def __len__(self) -> int:
        """The number of stored n-grams."""
        return sum(len(g) for g in self._grams.values())

    def as_dict(self) -> dict[int, list[tuple[int, ...]]]:
        """A copy of the pool: key -> its n-grams, oldest first."""
        return {k: list(v) for k, v in self._grams.items()}
