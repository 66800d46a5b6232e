"""REST: the trie of retrieved continuations (hand-computed), the drafter's tree from a tiny hand-made
datastore, the checks of its settings, and identity with AR on a tiny random model, greedy and sampled."""

from __future__ import annotations

import random

import pytest
import torch

from baselines.rest import RestDrafter, top_prefixes
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import ROOT, SPINE
from goose.engine.forward.choose import verification_engine
from goose.sources.suffix_array import TokenDatastore
from tests.tiny_models import ARCHS, tiny_model

DOCS = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 7], [9, 2, 3, 4, 5]]


@pytest.fixture
def tiny_store(tmp_path) -> str:
    path = tmp_path / "tiny.npy"
    TokenDatastore.from_documents(DOCS).save(path)
    return str(path)


def test_top_prefixes_weights_every_prefix_by_its_continuations():
    conts = [[4, 5], [4, 6], [7], [4, 5]]
    # counts: (4,) 3, (4, 5) 2, (4, 6) 1, (7,) 1; the tie at 1 goes to the shorter prefix
    assert top_prefixes(conts, 3) == [(4,), (4, 5), (7,)]
    assert top_prefixes(conts, 10) == [(4,), (4, 5), (7,), (4, 6)]
    assert top_prefixes([[8, 9, 10], [8, 9, 11]], 2) == [(8,), (8, 9)]  # ancestor-closed at any cut


def test_tree_from_a_tiny_datastore(tiny_store):
    d = RestDrafter(datastore=tiny_store, max_span=3, min_span=2, num_draft=3, length=2)
    d.begin([8], torch.zeros(1, 4))
    # [8, 2, 3]: no 3-token match; [2, 3] occurs 4 times -> [4, 5], [4, 6], [7], [4, 5]
    tree = d.propose([8, 2, 3])
    tree.validate()
    assert tree.tokens == [3, 4, 5, 7] and tree.parents == [-1, 0, 1, 0]
    assert tree.sources == [ROOT, SPINE, SPINE, SPINE] and d.route == "retrieval"
    # [1, 2, 3] occurs 3 times: the longest suffix wins -> [4, 5], [4, 6], [7]
    tree = RestDrafter(datastore=tiny_store, max_span=3, min_span=2, length=2).propose([0, 1, 2, 3])
    assert tree.tokens == [3, 4, 7, 5, 6] and tree.parents == [-1, 0, 0, 1, 1]
    no_match = RestDrafter(datastore=tiny_store).propose([5, 5, 5])
    assert len(no_match) == 1


def test_settings_are_checked(tiny_store):
    with pytest.raises(ValueError, match=r"RestDrafter.min_span = 5: must be an integer in \[1, 3\]"):
        RestDrafter(datastore=tiny_store, max_span=3, min_span=5)
    with pytest.raises(ValueError, match="RestDrafter.datastore = 'nowhere': no such datastore"):
        RestDrafter(datastore="nowhere")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_identical_to_ar(arch, temperature, tmp_path):
    """The datastore holds AR's continuation with every fifth token changed, and random documents: drafts are
    partly right, and the output is AR's (greedy) or AR's sample with the same seed (T = 0.7)."""
    model = tiny_model(arch, seed=2)
    prompt = [3, 5, 7, 9, 11, 13, 2, 4]
    sampling = SamplingParams(temperature=temperature)

    def run(drafter):
        engine = verification_engine(model, eos_token_ids=(), context_length=256)
        return generate(engine, drafter, prompt, 48, sampling=sampling, seed=5)

    ar = run(ARDrafter())
    rng = random.Random(0)
    noisy = [rng.randrange(96) if i % 5 == 4 else t for i, t in enumerate(prompt + ar.output_ids)]
    docs = [noisy] + [[rng.randrange(96) for _ in range(40)] for _ in range(5)]
    path = tmp_path / "store.npy"
    TokenDatastore.from_documents(docs).save(path)
    rest = run(RestDrafter(datastore=str(path), num_draft=16))
    assert rest.output_ids == ar.output_ids
    assert 0 < rest.totals("accepted")["spine"] < len(ar.output_ids) - 1  # partly right drafts
