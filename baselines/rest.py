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
from dataclasses import dataclass
from typing import Any

from goose.engine.core.drafter import Drafter
from goose.engine.core.tree import ROOT, SPINE, DraftTree
from goose.method.config import DrafterConfig
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


@dataclass(frozen=True)
class RestConfig(DrafterConfig):
    """REST's hyperparameters: `datastore` (no default: conf/method/rest.yaml names the shipped corpus for the
    run's model), the suffix lengths looked up, and Spec-Bench's and DraftRetriever's sizes (module
    docstring)."""

    owner = "RestDrafter"
    datastore: str
    max_span: int = 16  # longest suffix looked up
    min_span: int = 2  # shortest suffix looked up
    num_draft: int = 64  # draft nodes per step
    length: int = 10  # tokens taken after each occurrence
    max_matches: int = 5000  # occurrences used

    def _validate(self) -> None:
        owner = self.owner_name()
        check_str(f"{owner}.datastore", self.datastore)
        check_int(f"{owner}.max_span", self.max_span, 1, why="longest suffix looked up")
        check_int(
            f"{owner}.min_span", self.min_span, 1, self.max_span, why="shortest suffix looked up, <= max_span"
        )
        check_int(f"{owner}.num_draft", self.num_draft, 1, why="draft nodes per step")
        check_int(f"{owner}.length", self.length, 1, why="tokens taken after each occurrence")
        check_int(f"{owner}.max_matches", self.max_matches, 1, why="occurrences used")
        super()._validate()  # num_draft, by goose.validation.HYPERPARAMETERS


class RestDrafter(Drafter):
    """REST: a draft tree of the heaviest continuations retrieved for the context's longest matching suffix.
    Keyword arguments are `RestConfig`'s fields."""

    config_class = RestConfig
    name = "rest"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=self.name if name is None else name)
        self.cfg = RestConfig(**hyperparameters)
        self.datastore = self.cfg.datastore
        self.max_span = self.cfg.max_span
        self.min_span = self.cfg.min_span
        self.num_draft = self.cfg.num_draft
        self.length = self.cfg.length
        self.max_matches = self.cfg.max_matches
        path = find_datastore(self.datastore)
        if path is None:
            raise ValueError(
                f"RestDrafter.datastore = {self.datastore!r}: no such datastore (a .npy path, or <name>.npy in "
                f"goose/data/rest/ or {cache_dir()}); build one with `python -m experiments.rest_datastore "
                "--model <model>` (conf/method/rest.yaml names <corpus>.<model>)"
            )
        self.store = load_datastore(str(path))

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    def propose(self, committed: list[int]) -> DraftTree:
        span, found = self.store.retrieve(
            committed, self.max_span, self.min_span, self.length, self.max_matches
        )
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
