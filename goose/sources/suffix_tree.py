"""Suffix tree: SuffixDecoding's token source (Oliaro et al., arXiv 2411.04975).

Every suffix of each sequence, cut at `max_depth`, in a path-compressed trie with counts (occurrences), as
the reference stores it (snowflakedb/ArcticInference); count(w t) / count(w) is the continuation
probability, and a draft node's probability is the product along its path (the paper's D(N)). `append`
extends each active suffix by the token in O(1) nodes (cases A1, A2, B1, B2 below), so an append costs
O(max_depth); tests compare against counts from scratch. `speculate` follows the reference: for match
lengths m = 1, 2, … draft up to MAX_SPEC = min(max_spec_tokens, floor(m · max_spec_factor +
max_spec_offset)) tokens and keep the draft of largest SCORE (sum of D(N)), ties to the longer match;
unspecified ties are broken deterministically.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field


class _Node:
    """A path-compressed node: edge label ref[start : start + length], count of suffixes through it, children
    keyed by their edge's first token.
    """

    __slots__ = ("count", "children", "parent", "ref", "start", "length")

    def __init__(self, count: int, parent: _Node | None, ref: list[int], start: int, length: int) -> None:
        self.count = count
        self.children: dict[int, _Node] = {}
        self.parent = parent
        self.ref = ref
        self.start = start
        self.length = length


@dataclass
class SuffixDraft:
    """One speculation: `tokens` best first (parents first), `parents` (−1: the anchor), `probs` (D(N)),
    `score` (their sum) and `match_len` (0: no draft).
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    score: float = 0.0
    match_len: int = 0


class SuffixTree:
    """Depth-limited, path-compressed suffix tree over several token sequences, with counts."""

    def __init__(self, max_depth: int = 64) -> None:
        if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1:
            raise ValueError(f"max_depth = {max_depth!r}: must be an integer >= 1")
        self.max_depth = max_depth
        self.root = _Node(0, None, [], 0, 0)
        self._seqs: dict[int, list[int]] = {}
        self._active: dict[int, list[_Node]] = {}  # per sequence, oldest (longest) suffix first

    @property
    def num_tokens(self) -> int:
        return self.root.count

    def sequence_ids(self) -> list[int]:
        return list(self._seqs)

    def sequence(self, seq_id: int) -> list[int]:
        return list(self._seqs.get(seq_id, ()))

    def __len__(self) -> int:
        return self.root.count

    def extend(self, seq_id: int, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.append(seq_id, token)

    def append(self, seq_id: int, token: int) -> None:
        """Append one token to sequence `seq_id`: O(max_depth) (see the module docstring)."""
        token = int(token)
        seq = self._seqs.get(seq_id)
        if seq is None:
            seq = self._seqs[seq_id] = []
            self._active[seq_id] = []
        active = self._active[seq_id]
        root = self.root
        active.append(root)  # the suffix that starts at the new token
        root.count += 1
        if len(active) > self.max_depth:
            del active[0]  # the oldest suffix has reached max_depth tokens: it ends where it is
        seq.append(token)
        pos = len(seq) - 1
        for i in range(len(active)):
            node = active[i]
            child = node.children.get(token)
            if child is None:
                if node.count == 1 and node is not root:  # A1: grow the leaf in place
                    node.length += 1
                else:  # A2: a new leaf
                    leaf = _Node(1, node, seq, pos, 1)
                    node.children[token] = leaf
                    active[i] = leaf
            elif node is not root and node.count == child.count + 1:
                if child.length == 1:  # B1: the child absorbs this node
                    parent = node.parent
                    child.count += 1
                    child.length = node.length + 1
                    child.ref, child.start = seq, pos - node.length
                    child.parent = parent
                    parent.children[seq[child.start]] = child  # type: ignore[union-attr]
                    active[i] = child
                else:  # B1: move the boundary one token down
                    node.length += 1
                    node.ref, node.start = seq, pos - node.length + 1
                    del node.children[token]
                    child.start += 1
                    child.length -= 1
                    node.children[child.ref[child.start]] = child
            elif child.length == 1:  # B2: into the child
                child.count += 1
                child.ref, child.start = seq, pos
                active[i] = child
            else:  # B2: split the child after its first token
                mid = _Node(child.count + 1, node, seq, pos, 1)
                node.children[token] = mid
                child.start += 1
                child.length -= 1
                child.parent = mid
                mid.children[child.ref[child.start]] = child
                active[i] = mid

    def _walk(self, path: Sequence[int]) -> tuple[_Node, int] | None:
        """(node, offset into its edge) where `path` ends, or None."""
        node, idx = self.root, 0
        for t in path:
            if idx == node.length:
                child = node.children.get(t)
                if child is None:
                    return None
                node, idx = child, 1  # the key is the edge's first token
                continue
            if node.ref[node.start + idx] != t:
                return None
            idx += 1
        return node, idx

    def count(self, path: Sequence[int]) -> int:
        """Occurrences of `path` over all sequences (the empty path: every token)."""
        found = self._walk(path)
        return found[0].count if found else 0

    def next_counts(self, path: Sequence[int]) -> dict[int, int]:
        """{token: count(path + [token])} for the tokens that followed `path` somewhere."""
        found = self._walk(path)
        if found is None:
            return {}
        node, idx = found
        if idx < node.length:
            return {node.ref[node.start + idx]: node.count}
        return {t: c.count for t, c in node.children.items()}

    def substring_counts(self) -> dict[tuple[int, ...], int]:
        """{w: count(w)} for every non-empty string in the tree (test aid)."""
        out: dict[tuple[int, ...], int] = {}
        stack: list[tuple[_Node, tuple[int, ...]]] = [(c, ()) for c in self.root.children.values()]
        while stack:
            node, prefix = stack.pop()
            for k in range(node.length):
                prefix = (*prefix, node.ref[node.start + k])
                out[prefix] = node.count
            stack.extend((c, prefix) for c in node.children.values())
        return out

    def check_integrity(self) -> None:
        """Raise AssertionError unless the structure is consistent (test aid): edges, parent links, counts,
        depth and active suffixes.
        """
        stack = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            assert sum(c.count for c in node.children.values()) <= node.count
            assert depth <= self.max_depth
            for key, child in node.children.items():
                assert child.parent is node and child.length >= 1 and child.count >= 1
                assert child.ref[child.start] == key
                assert child.start + child.length <= len(child.ref)
                assert child.count < node.count or node is self.root
                stack.append((child, depth + child.length))
        for seq_id, active in self._active.items():
            seq = self._seqs[seq_id]
            assert len(active) == min(len(seq), self.max_depth)
            for m, node in enumerate(reversed(active), start=1):
                assert self._walk(seq[-m:]) == (node, node.length)

    def _pattern_matches(self, pattern: Sequence[int]) -> Iterator[tuple[int, _Node, int]]:
        """(m, node, offset) for the pattern's last m tokens, m = 1, 2, …, until one is absent."""
        limit = min(len(pattern), self.max_depth - 1)
        n = len(pattern)
        for m in range(1, limit + 1):
            found = self._walk(pattern[n - m :])
            if found is None:
                return
            yield m, found[0], found[1]

    def _tail_matches(self, seq_id: int) -> Iterator[tuple[int, _Node, int]]:
        """The same for a sequence's own tail in O(1) per length, via its active suffixes."""
        active = self._active.get(seq_id, [])
        limit = min(len(active), self.max_depth - 1)
        for m in range(1, limit + 1):
            node = active[-m]
            yield m, node, node.length

    def speculate(
        self,
        pattern: Sequence[int],
        max_spec_tokens: int | None = None,
        max_spec_factor: float = 1.0,
        max_spec_offset: float = 0.0,
        min_token_prob: float = 0.1,
        tree: bool = True,
    ) -> SuffixDraft:
        """The best draft continuing `pattern`; defaults are the reference's except `tree`."""
        return self._best(
            self._pattern_matches(pattern),
            max_spec_tokens,
            max_spec_factor,
            max_spec_offset,
            min_token_prob,
            tree,
        )

    def speculate_tail(
        self,
        seq_id: int,
        max_spec_tokens: int | None = None,
        max_spec_factor: float = 1.0,
        max_spec_offset: float = 0.0,
        min_token_prob: float = 0.1,
        tree: bool = True,
    ) -> SuffixDraft:
        """`speculate` on sequence `seq_id`'s own tail, with no walk from the root."""
        return self._best(
            self._tail_matches(seq_id),
            max_spec_tokens,
            max_spec_factor,
            max_spec_offset,
            min_token_prob,
            tree,
        )

    def _best(
        self,
        matches: Iterator[tuple[int, _Node, int]],
        max_spec_tokens: int | None,
        max_spec_factor: float,
        max_spec_offset: float,
        min_token_prob: float,
        tree: bool,
    ) -> SuffixDraft:
        cap = self.max_depth if max_spec_tokens is None else max_spec_tokens
        best = SuffixDraft()
        for m, node, idx in matches:
            if idx == node.length and not node.children:
                break  # no continuation, and none for any longer match
            # + 1e-6 as the reference, so that e.g. 3 * (1/3) counts as 1
            limit = max(0, min(cap, int(m * max_spec_factor + max_spec_offset + 1e-6)))
            if limit == 0:
                continue
            draft = (self._draft_tree if tree else self._draft_path)(node, idx, limit, min_token_prob)
            if draft.score >= best.score:  # ties: the longer match
                best = draft
                best.match_len = m
        return best

    @staticmethod
    def _draft_tree(node: _Node, idx: int, limit: int, min_prob: float) -> SuffixDraft:
        """Best-first expansion from (node, idx): up to `limit` tokens by path probability."""
        draft = SuffixDraft()
        tokens, parents, probs = draft.tokens, draft.parents, draft.probs
        # heap items: (-prob, depth, parent index, token, node, offset of the token in node's edge)
        heap: list[tuple[float, int, int, int, _Node, int]] = []

        def push_next(nd: _Node, i: int, prob: float, depth: int, parent: int) -> None:
            if i < nd.length:  # inside an edge: the one continuation, same probability
                heapq.heappush(heap, (-prob, depth, parent, nd.ref[nd.start + i], nd, i))
                return
            total = nd.count
            for t, child in nd.children.items():
                p = prob * child.count / total
                if p >= min_prob:
                    heapq.heappush(heap, (-p, depth, parent, t, child, 0))

        push_next(node, idx, 1.0, 1, -1)
        while heap and len(tokens) < limit:
            neg, depth, parent, token, nd, i = heapq.heappop(heap)
            tokens.append(token)
            parents.append(parent)
            probs.append(-neg)
            push_next(nd, i + 1, -neg, depth + 1, len(tokens) - 1)
        draft.score = sum(probs)
        return draft

    @staticmethod
    def _draft_path(node: _Node, idx: int, limit: int, min_prob: float) -> SuffixDraft:
        """The most frequent continuation, one token at a time, while its probability >= min_prob."""
        draft = SuffixDraft()
        prob = 1.0
        while len(draft.tokens) < limit:
            if idx < node.length:
                token = node.ref[node.start + idx]
                idx += 1
            else:
                if not node.children:
                    break
                token, child = max(node.children.items(), key=lambda kv: (kv[1].count, -kv[0]))
                prob = prob * child.count / node.count
                if prob < min_prob:
                    break
                node, idx = child, 1
            draft.parents.append(len(draft.tokens) - 1)
            draft.tokens.append(token)
            draft.probs.append(prob)
        draft.score = sum(draft.probs)
        return draft
