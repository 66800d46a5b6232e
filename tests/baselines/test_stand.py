"""STAND: the n-gram distribution table, the proposal, the sampled tree's contract with the
rejection walk, reproducibility, and greedy identity with AR at temperature 0."""

from __future__ import annotations

import pytest
import torch

from baselines.stand import NgramDistributionTable, StandDrafter, proposal
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.choose import verification_engine
from tests.tiny_models import tiny_model
from tests.toy_harness import one_thread  # noqa: F401


def _logits(rows: list[dict[int, float]], vocab: int = 10) -> torch.Tensor:
    out = torch.full((len(rows), vocab), -10.0)
    for i, row in enumerate(rows):
        for token, value in row.items():
            out[i, token] = value
    return out


def test_table_keeps_the_freshest_top_k_per_ngram_and_looks_up_the_longest_suffix():
    table = NgramDistributionTable(max_order=2, k=2)
    table.update([[1, 2], [3, 2]], _logits([{5: 3.0, 6: 2.0, 7: 1.0}, {8: 4.0, 9: 1.0}]))
    # unigram key (2,) was written twice: the later row wins; bigram keys are distinct
    assert table.lookup([2])[0] == (8, 9)
    assert table.lookup([0, 1, 2])[0] == (5, 6)  # the longest stored suffix (1, 2)
    assert table.lookup([4, 2])[0] == (8, 9)  # (4, 2) unseen: falls back to (2,)
    assert table.lookup([4]) is None
    assert table.lookup([1, 2])[1] == pytest.approx((3.0, 2.0))


def test_proposal_warps_the_stored_logits_like_the_target():
    q = proposal([2.0, 1.0, 0.0], temperature=0.5)
    expected = torch.softmax(torch.tensor([2.0, 1.0, 0.0]) / 0.5, -1).tolist()
    assert q == pytest.approx(expected)
    assert proposal([2.0, 1.0, 0.0], temperature=1.0, top_k=2)[2] == 0.0
    top_p = proposal([2.0, 1.0, 0.0], temperature=1.0, top_p=0.5)  # 0.67 >= 0.5: only the first
    assert top_p == pytest.approx([1.0, 0.0, 0.0])


@pytest.fixture(scope="module")
def engine() -> VerificationEngine:
    return verification_engine(tiny_model("llama", seed=1), eos_token_ids=(), context_length=256)


PROMPT = [5, 9, 13, 2, 7, 5, 9, 13, 2, 7, 5, 9, 13, 2, 7]


def test_sampled_tree_carries_its_proposals_and_children_come_from_them(engine):
    drafter = StandDrafter(budget=16, max_children=3)
    seen = []
    generate(
        engine,
        drafter,
        PROMPT,
        24,
        on_step=lambda tree, outcome, record: seen.append(tree),
        sampling=SamplingParams(temperature=1.0),
        seed=3,
    )
    trees = [t for t in seen if len(t) > 1]
    assert trees, "STAND drafted nothing"
    for tree in trees:
        tree.validate()  # includes: every child's token is in its parent's proposal support
        assert tree.proposals is not None and len(tree.proposals) == len(tree)
        assert len(tree) <= 16
        for kids in tree.children():
            assert len(kids) <= 3


def test_same_seed_same_drafts_and_output(engine):
    params = SamplingParams(temperature=1.0)
    runs = [
        generate(engine, StandDrafter(persistent_table=False), PROMPT, 24, sampling=params, seed=s)
        for s in (4, 4)
    ]
    assert runs[0].output_ids == runs[1].output_ids
    assert runs[0].forward_calls == runs[1].forward_calls


def test_greedy_stand_is_identical_to_ar(engine):
    ar = generate(engine, ARDrafter(), PROMPT, 40)
    stand = generate(engine, StandDrafter(), PROMPT, 40)
    assert stand.output_ids == ar.output_ids
    assert stand.forward_calls < ar.forward_calls  # it drafted and got tokens accepted


def test_budget_auto_lets_stand_size_its_own_tree():
    from goose.engine.budget.auto_budget import AutoBudget
    from goose.engine.budget.cost_model import LatencyTable

    flat = LatencyTable([1, 64], [0.01, 0.01])  # free nodes: grow to B
    steep = LatencyTable([1, 2, 64], [0.01, 1.0, 32.0])  # a second node costs 100x: stay AR
    for table, grows in ((flat, True), (steep, False)):
        inner = StandDrafter(budget=12)
        sizer = AutoBudget(table)
        sizer.begin(inner)  # a prompt starts: the sizer hands a drafter that sizes itself its t(n)
        assert inner._latency is not None
        inner.table = NgramDistributionTable(3, 8)
        inner.table.update([[1]], _logits([{2: 3.0, 3: 2.5, 4: 1.0}]))
        inner.table.update([[2]], _logits([{1: 3.0, 5: 2.0}]))
        inner.set_sampling(SamplingParams(temperature=1.0), seed=0)
        tree = inner.propose([7, 1])
        assert (len(tree) > 1) is grows
        assert sizer.size(tree) is tree  # never cut after its draws


@pytest.mark.parametrize("bad", [{"budget": 1}, {"max_children": 9, "k": 8}, {"max_order": 0}])
def test_bad_hyperparameters_name_the_field(bad):
    with pytest.raises(ValueError, match="StandDrafter"):
        StandDrafter(**bad)
