"""Suffix tree: SuffixDecoding's token source (Oliaro et al., arXiv 2411.04975).

Every suffix of each sequence added, cut at `max_depth` tokens, in a path-compressed trie, as the reference
stores it (snowflakedb/ArcticInference). A node's count is the number of suffixes through or ending at it,
i.e. the occurrences of its string; count(w t) / count(w) is the continuation probability, and a drafted
node's probability is the product along its path (the paper's D(N)).

`append` keeps each sequence's active suffixes (the last max_depth starts) and extends each by the token.
An active suffix always ends at the end of a node's edge, so one of four cases applies: A1 grow a count-1
leaf in place; A2 add a leaf; B1 (this suffix alone ends here) the child absorbs the node or the boundary
moves one token down; B2 step into the child, splitting it after its first token. Each is O(1) nodes, so an
append costs O(max_depth); the tests compare against counts from scratch. Eviction of sequences is not
implemented.

`speculate` follows the reference's `SuffixTree::speculate`: for match lengths m = 1, 2, …, draft at most
MAX_SPEC = min(max_spec_tokens, floor(m · max_spec_factor + max_spec_offset)) tokens (the paper's α p), by
best-first expansion on path probability (tree) or the most frequent path; keep the draft with the largest
sum of probabilities (the paper's SCORE), ties to the longer match. Ties the reference leaves unspecified
are broken deterministically (shallower, earlier parent, smaller id). Lengths stop at max_depth − 1 or at
the first absent or uncontinued match.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field


class _Node:
    """A node of the path-compressed tree. Its edge label is ref[start : start + length] (ref is a
    stored sequence); count = suffixes passing through or ending at it; children are keyed by the
    first token of their edge."""

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
    """Depth-limited, path-compressed suffix tree over several token sequences, with counts.

    max_depth  longest suffix kept (tokens); reference default 64
    """

    def __init__(self, max_depth: int = 64) -> None:
        if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1:
            raise ValueError(f"max_depth = {max_depth!r}: must be an integer >= 1")
        self.max_depth = max_depth
        self.root = _Node(0, None, [], 0, 0)
        self._seqs: dict[int, list[int]] = {}
        self._active: dict[int, list[_Node]] = {}  # per sequence, oldest (longest) suffix first

    # ------------------------------------------------------------------ contents
    @property
    def num_tokens(self) -> int:
        """Tokens added over all sequences (the root's count)."""
        return self.root.count

    def sequence_ids(self) -> list[int]:
        """Ids of the sequences held, in the order they were first added to."""
        return list(self._seqs)

    def sequence(self, seq_id: int) -> list[int]:
        """A copy of sequence `seq_id` (empty if it was never added to)."""
        return list(self._seqs.get(seq_id, ()))

    def __len__(self) -> int:
        return self.root.count

    # ------------------------------------------------------------------ incremental update
    def extend(self, seq_id: int, tokens: Iterable[int]) -> None:
        """Append `tokens` to sequence `seq_id` (created on first use)."""
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

    # ------------------------------------------------------------------ queries
    def _walk(self, path: Sequence[int]) -> tuple[_Node, int] | None:
        """(node, offset) where `path` ends (offset = tokens of the node's edge consumed), or None
        if `path` is not in the tree."""
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
        """Occurrences of the token string `path` (len <= max_depth) over all sequences; the empty
        path counts every token added."""
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

    # ------------------------------------------------------------------ speculation
    def _pattern_matches(self, pattern: Sequence[int]) -> Iterator[tuple[int, _Node, int]]:
        """(m, node, offset) for the pattern's last m tokens, m = 1, 2, ..., each walked from the
        root, until one is absent."""
        limit = min(len(pattern), self.max_depth - 1)
        n = len(pattern)
        for m in range(1, limit + 1):
            found = self._walk(pattern[n - m :])
            if found is None:
                return
            yield m, found[0], found[1]

    def _tail_matches(self, seq_id: int) -> Iterator[tuple[int, _Node, int]]:
        """The same for the pattern "the last tokens of sequence seq_id", in O(1) per length: the
        suffix of length m is that sequence's m-th newest active suffix, at a node's end."""
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
        """The best draft continuing `pattern` (see the module docstring); max_spec_tokens None =
        max_depth. Defaults are the reference's, except `tree` (its default is a path)."""
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
        """`speculate(pattern)` for pattern = the tail of sequence `seq_id` itself (a request's own
        tree over its prompt and output), with no walk from the root."""
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
            """Push the candidates that follow position i of nd's edge."""
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
