"""Sampling settings, the warp, the target's noise and the rejection walk on hand-built inputs."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch
from scipy.stats import chi2

import goose.engine.core.verify.inputs as inputs_module
from baselines.stand import gumbel_order
from goose.engine.core.sampling import SamplingParams, TargetNoise, derive_seed, warp_scores
from goose.engine.core.verify.inputs import RejectionInputs
from goose.engine.core.verify.rrs import rejection_walk


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"temperature": -0.1}, "sampling.temperature"),
        ({"temperature": 1.0, "top_p": 0.0}, "sampling.top_p"),
        ({"temperature": 1.0, "top_p": 1.5}, "sampling.top_p"),
        ({"temperature": 1.0, "top_k": -1}, "sampling.top_k"),
    ],
)
def test_invalid_sampling_settings_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        SamplingParams(**kwargs)


def test_warp_applies_temperature_top_k_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 1.0]])
    p = torch.softmax(warp_scores(logits, SamplingParams(temperature=0.5)), -1)[0]
    assert torch.allclose(p, torch.softmax(logits[0] / 0.5, -1))
    top_k = warp_scores(logits, SamplingParams(temperature=1.0, top_k=2))[0]
    # the two largest are 2.0 and the tie at 1.0: ties at the k-th value are kept
    assert torch.isinf(top_k).tolist() == [False, False, True, True, False]
    probs = torch.softmax(logits[0], -1)  # ~ 0.52, 0.19, 0.07, 0.03, 0.19
    assert probs[0] < 0.6 < probs[0] + probs[1]
    top_p = warp_scores(logits, SamplingParams(temperature=1.0, top_p=0.6))[0]
    # 0.52 < 0.6, so one more token joins (the first 0.19 in sort order); then the mass is reached
    assert (~torch.isinf(top_p)).sum().item() == 2 and not torch.isinf(top_p[0])
    only_top = warp_scores(logits, SamplingParams(temperature=1.0, top_p=0.5))[0]
    assert (~torch.isinf(only_top)).tolist() == [True, False, False, False, False]


def test_noise_is_a_function_of_seed_and_position():
    a, b = TargetNoise(3, 50, "cpu"), TargetNoise(3, 50, "cpu")
    assert torch.equal(a.rows(10, 2), b.rows(10, 2))
    assert not torch.equal(a.row(10), a.row(11))
    assert not torch.equal(a.row(10), TargetNoise(4, 50, "cpu").row(10))
    assert a.uniform(5, 0) == b.uniform(5, 0) != a.uniform(5, 1)
    assert 0.0 < a.uniform(5, 0) < 1.0
    assert derive_seed(1, 2) != derive_seed(2, 1)


P = [0.45, 0.25, 0.15, 0.1, 0.05]  # the target at one node
Q = [0.05, 0.15, 0.3, 0.5, 0.0]  # a proposal far from it (support: tokens 0-3)


def _walk_outputs(trials: int, children_count: int, seed: int = 0) -> Counter:
    """Output token of one rejection step at a root whose `children_count` children are drawn
    without replacement from Q, with fresh Gumbel noise and uniforms per trial."""
    rng = random.Random(seed)
    support = tuple(range(4))
    counts: Counter = Counter()
    for _ in range(trials):
        order = gumbel_order(Q[:4], rng)[:children_count]
        kids = [support[i] for i in order]
        candidates = list(dict.fromkeys(kids + list(support)))
        g = {x: -math.log(-math.log(rng.random())) for x in range(5)}
        outside = [x for x in range(5) if x not in candidates]
        best = max(outside, key=lambda x: math.log(P[x]) + g[x]) if outside else -1
        inputs = RejectionInputs(
            candidates=[candidates] + [[] for _ in kids],
            p=[[P[x] for x in candidates]] + [[] for _ in kids],
            g=[[g[x] for x in candidates]] + [[] for _ in kids],
            outside_token=[best] + [0 for _ in kids],
            outside_value=[math.log(P[best]) + g[best] if outside else -math.inf] + [0.0 for _ in kids],
        )
        tokens = [99, *kids]
        children = [list(range(1, len(kids) + 1))] + [[] for _ in kids]
        proposals = [(support, tuple(Q[:4]))] + [None for _ in kids]
        path, bonus = rejection_walk(
            children, tokens, proposals, inputs, lambda t, r: rng.random(), 0, [0] + [1] * len(kids)
        )
        counts[tokens[path[1]] if len(path) > 1 else bonus] += 1
    return counts


def _p_value(counts: Counter, trials: int) -> float:
    stat = sum((counts.get(x, 0) - trials * p) ** 2 / (trials * p) for x, p in enumerate(P))
    return float(chi2.sf(stat, len(P) - 1))


@pytest.mark.parametrize("children_count", [1, 2, 3])
def test_rejection_walk_outputs_the_target_distribution(children_count):
    trials = 20000
    assert _p_value(_walk_outputs(trials, children_count), trials) > 1e-3


def test_rejection_walk_without_renormalising_q_is_wrong(monkeypatch):
    """The same check catches the classic without-replacement bug (q not renormalised after a
    rejected sibling)."""
    monkeypatch.setattr(inputs_module, "normalised", lambda q: {x: v for x, v in q.items() if v > 0.0})
    trials = 20000
    assert _p_value(_walk_outputs(trials, 3), trials) < 1e-6


def test_gumbel_order_samples_without_replacement():
    rng = random.Random(1)
    probs = [0.5, 0.3, 0.2, 0.0]
    firsts, seconds = Counter(), Counter()
    for _ in range(20000):
        order = gumbel_order(probs, rng)
        assert sorted(order) == [0, 1, 2]  # zero-probability entries never drawn, no repeats
        firsts[order[0]] += 1
        seconds[order[1]] += 1
    assert firsts[0] / 20000 == pytest.approx(0.5, abs=0.015)
    # P(second = 2) = 0.5 * 0.2/0.5 + 0.3 * 0.2/0.7
    assert seconds[2] / 20000 == pytest.approx(0.5 * 0.4 + 0.3 * 0.2 / 0.7, abs=0.015)
