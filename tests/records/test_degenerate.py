"""Degenerate outputs (goose.records.degenerate): the repeated 4-gram share, the length limit and the rule,
on hand-built token lists with exact values."""

from __future__ import annotations

import pytest

from goose.records.degenerate import (
    degenerate_fields,
    hit_max_new_tokens,
    is_degenerate,
    repeated_4gram_share,
    row_degenerate,
)


@pytest.mark.parametrize(
    ("ids", "share"),
    [
        ([], 0.0),  # no 4-gram at all
        ([1, 2, 3], 0.0),
        ([1, 2, 3, 4], 0.0),  # one 4-gram, never seen before
        ([1, 2, 3, 4, 5, 6, 7, 8], 0.0),  # five distinct 4-grams
        ([7, 7, 7, 7, 7, 7], 2 / 3),  # (7,7,7,7) three times: the 2nd and 3rd are repeats (overlaps count)
        ([1, 2, 3, 4, 1, 2, 3, 4], 1 / 5),  # 1234 234-1 34-12 4-123 1234: one repeat in five
        ([1, 2, 1, 2, 1, 2, 1, 2], 3 / 5),  # 1212 2121 1212 2121 1212: the first two are new
        ([5, 1, 2, 3, 1, 2, 3, 1, 2, 3], 3 / 7),  # 5123 1231 2312 3123 new, then 1231 2312 3123 again
    ],
)
def test_repeated_4gram_share(ids, share):
    assert repeated_4gram_share(ids) == pytest.approx(share)


def test_hit_max_new_tokens_is_the_length_limit():
    assert hit_max_new_tokens(128, 128) and not hit_max_new_tokens(127, 128)


def test_degenerate_needs_the_length_limit_and_more_than_half_repeats():
    loop = [1, 2, 1, 2, 1, 2, 1, 2]  # share 3/5 > 0.5
    assert is_degenerate(loop, max_new_tokens=8)
    assert not is_degenerate(loop, max_new_tokens=9)  # it stopped by itself (EOS) before the limit
    half = [1, 2, 3, 4, 5, 6] * 2 + [1, 2, 3]  # 12 4-grams: the 6 of one period new, then 6 repeats
    assert repeated_4gram_share(half) == 0.5 and not is_degenerate(half, max_new_tokens=15)  # not > half
    assert is_degenerate(loop, max_new_tokens=8, generated_tokens=8)


def test_row_fields_and_old_rows():
    row = {"output_ids": [7] * 10, "max_new_tokens": 10, "generated_tokens": 10}
    assert degenerate_fields(row) == {
        "repeated_4gram_share": 6 / 7,
        "hit_max_new_tokens": True,
        "degenerate": True,
    }
    assert row_degenerate(row) is True  # computed: a row written before the fields
    assert row_degenerate({**row, "degenerate": False}) is False  # the row's own field wins
    assert degenerate_fields({"output_ids": [7] * 10, "max_new_tokens": 16})["hit_max_new_tokens"] is False
    failed = {"status": "failed", "max_new_tokens": 10}
    assert degenerate_fields(failed) == {} and row_degenerate(failed) is None
