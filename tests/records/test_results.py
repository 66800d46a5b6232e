"""Results I/O: rows append atomically, a cut last line is skipped with a warning and sealed off."""

from __future__ import annotations

import json

import pytest

from goose.records.metrics import cell_summary
from goose.records.results import CELL_FIELDS, append_row, cell_key, config_hash, read_rows
from goose.records.row import migrate_row


def test_append_and_read_back(tmp_path):
    f = tmp_path / "m" / "b.jsonl"
    append_row(f, {"a": 1})
    append_row(f, {"a": 2})
    assert [r["a"] for r in read_rows(f)] == [1, 2]
    assert [r["a"] for r in read_rows(tmp_path)] == [1, 2]  # directory: recursive


def test_cut_line_is_skipped_and_next_append_is_intact(tmp_path):
    f = tmp_path / "b.jsonl"
    append_row(f, {"a": 1})
    with f.open("a") as fh:
        fh.write('{"a": 2, "cut mid-wr')  # a writer killed mid-line
    with pytest.warns(UserWarning, match="cut or corrupt"):
        assert [r["a"] for r in read_rows(f)] == [1]
    append_row(f, {"a": 3})
    with pytest.warns(UserWarning):
        assert [r["a"] for r in read_rows(f)] == [1, 3]
    assert json.loads(f.read_text().splitlines()[-1]) == migrate_row({"a": 3})


def test_cell_key_and_config_hash():
    c1 = config_hash({"b": 1, "a": [1, 2]})
    assert c1 == config_hash({"a": [1, 2], "b": 1}) and c1 != config_hash({"a": [1, 2], "b": 2})
    row = dict(
        model="m", bench="b", method="x", config_hash=c1, prompt_id="1", max_new_tokens=8, dtype="float32"
    )
    assert cell_key(row) == cell_key({**row, "tau": 3.0})
    assert cell_key(row) != cell_key({**row, "prompt_id": "2"})


# A value and a different one for every field that identifies a cell (a run's model, bench, method and its
# config, prompt, generation length, dtype, prompt form, sampling warp and sample seed).
KEY_FIELD_VALUES = {
    "model": ("smollm2-135m", "gemma3-270m"),
    "bench": ("humaneval", "gsm8k"),
    "method": ("goose", "pld"),
    "config_hash": ("0123456789ab", "ba9876543210"),
    "prompt_id": ("HumanEval/0", "HumanEval/1"),
    "max_new_tokens": (128, 256),
    "dtype": ("float32", "bfloat16"),
    "chat_template": (False, True),
    "prompt_format": (None, "### Instruction:\n{prompt}\n\n### Response:\n"),
    "temperature": (0.0, 0.7),
    "top_p": (1.0, 0.9),
    "top_k": (0, 50),
    "verifier": ("auto", "traversal"),
    "sample_seed": (None, 7),
}


def test_the_cell_key_holds_every_field_that_identifies_a_cell():
    assert set(CELL_FIELDS) == set(KEY_FIELD_VALUES)


@pytest.mark.parametrize("field", sorted(set(CELL_FIELDS) | set(KEY_FIELD_VALUES)))
def test_two_rows_differing_only_in_one_key_field_are_two_cells(field):
    base = {f: values[0] for f, values in KEY_FIELD_VALUES.items()}
    other = {**base, field: KEY_FIELD_VALUES[field][1]}
    assert cell_key(base) != cell_key(other)
    assert cell_key(base) == cell_key({**base, "tau": 2.5, "output_ids": [1, 2]})  # the rest is not key


def row(pid, gen, calls, wall, off=(0, 0), acc=(0, 0), lossless=True, status="ok"):
    return {
        "prompt_id": pid,
        "generated_tokens": gen,
        "forward_calls": calls,
        "wall_time_s": wall,
        "offered": {"spine": off[0], "branch": off[1]},
        "accepted": {"spine": acc[0], "branch": acc[1]},
        "lossless": lossless,
        "status": status,
    }


def test_cell_summary_is_ratio_of_sums():
    rows = [row("1", 10, 2, 1.0, (10, 20), (5, 2)), row("2", 30, 10, 2.0, (0, 10), (0, 3), lossless=False)]
    ar = [row("1", 10, 10, 2.0), row("2", 30, 30, 4.0)]
    s = cell_summary(rows, ar)
    assert s["tau"] == pytest.approx(40 / 12)  # not the mean of 5.0 and 3.0
    assert s["tokens_per_s"] == pytest.approx(40 / 3.0)
    assert s["speedup"] == pytest.approx((40 / 3.0) / (40 / 6.0))
    assert s["p_s"] == pytest.approx(5 / 10) and s["p_t"] == pytest.approx(5 / 30)
    assert s["p_ratio"] == pytest.approx(3.0)
    assert s["lossless_share"] == 0.5 and s["real_mismatches"] == 1


def test_speedup_only_over_prompts_both_completed():
    rows = [row("1", 10, 2, 1.0), row("2", 10, 2, 100.0, status="failed")]
    ar = [row("1", 10, 10, 4.0), row("3", 10, 10, 0.1)]
    s = cell_summary(rows, ar)
    assert s["prompts"] == 1 and s["failed"] == 1
    assert s["speedup"] == pytest.approx(4.0)
