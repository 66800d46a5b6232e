"""REST's datastore: the numpy suffix array against sorting, the binary search's match ranges, the longest
suffix and the continuations (cut at document ends), and the lookup of shipped datastores."""

from __future__ import annotations

import random

import numpy as np

from goose.sources.suffix_array import SEPARATOR, SHIPPED_DIR, TokenDatastore, find_datastore, suffix_array


def test_suffix_array_is_the_sorted_suffixes():
    rng = random.Random(0)
    for n in (1, 2, 7, 50, 300):
        for vocab in (1, 2, 5):
            tokens = [rng.randrange(vocab) for _ in range(n)]
            expected = sorted(range(n), key=lambda i: tokens[i:])
            assert suffix_array(np.asarray(tokens)).tolist() == expected


def test_match_range_counts_every_occurrence():
    rng = random.Random(1)
    tokens = [rng.randrange(3) for _ in range(200)]
    store = TokenDatastore(tokens)
    for query in ([0], [1, 2], [2, 2, 0], [0, 1, 2, 0], [3]):
        lo, hi = store.match_range(query)
        starts = sorted(store.suffixes[lo:hi].tolist())
        n = len(query)
        assert starts == [i for i in range(len(tokens)) if tokens[i : i + n] == query]


def test_retrieve_takes_the_longest_suffix_and_stops_at_document_ends():
    store = TokenDatastore.from_documents([[1, 2, 3, 4, 5], [9, 2, 3, 6], [2, 3, 7, 8]])
    assert store.tokens.tolist() == [1, 2, 3, 4, 5, SEPARATOR, 9, 2, 3, 6, SEPARATOR, 2, 3, 7, 8]
    # [1, 2, 3] occurs once (n = 3 wins over n = 2's three occurrences)
    assert store.retrieve([0, 1, 2, 3], max_span=4, min_span=2, length=3, limit=10) == (3, [[4, 5]])
    n, found = store.retrieve([0, 2, 3], max_span=4, min_span=2, length=2, limit=10)
    assert n == 2 and sorted(found) == [[4, 5], [6], [7, 8]]  # [6] cut at its document's end
    assert store.retrieve([4, 4], 4, 2, 3, 10) == (0, [])  # no suffix of length >= 2 occurs
    assert store.retrieve([0, 2, 3], 4, 2, 2, limit=1)[1] in ([[4, 5]], [[6]], [[7, 8]])  # first `limit` only
    assert store.retrieve([5], 4, 1, 3, 10) == (0, [])  # the match at a document's end has no continuation


def test_save_load_and_the_shipped_datastores(tmp_path):
    store = TokenDatastore.from_documents([[4, 5, 6], [7]])
    store.save(tmp_path / "x.npy")
    again = TokenDatastore.load(tmp_path / "x.npy")
    assert (
        again.tokens.tolist() == store.tokens.tolist() and again.suffixes.tolist() == store.suffixes.tolist()
    )
    assert find_datastore(str(tmp_path / "x.npy")) == tmp_path / "x.npy"
    assert find_datastore("no-such-corpus.no-model") is None
    for model in ("smollm2-135m", "gemma3-270m"):
        path = find_datastore(f"mbpp_nontest.{model}")
        assert path == SHIPPED_DIR / f"mbpp_nontest.{model}.npy"
        assert np.load(path).dtype == np.int32 and (np.load(path) == SEPARATOR).sum() == 473  # 474 documents
