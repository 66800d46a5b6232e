"""Batched verification (goose.engine.batch): ragged trees of several requests in one forward give every
request exactly what batch-1 decoding gives it — hand-built trees with known accepted lengths, requests of
different prompt lengths finishing mid-batch and joining late, every configured method at B ∈ {1, 2, 4, 8},
sampled runs with the same seed per request — and a request's drafter state never reaches another."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from goose.engine.batch.budget import POLICIES, batch_cap
from goose.engine.batch.engine import BatchEngine
from goose.engine.batch.serve import Request, serve
from goose.engine.budget.auto_budget import with_auto_budget
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter, VerifyOutcome
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.sizing import Speculator, TreeSizer
from goose.engine.core.tree import ROOT as ROOT_SOURCE
from goose.engine.core.tree import SPINE, DraftTree
from goose.engine.forward.choose import verification_engine
from tests.tiny_models import VOCAB, tiny_model
from tests.toy_harness import METHODS, drafter_of, one_thread  # noqa: F401

PROMPT_LENGTHS = (7, 19, 12, 30, 9, 24, 15, 11)


@pytest.fixture(scope="module")
def engine():
    return verification_engine(tiny_model("llama", seed=3), eos_token_ids=(), context_length=256)


def prompts(count: int, repetitive: bool = True) -> list[list[int]]:
    """`count` prompts of different lengths; repetitive ones let copy-based drafters get accepted."""
    gen = torch.Generator().manual_seed(11)
    out = []
    for length in PROMPT_LENGTHS[:count]:
        base = torch.randint(
            0, VOCAB - 1, (max(length // 3, 2) if repetitive else length,), generator=gen
        ).tolist()
        out.append((base * 3)[:length] if repetitive else base)
    return out


def reference(engine, prompt: list[int], max_new: int, sampling=None, seed: int = 0) -> list[int]:
    return generate(engine, ARDrafter(), prompt, max_new, sampling=sampling, seed=seed).output_ids


class Oracle(Drafter):
    """Proposes hand-built trees around the target's own continuation `truth` (prompt + AR output), so the
    accepted length of every step is known: `shape` "chain" (3 right tokens), "bushy" (a wrong and a right
    child at each of 2 levels, a wrong grandchild under the right one), "wrong" (a chain of 2 wrong
    tokens) or "empty" (the anchor alone)."""

    name = "oracle"

    def __init__(self, truth: list[int], shape: str) -> None:
        super().__init__()
        self.truth, self.shape = truth, shape
        self.expected: list[int] = []  # accepted drafted tokens per step, as the tree was built

    def propose(self, committed: list[int]) -> DraftTree:
        anchor, nxt = committed[-1], self.truth[len(committed) : len(committed) + 3]
        right = [*nxt, *([0] * (3 - len(nxt)))]  # past the end: anything
        wrong = [(t + 1) % (VOCAB - 1) for t in right]
        if self.shape == "chain":
            tree = DraftTree([anchor, *right], [-1, 0, 1, 2], [ROOT_SOURCE, SPINE, SPINE, SPINE])
            self.expected.append(min(3, len(nxt)))
        elif self.shape == "bushy":
            tokens = [anchor, wrong[0], right[0], wrong[1], right[1], wrong[2]]
            tree = DraftTree(tokens, [-1, 0, 0, 2, 2, 4], [ROOT_SOURCE] + [SPINE] * 5)
            self.expected.append(min(2, len(nxt)))
        elif self.shape == "wrong":
            tree = DraftTree([anchor, wrong[0], wrong[1]], [-1, 0, 1], [ROOT_SOURCE, SPINE, SPINE])
            self.expected.append(0)
        else:
            tree = DraftTree.single(anchor)
            self.expected.append(0)
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        pass


SHAPES = ("chain", "bushy", "wrong", "empty", "bushy", "chain", "empty", "wrong")


@pytest.mark.parametrize("concurrency", [1, 2, 4, 8])
def test_hand_built_ragged_trees_accept_what_each_request_would_alone(engine, concurrency):
    """Eight requests (prompts of 7-30 tokens, 5-21 new tokens: they finish mid-batch and the waiting ones
    join) with trees of four shapes, three depths and sizes 1-6 in the same forward."""
    ps, max_new = prompts(8), [13, 21, 5, 17, 9, 21, 11, 6]
    refs = [reference(engine, p, m) for p, m in zip(ps, max_new, strict=True)]
    oracles = [Oracle(p + r, s) for p, r, s in zip(ps, refs, SHAPES, strict=True)]
    handed = iter(oracles)
    batch = BatchEngine(engine, 8)
    served = serve(
        batch,
        lambda: Speculator.of(next(handed)),
        [Request(tuple(p), m) for p, m in zip(ps, max_new, strict=True)],
        concurrency,
    )
    for i, (gen, ref, oracle) in enumerate(zip(served.generations, refs, oracles, strict=True)):
        assert gen.output_ids == ref, i
        steps = [s.accepted_len for s in gen.steps]
        # the last step's draft may be cut to the tokens still wanted
        assert steps[:-1] == oracle.expected[: len(steps) - 1], (i, oracle.shape)
        assert gen.forward_calls == 1 + len(gen.steps)
        assert sum(s.new_tokens for s in gen.steps) == len(gen.output_ids) - 1
    assert max(s.active for s in served.steps) == concurrency
    # ragged: trees of different sizes padded together in one forward
    assert any(s.padded > s.nodes for s in served.steps) == (concurrency > 1)


NOT_BATCHED = {
    "self_draft",
    "self_draft_auto",
}  # draft forwards over the target's cache: refused (tested below)


# the self-draft runs draft forwards over the target's cache: refused at concurrency > 1 (tested below)
@pytest.mark.parametrize("method", [m for m in METHODS if not m.startswith("self_draft")])
def test_every_method_at_every_concurrency_gives_batch_1_ar_output(engine, method):
    ps, max_new = prompts(8), 24
    refs = [reference(engine, p, max_new) for p in ps]
    batch = BatchEngine(engine, 8)
    for concurrency in (1, 2, 4, 8):
        served = serve(
            batch,
            lambda: Speculator.of(drafter_of(method)),
            [Request(tuple(p), max_new) for p in ps],
            concurrency,
        )
        assert [g.output_ids for g in served.generations] == refs, (method, concurrency)


class HalfCut(TreeSizer):
    """Cuts every other proposal with drafted nodes to the anchor alone, without plain_learns: those steps
    are plain (observe_plain after propose), as under budget=auto's gate."""

    plain_learns = False

    def __init__(self) -> None:
        self.proposals = 0

    def size(self, tree: DraftTree) -> DraftTree:
        if len(tree) == 1:
            return tree
        self.proposals += 1
        return tree if self.proposals % 2 else DraftTree.single(tree.tokens[0])


@pytest.mark.parametrize("method", ["pld", "suffix", "tr", "goose", "hw_tree", "logitspec"])
def test_drafts_cut_to_the_anchor_are_plain_steps_in_a_batch_too(engine, method):
    ps, max_new = prompts(4), 24
    refs = [reference(engine, p, max_new) for p in ps]
    served = serve(
        BatchEngine(engine, 4),
        lambda: Speculator(drafter_of(method), HalfCut()),
        [Request(tuple(p), max_new) for p in ps],
        4,
    )
    assert [g.output_ids for g in served.generations] == refs, method
    cut = [s.cut_to_anchor for g in served.generations for s in g.steps]
    assert sum(cut) > 0, method


@pytest.mark.parametrize("method,temperature", [("pld", 1.0), ("ar", 0.7), ("stand", 1.0), ("tr", 1.0)])
def test_sampled_requests_match_batch_1_with_their_own_seeds(engine, method, temperature):
    """A deterministic drafter gives batch-1 AR's sample with each request's seed; any drafter gives what
    it gives at batch 1 with that seed (STAND: its own draws, verified by its verifier)."""
    sampling = SamplingParams(temperature)
    ps, max_new = prompts(6), 20
    alone = [
        generate(engine, drafter_of(method), p, max_new, sampling=sampling, seed=10 + i).output_ids
        for i, p in enumerate(ps)
    ]
    if method in ("pld", "ar", "tr"):
        assert alone == [reference(engine, p, max_new, sampling, 10 + i) for i, p in enumerate(ps)]
    batch = BatchEngine(engine, 4)
    requests = [Request(tuple(p), max_new, seed=10 + i) for i, p in enumerate(ps)]
    served = serve(batch, lambda: Speculator.of(drafter_of(method)), requests, 4, sampling)
    assert [g.output_ids for g in served.generations] == alone


def test_a_requests_drafter_state_stays_its_own(engine):
    """Token Recycling learns from every step; in a batch each request's drafter sees its own tokens only,
    so its trees (sizes and accepted lengths, step by step) are those of a fresh drafter run alone."""
    ps, max_new = prompts(4), 24
    alone = [generate(engine, drafter_of("tr"), p, max_new) for p in ps]
    served = serve(
        BatchEngine(engine, 4),
        lambda: Speculator.of(drafter_of("tr")),
        [Request(tuple(p), max_new) for p in ps],
        4,
    )
    for a, b in zip(alone, served.generations, strict=True):
        assert [(s.tree_size, s.accepted_len) for s in a.steps] == [
            (s.tree_size, s.accepted_len) for s in b.steps
        ]


def steps_of(generation) -> list[tuple[int, int]]:
    return [(s.tree_size, s.accepted_len) for s in generation.steps]


@pytest.mark.parametrize("method", ["tr", "suffix_global", "sam", "stand"])
def test_a_shared_state_served_one_at_a_time_is_one_drafter_run_over_the_prompts(engine, method):
    """batch_state "shared" at concurrency 1: the requests in turn read and write one run-long state, which is
    exactly one drafter running the prompts one after another (the batch-1 runner's cell); isolated it is a fresh
    drafter per prompt, and the two draft differently."""
    ps, max_new = prompts(4), 24
    one = drafter_of(method)
    in_turn = [generate(engine, one, p, max_new, seed=i) for i, p in enumerate(ps)]
    requests = [Request(tuple(p), max_new, seed=i) for i, p in enumerate(ps)]
    shared = serve(
        BatchEngine(engine, 1), lambda: Speculator.of(drafter_of(method)), requests, 1, batch_state="shared"
    )
    isolated = serve(BatchEngine(engine, 1), lambda: Speculator.of(drafter_of(method)), requests, 1)
    assert [steps_of(g) for g in shared.generations] == [steps_of(g) for g in in_turn]
    assert [steps_of(g) for g in shared.generations] != [steps_of(g) for g in isolated.generations]


def test_a_shared_table_is_one_object_that_every_request_of_the_batch_writes_and_stays_lossless(engine):
    ps, max_new = prompts(6), 24
    refs = [reference(engine, p, max_new) for p in ps]
    made: list[Drafter] = []

    def make() -> Speculator:
        made.append(drafter_of("tr"))
        return Speculator.of(made[-1])

    served = serve(
        BatchEngine(engine, 4), make, [Request(tuple(p), max_new) for p in ps], 4, batch_state="shared"
    )
    assert [g.output_ids for g in served.generations] == refs
    assert len(made) == 6 and all(d.table is made[0].table for d in made)


def test_a_drafter_that_cannot_share_its_state_is_refused_and_one_without_state_shares_nothing(engine):
    requests = [Request(tuple(p), 12) for p in prompts(3)]
    for method in ("hw_tree", "opt_tree", "goose_persistent"):
        with pytest.raises(ValueError, match=f"batch_state=shared: {method}.* cannot share"):
            serve(
                BatchEngine(engine, 2),
                lambda m=method: Speculator.of(drafter_of(m)),
                requests,
                2,
                batch_state="shared",
            )
    with pytest.raises(ValueError, match="batch_state = 'global': choose from isolated, shared"):
        serve(BatchEngine(engine, 2), lambda: Speculator.of(ARDrafter()), requests, 2, batch_state="global")
    pld = [
        serve(
            BatchEngine(engine, 2), lambda: Speculator.of(drafter_of("pld")), requests, 2, batch_state=state
        )
        for state in ("isolated", "shared")
    ]
    assert [steps_of(g) for g in pld[0].generations] == [steps_of(g) for g in pld[1].generations]


def test_without_the_gap_mask_a_shorter_request_reads_rows_it_does_not_own(engine, monkeypatch):
    """The mask's gap rule is load-bearing: let every slot see rows [0, W) and the outputs change."""
    ps, max_new = prompts(4), 16
    refs = [reference(engine, p, max_new) for p in ps]
    original = BatchEngine._inputs

    def leaky(self, trees, w):
        ids, positions, mask, per_tree = original(self, trees, w)
        for b, tree in enumerate(trees):
            mask[b, 0, : len(tree), :w] = 0
        return ids, positions, mask, per_tree

    monkeypatch.setattr(BatchEngine, "_inputs", leaky)
    served = serve(
        BatchEngine(engine, 4),
        lambda: Speculator.of(ARDrafter()),
        [Request(tuple(p), max_new) for p in ps],
        4,
    )
    assert [g.output_ids for g in served.generations] != refs


def test_the_batch_records_throughput_and_per_request_latency(engine):
    ps = prompts(5)
    served = serve(
        BatchEngine(engine, 2),
        lambda: Speculator.of(drafter_of("pld")),
        [Request(tuple(p), 12) for p in ps],
        2,
    )
    assert served.output_tokens == sum(len(g.output_ids) for g in served.generations) == 60
    assert served.tokens_per_s == pytest.approx(60 / served.wall_time_s)
    assert len(served.tpot_s()) == 5 and all(t > 0 for t in served.tpot_s())
    assert all(
        a <= f <= e
        for a, f, e in zip(served.admitted_s, served.first_token_s, served.finished_s, strict=True)
    )
    assert served.admitted_s[2] >= min(
        served.finished_s[:2]
    )  # the third joins when one of the first two ends
    assert sum(s.accepted for s in served.steps) == sum(
        st.accepted_len for g in served.generations for st in g.steps
    )


def test_what_is_not_batched_says_why(engine):
    with pytest.raises(ValueError, match=r"concurrency must lie in \[1, 2\]"):
        serve(BatchEngine(engine, 2), lambda: Speculator.of(ARDrafter()), [Request((1, 2, 3), 4)], 3)
    with pytest.raises(ValueError, match="self-draft"):
        serve(
            BatchEngine(engine, 2),
            lambda: Speculator.of(drafter_of("self_draft")),
            [Request((1, 2, 3), 4)],
            2,
        )
    gemma = verification_engine(tiny_model("gemma3", seed=1), eos_token_ids=(), context_length=256)
    with pytest.raises(ValueError, match="sliding-window"):
        BatchEngine(gemma, 2)


def test_the_batch_cap_maximises_expected_tokens_per_padded_second():
    """Two requests, E = [1, 1.9, 2.7] and [1, 1.5]: with t(r) = 1 + 0.1 r the rates of caps 1, 2, 3 are
    2 / 1.2, 3.4 / 1.4, 4.2 / 1.6 (cap 3); with t(r) = 1 + 0.5 r they are 2 / 2, 3.4 / 3, 4.2 / 4 (cap 2)."""
    expected = [np.array([1.0, 1.9, 2.7]), np.array([1.0, 1.5])]
    assert batch_cap(expected, lambda r: 1 + 0.1 * r) == 3
    assert batch_cap(expected, lambda r: 1 + 0.5 * r) == 2
    assert batch_cap(expected, lambda r: 1.0 * r) == 1  # cost linear in rows: nothing pays
    assert batch_cap([np.array([1.0, 2.0])], lambda r: 1.0) == 2  # one request: its whole tree


def test_the_batch_budget_caps_every_tree_and_stays_lossless(engine):
    table = LatencyTable(sizes=[1, 8, 64], seconds=[1e-3, 1.6e-3, 9e-3])
    ps, max_new = prompts(4), 24
    refs = [reference(engine, p, max_new) for p in ps]
    batch = BatchEngine(engine, 4)
    make = lambda: with_auto_budget(drafter_of("goose"), engine, latency=table)  # noqa: E731
    requests = [Request(tuple(p), max_new) for p in ps]
    runs = {policy: serve(batch, make, requests, 4, budget_policy=policy) for policy in POLICIES}
    for served in runs.values():
        assert [g.output_ids for g in served.generations] == refs
    capped = [s for s in runs["batch"].steps if s.active > 1]
    assert capped and all(0 < s.cap and s.padded <= s.active * s.cap for s in capped)  # n_max <= cap
    assert all(s.cap == 0 for s in runs["per_request"].steps)
    nodes = {policy: sum(s.nodes for s in served.steps) for policy, served in runs.items()}
    assert nodes["batch"] < nodes["per_request"]  # the batch's padded cost makes a smaller cap pay
    with pytest.raises(ValueError, match="budget_policy = 'tetris': choose from per_request, batch"):
        serve(batch, make, requests, 4, budget_policy="tetris")
    with pytest.raises(ValueError, match="budget_policy=batch weighs"):
        serve(batch, lambda: Speculator.of(drafter_of("goose")), requests, 4, budget_policy="batch")
