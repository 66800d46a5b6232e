"""The delayed tree's shape per setting: the fastest (K, L1, L2) over the prompts every shape and AR ran,
its overrides in the method's own field names."""

from __future__ import annotations

import pytest

from analysis.studies.verifiers.delayed_shape import shape_table
from goose.records.delayed_shape import choose_shapes

FIELDS = ["num_paths", "trunk_len", "path_len"]


def row(method, shape, prompt, tokens, wall, calls=None):
    return {
        "method": method,
        "shape": list(shape),
        "shape_fields": FIELDS if method != "ar" else [],
        "bench": "humaneval",
        "prompt_id": prompt,
        "generated_tokens": tokens,
        "wall_time_s": wall,
        "forward_calls": calls or tokens,
    }


def test_the_fastest_shape_over_the_common_prompts_is_chosen():
    rows = [
        row("ar", (), "0", 60, 3.0),
        row("ar", (), "1", 60, 3.0),
        row("stand_delayed", (2, 1, 2), "0", 60, 2.0, 40),  # 30 tok/s
        row("stand_delayed", (2, 1, 2), "1", 60, 2.0, 40),
        row("stand_delayed", (4, 2, 4), "0", 60, 1.5, 30),  # 40 tok/s ...
        row("stand_delayed", (4, 2, 4), "1", 60, 6.0, 30),  # ... but 10 on prompt 1: 24 tok/s over both
    ]
    chosen = choose_shapes(rows)["stand_delayed"]
    assert chosen["shape"] == [2, 1, 2]
    assert chosen["overrides"] == [
        "method.drafter.num_paths=2",
        "method.drafter.trunk_len=1",
        "method.drafter.path_len=2",
    ]
    assert chosen["tokens_per_s"] == pytest.approx(30.0)
    assert chosen["speedup_over_ar"] == pytest.approx(1.5)
    assert chosen["tau"] == pytest.approx(1.5)
    assert chosen["prompts"] == 2


def test_a_prompt_some_shape_lacks_is_left_out_of_every_score():
    rows = [
        row("ar", (), "0", 60, 3.0),
        row("ar", (), "1", 60, 3.0),
        row("stand_delayed", (2, 1, 2), "0", 60, 2.0),  # 30 tok/s on prompt 0
        row("stand_delayed", (2, 1, 2), "1", 60, 1.0),  # a fast prompt only this shape ran
        row("stand_delayed", (4, 2, 4), "0", 60, 1.5),  # 40 tok/s on prompt 0
    ]
    chosen = choose_shapes(rows)["stand_delayed"]
    assert chosen["shape"] == [4, 2, 4] and chosen["prompts"] == 1
    table = shape_table(rows, "smollm2-135m_T1.0")
    assert "| stand_delayed | (4, 2, 4) **chosen** | 40.0 | 2.00 |" in table
    assert "| stand_delayed | (2, 1, 2) | 30.0 | 1.50 |" in table


def test_no_shape_without_ar_rows():
    assert choose_shapes([row("stand_delayed", (2, 1, 2), "0", 60, 2.0)]) == {}
