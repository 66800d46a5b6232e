"""One results file, one code state (goose.records.code_state): the state names the commit and a digest
of local changes; rows of another state refuse a resume unless mixing is allowed on purpose."""

from __future__ import annotations

import pytest

from goose.records.code_state import (
    UNKNOWN,
    MixedCodeError,
    check_one_code_state,
    code_state,
    code_states,
    row_code_state,
)


def test_a_row_is_read_by_its_code_state_else_its_commit_else_unknown():
    assert (
        row_code_state({"code_state": "abc-dirty-1234abcd", "git_commit": "abc-dirty"})
        == "abc-dirty-1234abcd"
    )
    assert row_code_state({"git_commit": "abc"}) == "abc"
    assert row_code_state({}) == UNKNOWN


def test_code_states_count_rows_most_first():
    rows = [{"code_state": "a"}, {"code_state": "b"}, {"code_state": "b"}, {"git_commit": "c"}]
    assert code_states(rows) == {"b": 2, "a": 1, "c": 1}


def test_rows_of_the_same_state_resume():
    check_one_code_state([{"code_state": "abc"}] * 3, "abc", "f.jsonl", allow=False)
    check_one_code_state([], "abc", "f.jsonl", allow=False)


def test_rows_of_another_commit_refuse_naming_the_states_and_the_ways_on():
    rows = [{"code_state": "abc"}, {"code_state": "abc"}, {"code_state": "def"}]
    with pytest.raises(MixedCodeError) as exc:
        check_one_code_state(rows, "def", "results/x.jsonl", allow=False)
    message = str(exc.value)
    assert "results/x.jsonl holds rows of another code state: abc (2 rows); this code is def" in message
    assert "allow_mixed_code=true" in message and "--allow-mixed-code" in message


def test_an_old_dirty_row_never_matches_a_dirty_state_with_its_digest():
    with pytest.raises(MixedCodeError):
        check_one_code_state([{"git_commit": "abc-dirty"}], "abc-dirty-1234abcd", "f", allow=False)


def test_allowing_the_mix_lets_it_through():
    check_one_code_state([{"code_state": "abc"}], "def", "f", allow=True)


def test_this_checkout_has_a_state_that_names_its_commit():
    state = code_state()
    assert state == UNKNOWN or len(state.split("-")[0]) == 12
