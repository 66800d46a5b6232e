"""experiments.failed_step without a model: step kinds, and each kind priced against AR's steps at the same
round, prompt and position, on hand-built records with exact values."""

from __future__ import annotations

import pytest

from experiments.failed_step import matched_kinds, positioned, step_kind, summarize
from goose.engine.core.decode import Generation, StepRecord


def step(
    seconds: float,
    *,
    tree: int = 1,
    accepted: int = 0,
    new: int = 1,
    drafted: bool = True,
    fwd: float = 0.0,
    cut: bool = False,
) -> StepRecord:
    """A step of `seconds` in all, `fwd` of them the forward (the rest counted as verify's walk)."""
    return StepRecord(
        route="ar",
        tree_size=tree,
        accepted_len=accepted,
        new_tokens=new,
        offered={},
        accepted={},
        draft_s=0.0,
        verify_s=seconds,
        update_s=0.0,
        forward_s=fwd,
        drafted=drafted,
        cut_to_anchor=cut,
    )


def gen(*steps: StepRecord) -> Generation:
    n = sum(s.new_tokens for s in steps)
    return Generation(
        output_ids=[0] * n,
        forward_calls=len(steps),
        wall_time_s=sum(s.verify_s for s in steps),
        prefill_s=0.0,
        steps=list(steps),
    )


def test_step_kinds():
    assert step_kind(step(1.0, drafted=False)) == "skipped"
    assert step_kind(step(1.0, tree=1)) == "empty"
    assert step_kind(step(1.0, tree=1, cut=True)) == "cut"
    assert step_kind(step(1.0, tree=4, accepted=0)) == "failed"
    assert step_kind(step(1.0, tree=4, accepted=2, new=3)) is None


def test_positions_count_the_tokens_committed_before_each_step():
    g = gen(step(1.0, new=3, tree=4, accepted=2), step(1.0), step(1.0, new=2, tree=3, accepted=1))
    assert [pos for pos, _ in positioned(g)] == [0, 3, 4]


def test_each_kind_is_priced_against_ar_at_its_own_position():
    # AR's steps grow slower along the context: 1, 2, 3, 4, 5 (ms), forward 0.8 of each
    ar = gen(*(step(k * 1e-3, fwd=0.8 * k * 1e-3) for k in range(1, 6)))
    # the method: an accepted step (3 tokens, positions 0-2), then a gated step at position 3 (4.4 ms, of which
    # 3.2 forward), then a failed step at position 4 (6 ms, of which 4.5 forward)
    m = gen(
        step(2e-3, tree=4, accepted=2, new=3),
        step(4.4e-3, drafted=False, fwd=3.2e-3),
        step(6e-3, tree=3, accepted=0, fwd=4.5e-3),
    )
    out = matched_kinds([[m]], [[ar]])
    skipped, failed = out["skipped"], out["failed"]
    assert skipped["count"] == 1 and skipped["overhead"] == pytest.approx(4.4 / 4 - 1, abs=1e-12)
    assert skipped["forward_overhead"] == pytest.approx(0.0, abs=1e-12)
    assert skipped["beyond_forward_ms"] == pytest.approx((4.4 - 3.2) - (4 - 3.2), abs=1e-9)
    assert failed["overhead"] == pytest.approx(6 / 5 - 1, abs=1e-12)
    assert failed["beyond_forward_ms"] == pytest.approx(1.5 - 1.0, abs=1e-9)
    assert out["empty"] == {
        "count": 0,
        "overhead": None,
        "forward_overhead": None,
        "beyond_forward_ms": None,
        "ar_step_ms": None,
    }
    # against AR's mean step (3 ms) the gated step looks 47 % dearer; at its own position it is 10 %
    whole = summarize({"ar": [[ar]], "m": [[m]]})["contenders"]["m"]
    assert whole["skipped"]["overhead"] == pytest.approx(4.4 / 3 - 1, abs=1e-12)
    assert whole["matched"] == out


def test_steps_past_ar_s_last_position_are_left_out():
    ar = gen(step(1e-3), step(1e-3))
    m = gen(step(1e-3, tree=3, accepted=1, new=2), step(1e-3, drafted=False))
    assert matched_kinds([[m]], [[ar]])["skipped"]["count"] == 0
