"""The exact law of a verifier's accepted length on one tree (goose.engine.core.verify.expected): a hand-
computed tree, the full enumeration of draft and verification on the toys (verify_toy) to 1e-12, and a
Monte Carlo run of the walk whose mean agrees with the exact expectation within its interval."""

from __future__ import annotations

import math
import random
from functools import partial

import pytest

from goose.engine.core.verify import verify_walk
from goose.engine.core.verify.expected import accepted_length_law, applicable, expected_accepted, reach
from goose.engine.core.verify.inputs import Dist
from goose.engine.core.verify.view import SampledTree
from tests.engine.verify_toy import (
    Brancher,
    Toy,
    draft_chain,
    draft_fixed_tree,
    draft_paths,
    enumerate_runs,
    mean_accepted,
    sampled_view,
)

PROMPT = (0, 1)
A, B = 5, 7


def two_children(p_a: float, p_b: float, q_a: float) -> SampledTree:
    """The anchor with children A, B drawn without replacement from q = (q_a, 1 - q_a) on {A, B}; p puts
    p_a, p_b on them and the rest outside."""
    target = [Dist({A: p_a, B: p_b}, 1.0 - p_a - p_b), Dist({}, 1.0), Dist({}, 1.0)]
    proposals = [((A, B), (q_a, 1.0 - q_a)), None, None]
    return SampledTree([0, A, B], [-1, 0, 0], [[1, 2], [], []], proposals, target)


def test_hand_computed_tree():
    """RRS: A kept w.p. min(1, .2/.5) = .4; after it, p' = (p − q)+ has no mass on B: E = .4. Traversal:
    w_A = .4; deleting A leaves P(B) = 0, so B is never kept: E = .4 as well."""
    tree = two_children(0.2, 0.3, 0.5)
    assert accepted_length_law("rrs", tree) == pytest.approx([0.6, 0.4], abs=1e-15)
    assert expected_accepted("traversal", tree) == pytest.approx(0.4, abs=1e-15)
    # B more likely under p than under q: RRS keeps A w.p. .2/.6 = 1/3, else B w.p. p'(B) / q'(B) with
    # p' = (p − q)+ / Σ = (0, .1, outside .3) / .4 and q' = δ_B: 1/4; E = 1/3 + 2/3 · 1/4 = 1/2
    tree = two_children(0.2, 0.5, 0.6)
    assert accepted_length_law("rrs", tree) == pytest.approx([0.5, 0.5], abs=1e-15)


def test_reach_is_the_tail_of_the_law():
    assert reach([0.5, 0.3, 0.2]) == pytest.approx([0.5, 0.2], abs=1e-15)
    law = [0.1, 0.2, 0.3, 0.4]
    assert sum(reach(law)) == pytest.approx(sum(k * p for k, p in enumerate(law)), abs=1e-15)


DRAFTS = {
    "chain3": partial(draft_chain, length=3),
    "tree[2,1,2]": partial(draft_fixed_tree, widths=(2, 1, 2)),
    "iid-K2-L2": partial(draft_paths, k=2, trunk=0, length=2),
    "delayed-1-2-2": partial(draft_paths, k=2, trunk=1, length=2),
}
EXPECT_APPLICABLE = {
    "chain3": {"rrs", "traversal", "rrs_iid", "gbv", "block"},
    "tree[2,1,2]": {"rrs", "traversal"},
    "iid-K2-L2": {"rrs", "traversal", "rrs_iid", "gbv"},
    "delayed-1-2-2": {"rrs", "traversal", "rrs_iid", "gbv"},
}


@pytest.mark.parametrize("draft", DRAFTS)
def test_exact_law_averaged_over_drafts_equals_the_full_enumeration(draft):
    """Σ over drafts of P(draft) · E[accepted | draft] = the toy's enumeration of draft and walk together,
    for every verifier that applies (and the applicable set is the shape's)."""
    toy = Toy(seed=0)
    make = DRAFTS[draft]
    views: list[tuple[float, SampledTree]] = []

    def run(b: Brancher) -> tuple:
        view, _ = sampled_view(toy, make(b, toy=toy, prompt=PROMPT))
        views.append((b.prob, view))
        return (len(views),)

    enumerate_runs(run)
    assert sum(p for p, _ in views) == pytest.approx(1.0, abs=1e-12)
    for _, v in views:  # a draft that came out a chain also admits the chain's verifiers
        chain_only = {"rrs_iid", "gbv", "block"} if v.is_chain() else set()
        assert set(applicable(v)) == EXPECT_APPLICABLE[draft] | chain_only
    for verifier in sorted(EXPECT_APPLICABLE[draft]):
        exact = sum(p * expected_accepted(verifier, v) for p, v in views if verifier in applicable(v))
        enumerated = mean_accepted(toy, PROMPT, lambda b: make(b, toy=toy, prompt=PROMPT), verifier)
        assert exact == pytest.approx(enumerated, abs=1e-12), verifier
        for _, v in views:
            if verifier in applicable(v):
                assert sum(accepted_length_law(verifier, v)) == pytest.approx(1.0, abs=1e-12)


class UniformDecisions:
    """The walk's tests with fresh uniforms (u · den < num, as NoiseDecisions)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def accept(self, num: float, den: float, node: int, rank: int) -> bool:
        return self.rng.random() * den < num

    def draw(self, node: int, dist: Dist) -> int:
        return -1


@pytest.mark.parametrize("verifier", ["rrs", "traversal"])
def test_monte_carlo_mean_agrees_with_the_exact_expectation(verifier):
    """20 000 walks on one toy tree three deep: the mean accepted length within 4 standard errors of the
    exact expectation (the exact value also differs between the two verifiers here, so a walk that
    ignored its rule would show)."""
    toy = Toy(seed=3, vocab=4)
    view, _ = sampled_view(toy, draft_fixed_tree(Brancher((1, 2, 1)), toy, PROMPT, widths=(2, 1, 2)))
    law = accepted_length_law(verifier, view)
    exact = sum(k * p for k, p in enumerate(law))
    sd = math.sqrt(sum(k * k * p for k, p in enumerate(law)) - exact**2)
    rng = random.Random(11)
    n = 20_000
    mean = sum(len(verify_walk(verifier, view, UniformDecisions(rng))[0]) - 1 for _ in range(n)) / n
    assert abs(mean - exact) < 4 * sd / math.sqrt(n)
    assert sd > 0.1  # a law with spread: the check can fail


def test_verifiers_differ_on_one_tree():
    """On a toy tree the exact expectations of RRS and Traversal differ (the comparison has something to
    measure), and each is between 0 and the depth."""
    toy = Toy(seed=3, vocab=4)
    view, _ = sampled_view(toy, draft_fixed_tree(Brancher((1, 2, 1)), toy, PROMPT, widths=(2, 1, 2)))
    rrs, trav = expected_accepted("rrs", view), expected_accepted("traversal", view)
    assert 0.0 < rrs < 3.0 and 0.0 < trav < 3.0
    assert abs(rrs - trav) > 1e-3
