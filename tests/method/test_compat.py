"""compat=authors (goose.method.compat): each point where the official Goose code differs, on
hand-built inputs, plus the field's validation and the default left as it was. The comparison with
the official counters on the real model is tests/e2e/test_compat_reference.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from baselines.isotropic import IsotropicDrafter
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.harness.compose import UserError, compose_config, drafter_factory
from goose.method.compat import AUTHORS, HARNESS, CompatRules, rules_for
from goose.method.confidence import effective_budget, extension_limit, match_confidence, spine_length
from goose.method.config import GooseConfig
from goose.method.drafter import GooseDrafter
from goose.method.spine_tree import (
    branch_shares,
    build_spine_tree,
    harmonic_split,
    sequential_harmonic_split,
)
from goose.sources.adjacency import AdjacencyTable
from goose.sources.context_matcher import ContextMatcher

V = 64


class Table:
    """Adjacency stand-in: every token has the same successors; records the root's bigram prev."""

    def __init__(self, ids=(), scores=(), vocab_size=V):
        self.ids, self.scores, self.vocab_size = list(ids), list(scores), vocab_size
        self.half_unigram_scores = False
        self.root_prevs: list[int | None] = []

    def successors(self, token, prev=None, min_score=0.0):
        n = sum(1 for s in self.scores if s >= min_score)
        return self.ids[:n], self.scores[:n]

    def update_from_tree(self, tokens, parents, logits, prev_anchor=None, top=None):
        self.root_prevs.append(prev_anchor)

    def reset(self):
        pass


def started(drafter, prompt, table):
    drafter.begin(prompt, torch.zeros(len(prompt), V))
    drafter.table = table
    return drafter


def outcome(tree: DraftTree) -> VerifyOutcome:
    return VerifyOutcome(torch.zeros(len(tree), V), [0] * len(tree), [0], [0])


TEMPLATE = [10, 11, 12, 13, 14, 15, 16]
CONSENSUS_PROMPT = TEMPLATE * 6 + [10, 11, 12, 13, 14]  # the last 5-gram: >= 2 agreeing occurrences
MATCH_PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]  # suffix [1, 2, 3] -> a 12-token chain


# ------------------------------------------------------------------ the field


def test_compat_defaults_to_harness_and_is_not_logged():
    assert GooseConfig().compat == "harness" and rules_for("harness") is HARNESS
    assert "compat" not in GooseDrafter().config() and "compat" not in IsotropicDrafter(branching=3).config()
    assert GooseDrafter(compat="authors").config()["compat"] == "authors"
    assert IsotropicDrafter(branching=5, compat="authors").config()["compat"] == "authors"


@pytest.mark.parametrize(
    "make", [lambda: GooseConfig(compat="official"), lambda: IsotropicDrafter(branching=3, compat=1)]
)
def test_invalid_compat_lists_the_valid_values(make):
    with pytest.raises(ValueError, match=r"compat = .*must be one of harness, authors"):
        make()


@pytest.mark.parametrize(
    "method",
    [
        "goose",
        "iso3",
        "iso5",
        "goose_no_spine_branches",
        "goose_no_bigram",
        "goose_no_consensus",
        "goose_no_prefill",
    ],
)
def test_every_preset_takes_compat(method):
    cfg = compose_config([f"method={method}", "method.drafter.compat=authors"])
    assert drafter_factory(cfg)().rules is AUTHORS
    with pytest.raises(UserError, match="must be one of harness, authors"):  # refused at composition
        compose_config([f"method={method}", "method.drafter.compat=paper"])


def test_authors_runs_on_the_transformers_forward():
    from goose.harness.compose import engine_lean

    assert engine_lean(compose_config(["method=iso5", "method.drafter.compat=authors"])) is False
    assert engine_lean(compose_config(["method=goose"])) is None
    assert engine_lean(compose_config(["method=pld"])) is None


def test_harness_rules_are_the_default_arithmetic():
    for n in range(0, 25):
        for consensus in (False, True):
            c = match_confidence(n, consensus)
            assert HARNESS.confidence(n, consensus) == c
            assert HARNESS.effective_budget(c) == effective_budget(c)
            assert HARNESS.extension_limit(c) == extension_limit(c)
    assert HARNESS.flags() == tuple(f.name for f in dataclasses.fields(CompatRules))
    assert all(getattr(AUTHORS, f) != getattr(HARNESS, f) for f in CompatRules.flags())


# ------------------------------------------------------------------ arithmetic


def test_float_rounding_of_c_and_b_eff():
    # official goose/context_match.py: 0.7 + 0.2 * (14 - 8) / 12.0 = 0.7999999999999999
    c_authors, c_harness = AUTHORS.confidence(14, False), HARNESS.confidence(14, False)
    assert c_authors == 0.7 + 0.2 * 6 / 12.0 and c_authors < c_harness == 0.8
    assert (AUTHORS.effective_budget(c_authors), HARNESS.effective_budget(c_harness)) == (91, 92)
    # plain int() / math.ceil against the ε-robust ones
    assert (AUTHORS.floor(8.999999999999998), HARNESS.floor(8.999999999999998)) == (8, 9)
    assert (AUTHORS.ceil(3.0000000000000004), HARNESS.ceil(3.0000000000000004)) == (4, 3)
    assert (AUTHORS.extension_limit(0.44999999999999996), HARNESS.extension_limit(0.44999999999999996)) == (
        44,
        45,
    )


def test_spine_cap_at_full_confidence():
    assert spine_length(120, 100, 1.0) == 99  # harness: the tree stays within B_eff
    assert spine_length(120, 100, 1.0, floor=AUTHORS.floor, cap=False) == 100  # official: B_eff + 1 nodes


def test_sequential_harmonic_split():
    assert sequential_harmonic_split(19, 20) == [5, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1] + [0] * 6
    assert harmonic_split(19, 20) == [5, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1] + [0] * 8
    assert sequential_harmonic_split(2, 5) == [1, 1, 0, 0, 0]  # at least one each from the top
    assert sequential_harmonic_split(0, 3) == [0, 0, 0] and sequential_harmonic_split(4, 0) == []
    assert sequential_harmonic_split(4, 2) == [2, 1]  # floors: a unit is left to the extension
    for total in range(0, 40):
        for n in range(1, 25):
            shares = sequential_harmonic_split(total, n)
            assert sum(shares) <= total and sum(harmonic_split(total, n)) == total


def test_rho_zero_keeps_one_spine_branch_under_authors():
    assert branch_shares(60, 10, 0.0) == (49, 0)
    assert branch_shares(60, 10, 0.0, floor_at_rho0=True) == (48, 1)
    assert branch_shares(60, 0, 0.0, floor_at_rho0=True) == (59, 0)  # no spine, no spine share


# ------------------------------------------------------------------ tree building


def test_authors_tree_at_full_confidence_has_b_eff_plus_one_nodes():
    table = Table([50, 51], [0.6, 0.4])
    chain = list(range(100, 220))
    harness = build_spine_tree(table, 1, 0, chain, budget=100, ratio=1.0)
    authors = build_spine_tree(table, 1, 0, chain, budget=100, ratio=1.0, rules=AUTHORS)
    assert (harness.sources.count(SPINE), len(harness)) == (99, 100)
    assert (authors.sources.count(SPINE), len(authors)) == (100, 101)


def test_authors_rho_zero_tree_hangs_one_alternative_on_the_spine():
    table = Table([50, 51, 52], [0.5, 0.3, 0.2])
    chain = [100, 101, 102]
    for rules, on_spine in ((HARNESS, 0), (AUTHORS, 1)):
        tree = build_spine_tree(table, 1, 0, chain, budget=10, ratio=0.3, rho=0.0, rules=rules)
        hung = [
            i
            for i in range(len(tree))
            if tree.sources[i] == BRANCH and tree.sources[tree.parents[i]] == SPINE
        ]
        assert len(hung) == on_spine


def test_authors_branch_width_uses_plain_ceil():
    # the branch 50 was drafted at score x with 7 nodes left: 7 * x = 3.0000000000000004
    x = 0.42857142857142866

    class Rows(Table):
        def successors(self, token, prev=None, min_score=0.0):
            return ([50], [x]) if token == 1 else ([60, 61, 62, 63, 64], [0.2] * 5)

    widths = []
    for rules in (HARNESS, AUTHORS):
        tree = build_spine_tree(Rows(), 1, 0, [], budget=9, ratio=0.5, rules=rules)
        widths.append(tree.parents.count(1))  # children of the branch node 50
    assert widths == [3, 4]  # ceil(7 x) robust to representation error (harness) or plain (authors)


# ------------------------------------------------------------------ chain extension


def test_authors_extension_appends_whole_proposals():
    m = ContextMatcher(GooseConfig.ngram_lengths, GooseConfig.max_chain)
    m.append(CONSENSUS_PROMPT)
    chain = m.match().chain
    assert len(chain) == 20
    assert len(m.extend_chain(chain, 30, require_consensus=True)) == 30
    assert len(m.extend_chain_whole(chain, 30, saturated=True)) == 40  # overshoots int(100 c)


def test_authors_extension_appends_the_first_proposal_without_consensus():
    pool = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 50, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 60, 1, 2, 3, 4, 5]
    m = ContextMatcher(GooseConfig.ngram_lengths, GooseConfig.max_chain)
    m.append(pool)
    found = m.match()
    assert found.consensus and found.chain == pool[5:25]
    assert m.extend_chain(found.chain, 100, require_consensus=True) == found.chain
    assert m.extend_chain_whole(found.chain, 100, saturated=True) == found.chain + [4, 5]


# ------------------------------------------------------------------ adjacency table


def test_fp16_unigram_scores_bigram_float32():
    logits = torch.randn(2, V, generator=torch.Generator().manual_seed(0))
    exact = torch.softmax(torch.topk(logits, 4).values, dim=-1)
    half = AdjacencyTable(V, 4, use_bigram=True, half_unigram_scores=True)
    half.update([3, 5], logits, prev_tokens=[-1, 3])
    assert half.successors(3)[1] == exact[0].half().float().tolist()  # unigram row: float16
    assert half.successors(5, prev=3)[1] == exact[1].tolist()  # bigram row: float32
    full = AdjacencyTable(V, 4, use_bigram=True)
    full.update([3, 5], logits, prev_tokens=[-1, 3])
    assert full.successors(3)[1] == exact[0].tolist()


def test_authors_tree_cycles_do_not_write_the_root_bigram():
    for compat, tree_prev in (("harness", 14), ("authors", None)):
        table = Table([15, 30], [0.7, 0.3])
        d = started(GooseDrafter(compat=compat), CONSENSUS_PROMPT[:-1], table)
        tree = d.propose(CONSENSUS_PROMPT)
        assert d.route == "spine_tree"
        d.observe(tree, outcome(tree))
        assert table.root_prevs == [13 if tree_prev else None]
    # the chain and AR routes write it either way
    table = Table()
    d = started(GooseDrafter(compat="authors"), MATCH_PROMPT[:-1], table)
    tree = d.propose(MATCH_PROMPT)
    assert d.route == "chain"
    d.observe(tree, outcome(tree))
    assert table.root_prevs == [2]


def test_authors_goose_builds_its_table_in_fp16():
    d = GooseDrafter(compat="authors")
    d.begin([1, 2, 3], torch.zeros(3, V))
    assert d.table.half_unigram_scores and not GooseDrafter().verifies_full_tree and d.verifies_full_tree


# ------------------------------------------------------------------ isotropic control


def test_authors_iso_routes_as_goose_with_b_eff():
    table = Table(list(range(20, 25)), [0.2] * 5)
    harness = started(IsotropicDrafter(branching=3), CONSENSUS_PROMPT[:-1], table)
    assert len(harness.propose(CONSENSUS_PROMPT)) == 60 and harness.route == "tree"
    authors = started(IsotropicDrafter(branching=3, compat="authors"), CONSENSUS_PROMPT[:-1], table)
    tree = authors.propose(CONSENSUS_PROMPT)  # consensus: c = 1, B_eff = 100
    assert len(tree) == 100 and authors.route == "tree" and SPINE not in tree.sources
    authors.observe(tree, outcome(tree))
    assert table.root_prevs == [None]  # no root bigram from a tree cycle


def test_authors_iso_verifies_the_match_as_a_chain_without_successors():
    d = started(IsotropicDrafter(branching=5, compat="authors"), MATCH_PROMPT[:-1], Table())
    tree = d.propose(MATCH_PROMPT)
    assert d.route == "chain" and tree.tokens == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]
    d = started(IsotropicDrafter(branching=5), MATCH_PROMPT[:-1], Table())
    assert d.propose(MATCH_PROMPT).tokens == [3] and d.route == "ar"


# ------------------------------------------------------------------ the decode loop


class DeepChain(Drafter):
    """Proposes a 10-token chain every cycle."""

    def propose(self, committed):
        self.route = "chain"
        return DraftTree.chain(committed[-1], [7] * 10, SPINE)


class DeepChainFull(DeepChain):
    verifies_full_tree = True


def test_decode_loop_verifies_the_full_tree_only_when_asked():
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("llama", seed=0)
    prompt = [5, 6, 7, 8, 9]
    ref = generate(verification_engine(model, eos_token_ids=(), context_length=128), ARDrafter(), prompt, 4)
    for drafter, first_size in ((DeepChain(), 3), (DeepChainFull(), 11)):  # 3 tokens still wanted
        engine = verification_engine(model, eos_token_ids=(), context_length=128)
        gen = generate(engine, drafter, prompt, 4)
        assert gen.output_ids == ref.output_ids and gen.steps[0].tree_size == first_size


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_authors_generation_equals_greedy_ar_on_a_tiny_model(arch):
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model(arch, seed=0)
    prompt = [5, 6, 7, 8, 9, 10, 11] * 2 + [5, 6, 7, 20, 21, 22, 23, 24, 25]
    ref = generate(verification_engine(model, eos_token_ids=(), context_length=256), ARDrafter(), prompt, 80)
    for drafter in (
        GooseDrafter(compat="authors"),
        GooseDrafter(compat="authors", rho=0.0),
        IsotropicDrafter(branching=3, compat="authors"),
    ):
        engine = verification_engine(model, eos_token_ids=(), context_length=256, lean=False)
        gen = generate(engine, drafter, prompt, 80)
        assert gen.output_ids == ref.output_ids, drafter.name
        assert gen.forward_calls < ref.forward_calls
