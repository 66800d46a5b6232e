"""End to end, on a tiny random model: STAND drafts verified by Traversal Verification (trees), Block
Verification (chains) and GBV (i.i.d. paths) output the target's distribution of the first 3 tokens
(chi-square over the 4^3 outcomes, as tests/engine/test_sampling_exactness.py; 4 tokens are generated so
that the first step's tree has depth 2; T = 0.6 and 3 tokens give the broken variants the largest
deviation among the settings tried), while rejections and residual draws happen often (the drafter's q reverses the
ranking of STAND's, far from p), and a broken verifier fails the same test.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import goose.engine.core.verify.block as block_module
import goose.engine.core.verify.step as verifier_module
from baselines.stand import StandDrafter
from goose.engine.core.decode import generate
from goose.engine.core.sampling import SamplingParams, warp_scores
from goose.engine.core.verifier import VerificationEngine
from goose.engine.core.verify.inputs import Dist, NoiseDecisions
from goose.engine.forward.choose import verification_engine
from tests.engine.test_sampling_exactness import ALPHA, chi_square_p_value
from tests.tiny_models import tiny_model
from tests.toy_harness import one_thread  # noqa: F401  (fixture: one intra-op thread)

VOCAB = 4
PROMPT = [1, 2, 3, 0, 1, 2, 3, 0, 1, 2]
NEW_TOKENS = 4
COMPARED = 3  # the first tokens whose joint distribution is tested
TEMPERATURE = 0.6
SAMPLES = 1000
MIX = 0.2  # q = (1 − MIX) · STAND's q with its ranking reversed + MIX · uniform


class ReversedStand(StandDrafter):
    """STAND whose proposal gives its stored tokens their probabilities in reverse order: still the q the
    drafts are sampled from (so every verifier stays exact), but far from p, so that rejections are common."""

    def _proposal_at(self, context):
        found = super()._proposal_at(context)
        if found is None or self.sampling.greedy:
            return found
        ids, q = found
        return ids, [(1 - MIX) * x + MIX / len(q) for x in reversed(q)]


def exact_distribution(model: torch.nn.Module, params: SamplingParams) -> dict[tuple[int, ...], float]:
    """P(first COMPARED tokens = x) under AR sampling with `params`, by enumeration."""
    probs: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(COMPARED):
        nxt: dict[tuple[int, ...], float] = {}
        for prefix, mass in probs.items():
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([PROMPT + list(prefix)])).logits[0, -1:]
            for x, px in enumerate(torch.softmax(warp_scores(logits, params), dim=-1)[0].tolist()):
                if px > 0.0:
                    nxt[prefix + (x,)] = mass * px
        probs = nxt
    return probs


class Counting(NoiseDecisions):
    """NoiseDecisions that count rejections and bonus draws from a residual (not the node's p)."""

    counts: Counter = Counter()
    bonus_from_p = False

    def accept(self, num, den, node, rank):
        ok = super().accept(num, den, node, rank)
        Counting.counts["tests"] += 1
        Counting.counts["rejected"] += not ok
        return ok

    def draw(self, node, dist):
        Counting.counts["draws"] += 1
        original = Dist.target(self.inputs.candidates[node], self.inputs.p[node])
        Counting.counts["residual_draws"] += dist.inside != original.inside or dist.scale != 1.0
        return super().draw(node, original if Counting.bonus_from_p else dist)


@pytest.fixture(scope="module")
def engine() -> VerificationEngine:
    return verification_engine(tiny_model("llama", seed=0, vocab=VOCAB), eos_token_ids=(), context_length=64)


@pytest.fixture
def counting(monkeypatch):
    Counting.counts = Counter()
    Counting.bonus_from_p = False
    monkeypatch.setattr(verifier_module, "NoiseDecisions", Counting)
    return Counting


def _drafter(shape: str, **more) -> StandDrafter:
    hyper = {"k": VOCAB, "max_children": 3, "budget": 12, "max_order": 1, "num_paths": 3, "path_len": 3}
    return ReversedStand(shape=shape, **{**hyper, **more})


def _p_value(
    engine, shape: str, verifier: str, temperature: float = TEMPERATURE, **more
) -> tuple[float, Counter]:
    params = SamplingParams(temperature=temperature, verifier=verifier)
    drafter = _drafter(shape, **more)
    counts: Counter = Counter()
    for seed in range(SAMPLES):
        out = generate(engine, drafter, PROMPT, NEW_TOKENS, sampling=params, seed=seed).output_ids
        counts[tuple(out[:COMPARED])] += 1
    return chi_square_p_value(counts, exact_distribution(engine.model, params), SAMPLES), counts


def _assert_exercised(counts: Counter) -> None:
    assert counts["rejected"] > 0.2 * counts["tests"], counts  # a fifth of the tests reject
    assert counts["residual_draws"] > 0.08 * counts["draws"], counts  # the bonus often from a residual


def test_stand_tree_with_traversal_matches_the_target(engine, counting):
    p_value, _ = _p_value(engine, "tree", "traversal")
    _assert_exercised(counting.counts)
    assert p_value > ALPHA, f"traversal: chi-square p = {p_value:.2e}"


def test_stand_chain_with_block_matches_the_target(engine, counting):
    p_value, _ = _p_value(engine, "chain", "block")
    _assert_exercised(counting.counts)
    assert p_value > ALPHA, f"block: chi-square p = {p_value:.2e}"


def test_traversal_with_the_bonus_from_the_original_p_is_rejected(engine, counting):
    counting.bonus_from_p = True
    p_value, _ = _p_value(engine, "tree", "traversal")
    assert p_value < ALPHA, f"the broken traversal passed (p = {p_value:.2e}): the test cannot fail"


def test_block_with_h_equal_to_w_is_rejected(engine, counting, monkeypatch):
    monkeypatch.setattr(block_module, "acceptance_prob", lambda z, w: w)
    p_value, _ = _p_value(engine, "chain", "block")
    assert p_value < ALPHA, f"the broken block verifier passed (p = {p_value:.2e}): the test cannot fail"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "verifier"),
    [("iid", "gbv"), ("iid", "rrs_iid"), ("iid", "traversal"), ("delayed", "gbv"), ("tree", "rrs")],
)
def test_every_verifier_on_its_shapes_matches_the_target(engine, counting, shape, verifier):
    p_value, _ = _p_value(engine, shape, verifier, temperature=1.0)
    _assert_exercised(counting.counts)
    assert p_value > ALPHA, f"{verifier} on {shape}: chi-square p = {p_value:.2e}"


DYNAMIC = {"trunk_len": 2, "path_len": 2, "branch_below": 0.33}  # K = 3 paths after up to 2 trunk draws


def test_the_dynamic_delay_branches_where_the_draft_is_unsure(engine):
    """branch_below reaches the drafting: with it the paths start at varying depths, without it always
    after the full trunk."""
    params = SamplingParams(temperature=1.0, verifier="gbv")
    starts = {}
    for below in (0.0, DYNAMIC["branch_below"]):
        drafter = _drafter("delayed", **{**DYNAMIC, "branch_below": below})
        seen: set[str] = set()
        for seed in range(40):
            generate(engine, drafter, PROMPT, NEW_TOKENS, sampling=params, seed=seed)
            seen |= {k[len("branch_depth_") :] for k in drafter.stats if k.startswith("branch_depth_")}
        starts[below] = seen
    assert starts[0.0] == {"2"}
    assert starts[DYNAMIC["branch_below"]] == {"0", "1", "2"}


@pytest.mark.parametrize("verifier", ["gbv", "traversal"])
def test_the_dynamic_delay_matches_the_target(engine, counting, verifier):
    p_value, _ = _p_value(engine, "delayed", verifier, temperature=1.0, **DYNAMIC)
    assert p_value > ALPHA, f"{verifier} on the dynamic delay: chi-square p = {p_value:.2e}"
