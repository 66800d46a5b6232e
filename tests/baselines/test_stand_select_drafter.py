"""stand_select's drafter on a tiny random model: the chosen action reaches the drafted tree, the online
selector's exploring schedule, greedy output equal to AR's, and sampled output distributed as the target's
(chi-square over the first tokens, as tests/engine/test_verifier_exactness.py, with the proposal reversed so
that rejections are common) while the chosen shapes vary from step to step."""

from __future__ import annotations

from collections import Counter

import pytest

from baselines.stand_select import StandSelectDrafter
from baselines.stand_select.actions import Action
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams
from tests.engine.test_sampling_exactness import ALPHA, chi_square_p_value
from tests.engine.test_verifier_exactness import (
    COMPARED,
    NEW_TOKENS,
    PROMPT,
    SAMPLES,
    VOCAB,
    ReversedStand,
    exact_distribution,
)
from tests.engine.test_verifier_exactness import engine as engine  # noqa: F401  (fixture)
from tests.toy_harness import one_thread  # noqa: F401  (fixture: one intra-op thread)

SMALL = {"k": VOCAB, "max_order": 1, "budget": 12, "num_paths": 2, "trunk_len": 1, "path_len": 2}
GRID = {"max_paths": 3, "max_trunk": 2, "max_path_len": 3}


class ReversedSelect(ReversedStand, StandSelectDrafter):
    """stand_select drafting from STAND's proposal with its ranking reversed (far from p)."""


class Fixed:
    """A selector whose estimates favour one action (not online: no exploring steps)."""

    def __init__(self, action: Action) -> None:
        self.action = action

    def estimates(self, features):
        return {self.action: 5.0, Action(1, 0, 1): 0.1}

    def learn(self, features, values):
        raise AssertionError("a trained selector learns nothing in the run")


def branch_and_paths(stats: dict) -> set[str]:
    return {k for k in stats if k.startswith(("branch_depth_", "paths_", "path_len_", "explore"))}


def test_the_chosen_action_shapes_the_draft(engine):
    drafter = StandSelectDrafter(**SMALL, **GRID)
    drafter.selector = Fixed(Action(1, 2, 3))
    generate(engine, drafter, PROMPT * 2, 12, sampling=SamplingParams(temperature=1.0), seed=0)
    assert branch_and_paths(drafter.stats) == {"branch_depth_2", "paths_1", "path_len_3"}


def test_the_online_selector_explores_every_trunk_in_turn(engine):
    drafter = StandSelectDrafter(**SMALL, **GRID, explore_every=2)
    params = SamplingParams(temperature=1.0, verifier="traversal")
    generate(engine, drafter, PROMPT * 2, 24, sampling=params, seed=0)
    steps = sum(v for k, v in drafter.stats.items() if k.startswith("paths_"))
    assert drafter.stats["explore_steps"] == (steps + 1) // 2
    assert {f"branch_depth_{t}" for t in range(3)} <= set(drafter.stats)  # the largest tree at L1 = 0, 1, 2
    roots = [[0.0] * 10] + [[1.0, top, *[0.0] * 8] for top in (0.1, 0.5, 0.7, 0.9)]  # every bin
    learnt = [drafter.selector.estimates(x) for x in roots]
    assert any(learnt)  # the verified trees' exact values reached the estimates


def test_greedy_output_is_ars(engine):
    expected = generate(engine, ARDrafter(), PROMPT * 2, 16).output_ids
    drafter = StandSelectDrafter(**SMALL, **GRID, explore_every=3)
    assert generate(engine, drafter, PROMPT * 2, 16).output_ids == expected


@pytest.mark.parametrize("verifier", ["traversal", pytest.param("gbv", marks=pytest.mark.slow)])
def test_sampled_output_matches_the_target_while_the_shape_varies(engine, verifier):
    params = SamplingParams(temperature=1.0, verifier=verifier)
    drafter = ReversedSelect(**SMALL, **GRID, explore_every=3)
    counts: Counter = Counter()
    chosen: set[str] = set()
    for seed in range(SAMPLES):
        gen = generate(engine, drafter, PROMPT, NEW_TOKENS, sampling=params, seed=seed)
        counts[tuple(gen.output_ids[:COMPARED])] += 1
        chosen |= {k for k in gen.drafter_stats if k.startswith(("paths_", "branch_depth_"))}
    p_value = chi_square_p_value(counts, exact_distribution(engine.model, params), SAMPLES)
    assert len(chosen) >= 4, chosen  # several K and L1 were drafted
    assert p_value > ALPHA, f"stand_select with {verifier}: chi-square p = {p_value:.2e}"


def test_logging_roots_leaves_the_run_unchanged(engine):
    """experiments.selector.data's drafter scores a draft per trunk length at every logged root without
    committing: the run's output and forward count are those of stand_select alone, and each root holds
    every action's exact value."""
    from experiments.selector.data import LoggingSelect

    params = SamplingParams(temperature=1.0, verifier="traversal")
    plain = StandSelectDrafter(**SMALL, **GRID, explore_every=3)
    logging = LoggingSelect(engine, 2, "traversal", **SMALL, **GRID, explore_every=3)
    for seed in range(3):
        a = generate(engine, plain, PROMPT * 2, 16, sampling=params, seed=seed)
        b = generate(engine, logging, PROMPT * 2, 16, sampling=params, seed=seed)
        assert (a.output_ids, a.forward_calls, a.drafter_stats) == (
            b.output_ids,
            b.forward_calls,
            b.drafter_stats,
        )
    assert logging.roots and all(set(r["values"]) == {x.label() for x in logging.grid} for r in logging.roots)
    assert all(0.0 <= v <= 5.0 for r in logging.roots for v in r["values"].values())  # L1 + L2 <= 2 + 3
    assert any(v > 0.0 for r in logging.roots for v in r["values"].values())


def test_the_shipped_trained_selector_drives_drafting(engine):
    """selector=smollm2-135m-rrs: no exploring steps, nothing learnt, greedy output AR's, and its choices
    shape the drafts of a sampled run."""
    drafter = StandSelectDrafter(**{**SMALL, "budget": 40}, selector="smollm2-135m-rrs")
    assert "explore_every" not in drafter.config() and drafter.config()["selector"] == "smollm2-135m-rrs"
    expected = generate(engine, ARDrafter(), PROMPT * 2, 16).output_ids
    assert generate(engine, drafter, PROMPT * 2, 16).output_ids == expected
    gen = generate(engine, drafter, PROMPT * 2, 24, sampling=SamplingParams(temperature=1.0), seed=0)
    assert "explore_steps" not in gen.drafter_stats
    assert any(k.startswith("paths_") for k in gen.drafter_stats)
