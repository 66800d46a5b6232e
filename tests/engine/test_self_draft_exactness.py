"""The self-draft's sampled drafts keep the target's distribution (tests/engine/test_sampling_exactness.py's
chi-square over the first 3 tokens, 1,500 seeds, α = 1e-3; 6 are generated, so
that drafts deeper than the first token decide them) for the chain and the without-replacement tree,
with q far enough from p that rejections and residual draws are common (counted and asserted); a drafter that
draws from the untruncated q while reporting the truncated one fails the same test. The same holds for
every verifier on every draft shape it applies to (`sampling.verifier`: Block on the chain, Traversal,
RRS with and without replacement, GBV on i.i.d. paths and the delayed tree), and a Block verifier with
h = w fails it."""

from __future__ import annotations

from collections import Counter

import pytest

import goose.engine.core.verify.block as block_module
from baselines.self_draft import SelfDraftDrafter
from baselines.self_draft.search import sample_index, truncated_proposals
from goose.engine.core.decode import generate
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.choose import verification_engine
from tests.baselines.self_draft_models import deep_tiny_model
from tests.engine.test_sampling_exactness import (
    ALPHA,
    NEW_TOKENS,
    PROMPT,
    SAMPLES,
    VOCAB,
    chi_square_p_value,
    exact_distribution,
)
from tests.engine.test_verifier_exactness import (
    Counting,
    _assert_exercised,
    counting,  # noqa: F401  (fixture: counts the walk's tests)
)
from tests.toy_harness import one_thread  # noqa: F401  (fixture: one intra-op thread)

PARAMS = SamplingParams(temperature=1.0)
# q: the model without layer 1's attention and layer 2's MLP, cut to 3 of the 6 tokens
SHAPES = {
    "chain": dict(shape="chain", max_depth=3, confidence=0.0),
    "tree": dict(shape="tree", max_depth=3, max_children=3, coverage=1.0, beam=2, budget=10),
    "iid": dict(shape="iid", paths=3, path_length=3),
    "delayed": dict(shape="delayed", trunk=1, paths=3, path_length=2),
}
# (shape, verifier): each verifier on the shapes it applies to (goose/engine/core/verify/rules.py)
IN_DEFAULT_SUITE = [("chain", "block"), ("iid", "gbv")]
SLOW = [
    ("chain", "rrs_iid"),
    ("chain", "traversal"),
    ("tree", "traversal"),
    ("tree", "rrs"),
    ("iid", "rrs_iid"),
    ("iid", "traversal"),
    ("delayed", "gbv"),
    ("delayed", "traversal"),
]
COMMON = dict(top_k=3, skip_attention=[1], skip_mlp=[2])


@pytest.fixture(scope="module")
def engine() -> VerificationEngine:
    model = deep_tiny_model("llama", layers=4, seed=0, vocab=VOCAB)
    return verification_engine(model, eos_token_ids=(), context_length=64)


class UntruncatedDraws(SelfDraftDrafter):
    """Broken: reports the truncated q but draws chain tokens from the untruncated warped q."""

    def _expand(self, tokens, parents, first):
        logits = self._forward().tree(tokens, parents, first, self.skip)
        cut = truncated_proposals(logits, self.sampling, self.top_k)
        full = truncated_proposals(logits, self.sampling, VOCAB)
        self._full = {id(c): f for c, f in zip(cut, full, strict=True)}
        return cut

    def _draw(self, q):
        full = self._full[id(q)]
        return full[0][sample_index(full[1], self._rng)]


def run(
    engine: VerificationEngine, drafter: SelfDraftDrafter, params: SamplingParams = PARAMS
) -> tuple[Counter, Counter]:
    """Outcome counts over SAMPLES seeds, and what the rejection walk did: drafted nodes, rejected drafts
    (siblings before the accepted child and the children of the last accepted node) and residual draws
    (a bonus drawn after rejecting every child of the last node)."""
    counts: Counter = Counter()
    walk: Counter = Counter()

    def on_step(tree, outcome, record):
        children, path = tree.children(), outcome.accepted_nodes
        walk["drafted"] += len(tree) - 1
        for u, v in zip(path[:-1], path[1:], strict=True):
            walk["rejected"] += children[u].index(v)
        if len(outcome.new_tokens) == len(path) and children[path[-1]]:  # the walk ended at path[-1]
            walk["rejected"] += len(children[path[-1]])
            walk["residual_draws"] += 1

    for seed in range(SAMPLES):
        gen = generate(engine, drafter, PROMPT, NEW_TOKENS + 3, on_step=on_step, sampling=params, seed=seed)
        counts[tuple(gen.output_ids[:NEW_TOKENS])] += 1
    return counts, walk


@pytest.mark.parametrize("shape", list(SHAPES))
def test_self_draft_sampling_matches_the_target_distribution(engine, shape):
    counts, walk = run(engine, SelfDraftDrafter(**SHAPES[shape], **COMMON))
    # the walk really rejects drafts and draws from residuals, often
    assert walk["drafted"] > 2 * SAMPLES, walk
    assert walk["rejected"] > 0.2 * walk["drafted"], walk
    assert walk["residual_draws"] > 0.2 * SAMPLES, walk
    p_value = chi_square_p_value(counts, exact_distribution(engine.model, PARAMS), SAMPLES)
    assert p_value > ALPHA, f"self-draft {shape}: chi-square p = {p_value:.2e} ({walk})"


def test_drafting_outside_the_reported_q_is_rejected(engine):
    counts, walk = run(engine, UntruncatedDraws(**SHAPES["chain"], **COMMON))
    p_value = chi_square_p_value(counts, exact_distribution(engine.model, PARAMS), SAMPLES)
    assert p_value < ALPHA, (
        f"the untruncated-draw drafter passed (p = {p_value:.2e}, {walk}): the test cannot fail"
    )


def _verified_p_value(engine, shape: str, verifier: str) -> float:
    params = SamplingParams(temperature=1.0, verifier=verifier)
    counts, _ = run(engine, SelfDraftDrafter(**SHAPES[shape], **COMMON), params)
    return chi_square_p_value(counts, exact_distribution(engine.model, params), SAMPLES)


@pytest.mark.parametrize(
    ("shape", "verifier"),
    IN_DEFAULT_SUITE + [pytest.param(*case, marks=pytest.mark.slow) for case in SLOW],
)
@pytest.mark.usefixtures("counting")
def test_every_verifier_keeps_the_self_drafts_target(engine, shape, verifier):
    p_value = _verified_p_value(engine, shape, verifier)
    _assert_exercised(Counting.counts)
    assert p_value > ALPHA, f"self-draft {shape} + {verifier}: chi-square p = {p_value:.2e}"


@pytest.mark.usefixtures("counting")
def test_block_with_h_equal_to_w_on_the_self_draft_is_rejected(engine, monkeypatch):
    monkeypatch.setattr(block_module, "acceptance_prob", lambda z, w: w)
    p_value = _verified_p_value(engine, "chain", "block")
    assert p_value < ALPHA, f"the broken block verifier passed (p = {p_value:.2e}): the test cannot fail"
