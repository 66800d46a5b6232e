"""Speculative sampling is exact: the empirical distribution of the first 3 generated tokens of
each method, over many seeds, equals the target's distribution computed by enumeration on a tiny
random model with a 6-token vocabulary; and deliberately wrong verifiers fail the same test.

The test: Pearson's chi-square over the 6^3 outcomes (outcomes with an expected count below 5
pooled into one bin), rejected when the p-value is below ALPHA = 1e-3 (the false-alarm rate of
each check). The seeds are fixed, so the verdicts are deterministic; a wrong verifier's deviation
gives p-values many orders of magnitude below ALPHA. (The without-replacement pitfall of STAND's
rejection walk is shown to fail on hand-built p and q in tests/engine/test_sampling.py, where q
is far enough from p for rejected siblings to be common.)
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from hydra.utils import instantiate
from scipy.stats import chi2

import goose.engine.core.verifier as verifier_module
import goose.engine.core.verify.step as step_module
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams, warp_scores
from goose.engine.core.tree import BRANCH, DraftTree
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.choose import verification_engine
from tests.conftest import method_config
from tests.tiny_models import tiny_model
from tests.toy_harness import one_thread  # noqa: F401  (fixture: one intra-op thread)

VOCAB = 6
PROMPT = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
NEW_TOKENS = 3
SAMPLES = 1500
ALPHA = 1e-3
SETTINGS = {
    "T0.6": SamplingParams(temperature=0.6),
    "T1-top_k4-top_p0.9": SamplingParams(temperature=1.0, top_k=4, top_p=0.9),
}
# Small configurations of every method (the tiny vocabulary holds fewer than Goose's K = 10 ids).
METHODS = {
    "ar": None,
    "pld": {},
    "tr": {"k": 4, "template": [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0]]},
    "eagle2": {"k": 4},
    "goose": {"k": 4},
    # unigram keys: q is the target's distribution after the same token in another context, so q
    # differs from p and rejections (and the without-replacement correction) happen often
    "stand": {"k": 6, "max_children": 3, "budget": 12, "max_order": 1},
}


@pytest.fixture(scope="module")
def engine() -> VerificationEngine:
    return verification_engine(tiny_model("llama", seed=0, vocab=VOCAB), eos_token_ids=(), context_length=64)


def exact_distribution(model: torch.nn.Module, params: SamplingParams) -> dict[tuple[int, ...], float]:
    """P(first NEW_TOKENS tokens = x) under AR sampling with `params`, by enumeration."""

    def warped(context: list[int]) -> list[float]:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context])).logits[0, -1:]
        return torch.softmax(warp_scores(logits, params), dim=-1)[0].tolist()

    probs: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(NEW_TOKENS):
        nxt: dict[tuple[int, ...], float] = {}
        for prefix, mass in probs.items():
            if mass == 0.0:
                continue
            for x, px in enumerate(warped(PROMPT + list(prefix))):
                if px > 0.0:
                    nxt[prefix + (x,)] = mass * px
        probs = nxt
    return probs


def chi_square_p_value(counts: Counter, exact: dict[tuple[int, ...], float], n: int) -> float:
    observed, expected = [], []
    pooled_obs, pooled_exp = 0.0, 0.0
    for outcome in set(exact) | set(counts):
        e = exact.get(outcome, 0.0) * n
        if e < 5.0:
            pooled_obs += counts.get(outcome, 0)
            pooled_exp += e
        else:
            observed.append(counts.get(outcome, 0))
            expected.append(e)
    if pooled_exp > 0.0 or pooled_obs > 0:
        observed.append(pooled_obs)
        expected.append(max(pooled_exp, 1e-12))
    stat = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    return float(chi2.sf(stat, len(observed) - 1))


def make_drafter(method: str):
    if METHODS[method] is None:
        return ARDrafter()
    cfg = method_config(method).drafter
    return instantiate(cfg, _convert_="all", **METHODS[method])


def empirical(engine: VerificationEngine, method: str, params: SamplingParams) -> tuple[Counter, float]:
    """Outcome counts over SAMPLES seeds, and the mean drafted-tree size (to check that the
    method really drafted trees)."""
    drafter = make_drafter(method)
    counts: Counter = Counter()
    sizes: list[int] = []
    for seed in range(SAMPLES):
        gen = generate(engine, drafter, PROMPT, NEW_TOKENS, sampling=params, seed=seed)
        counts[tuple(gen.output_ids)] += 1
        sizes.extend(s.tree_size for s in gen.steps)
    return counts, sum(sizes) / max(len(sizes), 1)


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("method", list(METHODS))
def test_speculative_sampling_matches_the_target_distribution(engine, method, setting):
    params = SETTINGS[setting]
    exact = exact_distribution(engine.model, params)
    counts, mean_tree = empirical(engine, method, params)
    if method != "ar":
        assert mean_tree > 1.2, f"{method} drafted almost nothing (mean tree {mean_tree:.2f}): a vacuous test"
    p_value = chi_square_p_value(counts, exact, SAMPLES)
    assert p_value > ALPHA, f"{method} at {setting}: chi-square p = {p_value:.2e}"


def _argmax_matching(scores: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A wrong verifier: accept a child when it is the parent's *argmax* (greedy matching) while
    the bonus token is sampled."""
    return scores.argmax(dim=-1), (scores + noise).argmax(dim=-1)


def test_argmax_matching_verifier_is_rejected(engine, monkeypatch):
    monkeypatch.setattr(verifier_module, "sample_and_match", _argmax_matching)  # the first token
    monkeypatch.setattr(step_module, "sample_and_match", _argmax_matching)  # every tree step
    params = SETTINGS["T0.6"]
    counts, _ = empirical(engine, "tr", params)
    p_value = chi_square_p_value(counts, exact_distribution(engine.model, params), SAMPLES)
    assert p_value < ALPHA, f"the argmax-matching verifier passed (p = {p_value:.2e}): the test cannot fail"


def test_mean_accepted_length_of_a_fixed_tree_is_the_sum_of_path_probabilities(engine):
    """E[accepted nodes] = Σ_v p(path(v)) for a fixed tree under sample-and-match (module
    goose.engine.core.sampling), within 4 standard errors over 2000 seeds."""
    params = SamplingParams(temperature=0.8)
    model = engine.model

    def warped(context: list[int]) -> list[float]:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context])).logits[0, -1:]
        return torch.softmax(warp_scores(logits, params), dim=-1)[0].tolist()

    # anchor a, children 0..2, grandchildren under child 0, a chain of depth 3 under it
    anchor = 3
    tree = DraftTree.single(anchor)
    c0 = tree.add(4, 0, BRANCH)
    tree.add(5, 0, BRANCH)
    tree.add(0, 0, BRANCH)
    g0 = tree.add(1, c0, BRANCH)
    tree.add(2, c0, BRANCH)
    tree.add(3, g0, BRANCH)
    exact = 0.0
    for node in range(1, len(tree)):
        path, u = [], node
        while u > 0:
            path.append(tree.tokens[u])
            u = tree.parents[u]
        path.reverse()
        prob, context = 1.0, [*PROMPT, anchor]
        for token in path:
            prob *= warped(context)[token]
            context.append(token)
        exact += prob
    accepted = []
    for seed in range(2000):
        engine.prefill(PROMPT + [anchor], max_new_tokens=8, sampling=params, seed=seed)
        engine.truncate(len(PROMPT))  # the anchor becomes node 0 of the tree (its row is rewritten)
        outcome = engine.verify(tree, budget=8)
        accepted.append(len(outcome.accepted_nodes) - 1)
    mean = sum(accepted) / len(accepted)
    var = sum((a - mean) ** 2 for a in accepted) / (len(accepted) - 1)
    assert abs(mean - exact) < 4 * (var / len(accepted)) ** 0.5, (mean, exact)


def test_deterministic_drafts_reproduce_ar_sampling_token_for_token(engine):
    """Sample-and-match with position-keyed noise commits AR's sample with the same seed."""
    params = SamplingParams(temperature=0.8, top_p=0.95)
    for method in ("pld", "tr", "eagle2", "goose"):
        drafter = make_drafter(method)
        for seed in range(20):
            ar = generate(engine, ARDrafter(), PROMPT, 16, sampling=params, seed=seed)
            spec = generate(engine, drafter, PROMPT, 16, sampling=params, seed=seed)
            assert spec.output_ids == ar.output_ids, (method, seed)


def test_seeds_decide_the_sample(engine):
    params = SamplingParams(temperature=1.0)
    runs = [
        generate(engine, make_drafter("goose"), PROMPT, 16, sampling=params, seed=s).output_ids
        for s in (7, 7, 8)
    ]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_enumeration_covers_every_outcome(engine):
    """The exact distribution sums to 1 (the reference itself is right)."""
    for params in SETTINGS.values():
        assert sum(exact_distribution(engine.model, params).values()) == pytest.approx(1.0, abs=1e-6)
