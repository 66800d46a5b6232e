"""experiments.interleaved without a model: the order rotates every round, and `state_per` decides which
prompts share one drafter (None: a fresh one per prompt; k: one per k consecutive prompts of a round)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from experiments import interleaved
from goose.engine.core.decode import Generation


@pytest.fixture
def calls(monkeypatch):
    """(what generate saw: (contender, drafter id, prompt) per call, makers of contenders a and b)."""
    seen: list[tuple[str, int, int]] = []
    ids = itertools.count()

    def fake_generate(engine, drafter, prompt_ids, max_new, sizer=None):
        seen.append((drafter.name, drafter.id, prompt_ids[0]))
        return Generation(output_ids=[0], forward_calls=1, wall_time_s=1.0, prefill_s=0.0)

    def maker(name):
        return lambda: SimpleNamespace(drafter=SimpleNamespace(name=name, id=next(ids)), sizer=None)

    monkeypatch.setattr(interleaved, "generate", fake_generate)
    return seen, {"a": maker("a"), "b": maker("b")}


@pytest.mark.parametrize(("state_per", "fresh_at"), [(None, [0, 1, 2, 3]), (2, [0, 2]), (4, [0])])
def test_state_per_shares_a_drafter_over_consecutive_prompts(calls, state_per, fresh_at):
    seen, makers = calls
    interleaved.interleaved_runs(
        None, [[0], [1], [2], [3]], makers, 2, 8, log=lambda m: None, state_per=state_per
    )
    timed = [(d, p) for name, d, p in seen[2:] if name == "a"]  # the two untimed warm-up calls left out
    assert [p for _, p in timed] == [0, 1, 2, 3] * 2
    for rnd in (timed[:4], timed[4:]):
        assert [i for i in range(4) if i == 0 or rnd[i][0] != rnd[i - 1][0]] == fresh_at
    assert {d for d, _ in timed[:4]}.isdisjoint(d for d, _ in timed[4:])  # a new round, new drafters


def test_the_order_rotates_every_round(calls):
    seen, makers = calls
    interleaved.interleaved_runs(None, [[0]], makers, 2, 8, log=lambda m: None)
    assert [name for name, _, _ in seen[2:]] == ["a", "b", "b", "a"]


def test_state_per_must_be_positive(calls):
    with pytest.raises(ValueError, match="state_per = 0"):
        interleaved.interleaved_runs(None, [[0]], calls[1], 1, 8, state_per=0)
