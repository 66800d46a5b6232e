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


def test_changes_to_run_outputs_leave_the_state_clean_and_code_changes_do_not(tmp_path):
    """A tracked record rewritten by one run (results/, figures/) does not mark the next run's rows dirty; a
    change to code does, with a digest of that change alone."""
    import subprocess

    from goose.records.code_state import state_at

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for rel in ("goose/x.py", "results/r.json", "figures/f.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("0\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    clean = state_at(tmp_path / "goose")
    assert len(clean) == 12 and "dirty" not in clean
    (tmp_path / "results/r.json").write_text("1\n")
    (tmp_path / "figures/f.md").write_text("1\n")
    assert state_at(tmp_path / "goose") == clean
    (tmp_path / "goose/x.py").write_text("1\n")
    dirty = state_at(tmp_path / "goose")
    assert dirty.startswith(clean + "-dirty-")
    (tmp_path / "results/r.json").write_text("2\n")
    assert state_at(tmp_path) == dirty  # from any folder of the checkout; the record's change still left out
