"""REST, retrieval-based speculative decoding (He et al., arXiv 2311.08252, §3; Spec-Bench's `rest`): the last
n committed tokens (n = 16 … 2, the longest that occurs wins) are looked up in a datastore's suffix array
(goose.sources.suffix_array); the next 10 tokens after each of up to 5000 occurrences are merged into a trie
weighted by how many continuations pass through each node, and the 64 heaviest nodes form the draft tree
(§3.2). Defaults: Spec-Bench's runner (num_draft 64, max_token_span 16) and DraftRetriever's search (k 5000,
long 10). Ties are broken shorter prefix first, then first retrieved, so the tree is always ancestor-closed.
With no match the step is AR (the reference drafts one fixed token). Nodes are SPINE (matched text).

`datastore` names the corpus' token ids for the model's tokenizer: a .npy path, or a name looked up in
goose/data/rest/ (shipped) and $GOOSE_CACHE/rest/ (`python -m experiments.rest_datastore --model M` builds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goose.engine.core.drafter import Drafter
from goose.engine.core.tree import ROOT, SPINE, DraftTree
from goose.sources.suffix_array import cache_dir, find_datastore, load_datastore
from goose.validation import check_int, check_str


def top_prefixes(continuations: Sequence[Sequence[int]], num_draft: int) -> list[tuple[int, ...]]:
    """REST's pruned trie: every prefix of every continuation weighted by the continuations through it, the
    `num_draft` heaviest kept (ties: shorter first, then first seen); parents come before their children."""
    counts: dict[tuple[int, ...], int] = {}
    for cont in continuations:
        for depth in range(1, len(cont) + 1):
            prefix = tuple(cont[:depth])
            counts[prefix] = counts.get(prefix, 0) + 1
    seen = {prefix: i for i, prefix in enumerate(counts)}
    ranked = sorted(counts, key=lambda p: (-counts[p], len(p), seen[p]))
    return ranked[:num_draft]


class RestDrafter(Drafter):
    """REST: a draft tree of the heaviest continuations retrieved for the context's longest matching suffix."""

    def __init__(
        self,
        datastore: str,
        max_span: int = 16,
        min_span: int = 2,
        num_draft: int = 64,
        length: int = 10,
        max_matches: int = 5000,
        name: str = "rest",
    ) -> None:
        super().__init__(name=name)
        self.datastore = check_str("RestDrafter.datastore", datastore)
        self.max_span = check_int("RestDrafter.max_span", max_span, 1, why="longest suffix looked up")
        self.min_span = check_int(
            "RestDrafter.min_span", min_span, 1, self.max_span, why="shortest suffix looked up, <= max_span"
        )
        self.num_draft = check_int("RestDrafter.num_draft", num_draft, 1, why="draft nodes per step")
        self.length = check_int("RestDrafter.length", length, 1, why="tokens taken after each occurrence")
        self.max_matches = check_int("RestDrafter.max_matches", max_matches, 1, why="occurrences used")
        path = find_datastore(self.datastore)
        if path is None:
            raise ValueError(
                f"RestDrafter.datastore = {datastore!r}: no such datastore (a .npy path, or <name>.npy in "
                f"goose/data/rest/ or {cache_dir()}); build one with `python -m experiments.rest_datastore "
                "--model <model>` (conf/method/rest.yaml names <corpus>.<model>)"
            )
        self.store = load_datastore(str(path))

    def config(self) -> dict[str, Any]:
        return {
            "datastore": self.datastore,
            "max_span": self.max_span,
            "min_span": self.min_span,
            "num_draft": self.num_draft,
            "length": self.length,
            "max_matches": self.max_matches,
        }

    def propose(self, committed: list[int]) -> DraftTree:
        span, found = self.store.retrieve(committed, self.max_span, self.min_span, self.length, self.max_matches)
        if not found:
            self.route = "ar"
            return DraftTree.single(committed[-1])
        self.route = "retrieval"
        self.count("rest_span", span)
        tree = DraftTree([committed[-1]], [-1], [ROOT], [0])
        node_of: dict[tuple[int, ...], int] = {(): 0}
        for prefix in top_prefixes(found, self.num_draft):
            node_of[prefix] = tree.add(prefix[-1], node_of[prefix[:-1]], SPINE)
        return tree
