"""Fuzzing the tree builders and the walk (hypothesis, derandomized so CI is reproducible).

- Builders (Goose spine tree, iso, eagle2, Token Recycling) on random adjacency tables and random
  chains: `tree.validate()`, the node budget, the depth bounds, every drafted token a successor of
  its parent in the table, and each builder's own rule (spine = chain prefix, BFS completeness,
  value-ranked cut, rank-path template).
- The walk: `greedy_walk` equals a brute-force longest matching path; the engine's accepted tokens
  equal sequential greedy decoding on a random tiny model, for random trees and for whole
  generations with every drafter.
"""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baselines.eagle2 import Eagle2Drafter
from baselines.isotropic import IsotropicDrafter
from baselines.token_recycling import TR_LEVEL_SIZES, TR_TEMPLATE, fill_template
from goose.engine.core.decode import generate
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.engine.core.walk import greedy_walk
from goose.engine.forward.choose import verification_engine
from goose.harness.config_schema import register
from goose.method.confidence import spine_length
from goose.method.spine_tree import branch_shares, build_spine_tree, harmonic_split
from goose.sources.adjacency import AdjacencyTable
from tests.conftest import ROOT as REPO
from tests.tiny_models import VOCAB, sequential_greedy, tiny_model
from tests.toy_harness import one_thread  # noqa: F401

FAST = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
MODEL = settings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


def random_table(seed: int, vocab: int, k: int, use_bigram: bool, use_scores: bool = True, fill: float = 0.7):
    """A table with about `fill` of the tokens seen (some through the bigram tier), random logits
    with a random temperature so that scores range from flat to peaked."""
    gen = torch.Generator().manual_seed(seed)
    table = AdjacencyTable(vocab, k, use_scores=use_scores, use_bigram=use_bigram)
    n = max(1, int(vocab * fill))
    tokens = torch.randperm(vocab, generator=gen)[:n]
    temp = float(torch.empty(1).uniform_(0.3, 6.0, generator=gen))
    prev = torch.randint(-1, vocab, (n,), generator=gen)
    table.update(tokens, torch.randn(n, vocab, generator=gen) * temp, prev if use_bigram else None)
    if use_bigram:  # a few more bigram rows for tokens that also have a unigram row
        table.update(
            tokens[: n // 2],
            torch.randn(n // 2, vocab, generator=gen) * temp,
            torch.roll(tokens[: n // 2], 1),
        )
    return table


def prev_of(tree: DraftTree, node: int, prev: int | None) -> int | None:
    """The bigram predecessor a builder uses for `node`'s successors."""
    return prev if node == 0 else tree.tokens[tree.parents[node]]


def assert_successors(
    tree: DraftTree, table: AdjacencyTable, prev: int | None, min_score: float, nodes
) -> None:
    """Each of `nodes` is a successor of its parent's token in the table, scoring >= min_score."""
    for i in nodes:
        p = tree.parents[i]
        ids, scores = table.successors(tree.tokens[p], prev_of(tree, p, prev))
        assert tree.tokens[i] in ids, f"node {i}: token {tree.tokens[i]} not a successor of node {p}"
        assert scores[ids.index(tree.tokens[i])] >= min_score


common = dict(
    seed=st.integers(0, 10_000),
    vocab=st.integers(4, 40),
    k=st.integers(1, 12),
    use_bigram=st.booleans(),
    budget=st.integers(2, 120),
    max_depth=st.integers(1, 8),
    min_score=st.sampled_from([0.0, 0.01, 0.05, 0.2]),
)


# ------------------------------------------------------------------ Goose spine tree
@FAST
@given(
    **common,
    chain_len=st.integers(0, 40),
    ratio=st.floats(0.0, 1.0),
    rho=st.floats(0.0, 1.0),
)
def test_goose_spine_tree_invariants(
    seed, vocab, k, use_bigram, budget, max_depth, min_score, chain_len, ratio, rho
):
    table = random_table(seed, vocab, k, use_bigram)
    gen = torch.Generator().manual_seed(seed + 1)
    anchor, prev = (int(x) for x in torch.randint(0, vocab, (2,), generator=gen))
    chain = torch.randint(0, vocab, (chain_len,), generator=gen).tolist()
    tree = build_spine_tree(
        table,
        anchor,
        prev,
        chain,
        budget=budget,
        ratio=ratio,
        rho=rho,
        max_depth=max_depth,
        k=k,
        min_score=min_score,
    )
    tree.validate()
    assert len(tree) <= budget and tree.tokens[0] == anchor and tree.sources[0] == ROOT
    L = spine_length(len(chain), budget, ratio)
    assert tree.sources[1 : L + 1] == [SPINE] * L and tree.tokens[1 : L + 1] == chain[:L]
    assert tree.parents[1 : L + 1] == list(range(L)) and SPINE not in tree.sources[L + 1 :]
    branches = [i for i in range(1, len(tree)) if tree.sources[i] == BRANCH]
    assert_successors(tree, table, prev, min_score, branches)
    children = tree.children()
    root_share, spine_share = branch_shares(budget, L, rho)
    assert sum(1 for c in children[0] if tree.sources[c] == BRANCH) <= root_share
    for i, share in enumerate(harmonic_split(spine_share, L), start=1):
        assert sum(1 for c in children[i] if tree.sources[c] == BRANCH) <= share
    for i in branches:
        if tree.sources[tree.parents[i]] == BRANCH:  # breadth-first extension: depth and width bounds
            assert tree.depths[i] <= max_depth
    for i in branches:
        assert len(children[i]) <= max(1, k // tree.depths[i])


# ------------------------------------------------------------------ isotropic
@FAST
@given(**common, branching=st.integers(1, 6))
def test_iso_tree_invariants(seed, vocab, k, use_bigram, budget, max_depth, min_score, branching):
    table = random_table(seed, vocab, k, use_bigram)
    d = IsotropicDrafter(
        branching=branching,
        max_depth=max_depth,
        budget=budget,
        k=k,
        min_score=min_score,
        use_bigram=use_bigram,
        prefill_harvest=False,
    )
    d.table = table
    anchor, prev = seed % vocab, (seed // 7) % vocab
    tree = d.build_tree(anchor, prev, budget)
    tree.validate()
    assert len(tree) <= budget and max(tree.depths) <= max_depth
    assert set(tree.sources[1:]) <= {BRANCH}
    children = tree.children()
    for node in range(len(tree)):
        ids, _ = table.successors(
            tree.tokens[node], prev_of(tree, node, prev) if use_bigram else None, min_score
        )
        got = [tree.tokens[c] for c in children[node]]
        assert got == ids[: len(got)] and len(got) <= branching  # the top successors, in order
        if len(tree) < budget and tree.depths[node] < max_depth:  # budget left: fully expanded
            assert len(got) == min(branching, len(ids))


# ------------------------------------------------------------------ EAGLE-2-style
@FAST
@given(**common, topk=st.integers(1, 8))
def test_eagle2_tree_invariants(seed, vocab, k, use_bigram, budget, max_depth, min_score, topk):
    table = random_table(seed, vocab, k, use_bigram)
    d = Eagle2Drafter(
        budget=budget,
        max_depth=max_depth,
        topk=topk,
        k=k,
        min_score=min_score,
        use_bigram=use_bigram,
        prefill_harvest=False,
    )
    d.table = table
    committed = [(seed // 7) % vocab, seed % vocab]
    tree = d.propose(committed)
    tree.validate()
    assert len(tree) <= budget and max(tree.depths) <= max_depth
    assert_successors(tree, table, committed[0] if use_bigram else None, min_score, range(1, len(tree)))
    if len(tree) > 1:  # the kept nodes are the most valuable candidates
        tokens, parents, values = d.expand(committed[-1], committed[0])

        def path_key(i):
            out = []
            while i > 0:
                out.append(tokens[i])
                i = parents[i]
            return tuple(out[::-1])

        def tree_key(i):
            out = []
            while i > 0:
                out.append(tree.tokens[i])
                i = tree.parents[i]
            return tuple(out[::-1])

        kept = {tree_key(i) for i in range(1, len(tree))}
        kept_values = [values[i] for i in range(1, len(tokens)) if path_key(i) in kept]
        dropped_values = [values[i] for i in range(1, len(tokens)) if path_key(i) not in kept]
        assert len(kept_values) == len(tree) - 1
        if dropped_values:
            assert min(kept_values) >= max(dropped_values)


# ------------------------------------------------------------------ Token Recycling
@FAST
@given(seed=st.integers(0, 10_000), vocab=st.integers(8, 40), fill=st.floats(0.05, 1.0))
def test_tr_template_invariants(seed, vocab, fill):
    table = random_table(seed, vocab, 8, use_bigram=False, use_scores=False, fill=fill)
    anchor = seed % vocab
    tree = fill_template(anchor, table, TR_TEMPLATE)
    tree.validate()
    assert len(tree) <= 1 + len(TR_TEMPLATE) and max(tree.depths) <= len(TR_LEVEL_SIZES)
    levels = [tree.depths.count(d) for d in range(1, len(TR_LEVEL_SIZES) + 1)]
    assert all(n <= size for n, size in zip(levels, TR_LEVEL_SIZES, strict=True))
    children = tree.children()
    for node in range(len(tree)):
        ids, _ = table.successors(tree.tokens[node])
        got = [tree.tokens[c] for c in children[node]]
        assert set(got) <= set(ids)
    if fill == 1.0:  # every token has a row of 8 distinct successors: the whole template is filled
        assert levels == list(TR_LEVEL_SIZES)


# ------------------------------------------------------------------ the walk
def brute_force_walk(tree: DraftTree, predictions: list[int]) -> list[int]:
    """The deepest node all of whose edges match their parent's prediction (ties between equal
    siblings: a SPINE one first, then the earlier one), and its path."""

    def matched_path(i):
        path = []
        while i > 0:
            p = tree.parents[i]
            if tree.tokens[i] != predictions[p]:
                return None
            rivals = [
                c for c in range(1, len(tree)) if tree.parents[c] == p and tree.tokens[c] == tree.tokens[i]
            ]
            best = next((c for c in rivals if tree.sources[c] == SPINE), rivals[0])
            if best != i:
                return None
            path.append(i)
            i = p
        return [0, *path[::-1]]

    paths = [p for i in range(len(tree)) if (p := matched_path(i)) is not None]
    return max(paths, key=len)


@st.composite
def trees_and_predictions(draw):
    vocab = draw(st.integers(2, 6))  # a small vocabulary: many matches and duplicate tokens
    n = draw(st.integers(1, 40))
    tree = DraftTree.single(draw(st.integers(0, vocab - 1)))
    for _ in range(n - 1):
        parent = draw(st.integers(0, len(tree) - 1))
        tree.add(draw(st.integers(0, vocab - 1)), parent, draw(st.sampled_from([SPINE, BRANCH])))
    predictions = [draw(st.integers(0, vocab - 1)) for _ in range(len(tree))]
    return tree, predictions


@settings(max_examples=300, deadline=None, derandomize=True)
@given(trees_and_predictions())
def test_greedy_walk_is_the_longest_matching_path(case):
    tree, predictions = case
    assert greedy_walk(tree, predictions) == brute_force_walk(tree, predictions)


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", seed=11)


@MODEL
@given(seed=st.integers(0, 10_000), n_extra=st.integers(0, 30), plant=st.integers(0, 6))
def test_engine_accepts_exactly_the_greedy_tokens(model, seed, n_extra, plant):
    """A random tree with the greedy continuation planted to depth `plant` (behind random decoys):
    the committed tokens are the greedy continuation, at least plant + 1 of them."""
    gen = torch.Generator().manual_seed(seed)
    prefix = torch.randint(
        0, VOCAB, (int(torch.randint(1, 20, (1,), generator=gen)),), generator=gen
    ).tolist()
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
    logits = engine.prefill(prefix)
    anchor = int(logits[-1].argmax())
    greedy = sequential_greedy(model, prefix + [anchor], plant + 8)
    tree = DraftTree.single(anchor)
    parent = 0
    for depth in range(plant):
        decoy = (greedy[depth] + 1 + int(torch.randint(0, VOCAB - 1, (1,), generator=gen))) % VOCAB
        if decoy != greedy[depth]:
            tree.add(decoy, parent, BRANCH)  # an earlier sibling, so the path is not contiguous
        parent = tree.add(greedy[depth], parent, SPINE)
    while len(tree) < 1 + 2 * plant + n_extra:
        p = int(torch.randint(0, len(tree), (1,), generator=gen))
        tok = int(torch.randint(0, VOCAB, (1,), generator=gen))
        if all(not (tree.parents[c] == p and tree.tokens[c] == tok) for c in range(1, len(tree))):
            tree.add(tok, p, BRANCH)
    tree.validate()
    out = engine.verify(tree, budget=100)
    assert len(out.new_tokens) >= plant + 1
    assert out.new_tokens == greedy[: len(out.new_tokens)]
    accepted = [tree.tokens[i] for i in out.accepted_nodes[1:]]
    assert accepted == out.new_tokens[:-1]


def drafter(method: str):
    register()  # the structured configs the method YAMLs extend (as run.py registers them)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=[f"method={method}"])
    return instantiate(cfg.method.drafter, _convert_="all")


@pytest.fixture(scope="module")
def drafters():
    return {m: drafter(m) for m in ("pld", "tr", "iso3", "iso5", "eagle2", "goose", "goose_no_bigram")}


@MODEL
@given(seed=st.integers(0, 10_000), length=st.integers(2, 30), repeat=st.booleans())
def test_every_drafter_generates_the_greedy_sequence(model, drafters, seed, length, repeat):
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, VOCAB, (length,), generator=gen).tolist()
    if repeat:  # repeated text: long context matches, deep accepted paths
        prompt = prompt + prompt
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
    expected = sequential_greedy(model, prompt, 40)
    for name, d in drafters.items():
        assert generate(engine, d, prompt, 40).output_ids == expected, name
