"""The typed result row (goose.records.row): migration of old rows (version 0 -> current, idempotent),
the typed view, the shipped rows in the current schema, and docs/records.md generated from the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goose.records.migrate import migrate_file
from goose.records.results import append_row, cell_key, read_rows
from goose.records.row import (
    ABSENT,
    CELL_FIELDS,
    SCHEMA_VERSION,
    V0_DEFAULTS,
    ResultRow,
    RowError,
    field_names,
    migrate_row,
    unknown_fields,
)
from goose.records.schema_doc import render
from goose.records.seal import read_from, results_files

ROOT = Path(__file__).resolve().parents[2]
# the shipped results files, sealed or not (goose.records.seal)
SHIPPED = results_files(ROOT / "results" / "reference") + results_files(ROOT / "results" / "gpu")

OLD = {  # a row from before chat templates and sampling (version 0)
    "model": "m",
    "bench": "b",
    "method": "pld",
    "method_config": {"k": 1},
    "config_hash": "abc",
    "max_new_tokens": 8,
    "dtype": "float32",
    "prompt_id": "p0",
    "output_ids": [1, 2],
    "status": "ok",
}


def test_an_old_row_migrates_to_the_current_schema():
    new = migrate_row(OLD)
    assert new == {"schema_version": SCHEMA_VERSION, **OLD, **V0_DEFAULTS}
    assert list(new)[0] == "schema_version" and "schema_version" not in OLD  # the input is not changed
    assert new["chat_template"] is False and new["temperature"] == 0.0 and new["sample_seed"] is None
    # what it was keyed as before (CELL_DEFAULTS) is what it is keyed as now
    assert (
        cell_key(OLD)
        == cell_key(new)
        == ("m", "b", "pld", "abc", "p0", 8, "float32", False, None, 0.0, 1.0, 0, "auto", None)
    )


def test_migration_is_idempotent_and_keeps_what_is_there():
    new = migrate_row(OLD)
    assert migrate_row(new) is new and migrate_row(migrate_row(OLD)) == new
    chat = migrate_row({**OLD, "chat_template": True, "temperature": 0.7, "sample_seed": 3})
    assert (chat["chat_template"], chat["temperature"], chat["sample_seed"]) == (True, 0.7, 3)
    with pytest.raises(ValueError, match="newer"):
        migrate_row({**OLD, "schema_version": SCHEMA_VERSION + 1})


def test_rows_are_written_stamped_and_read_migrated(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(OLD) + "\n")  # a file written before schema versions
    append_row(f, {**migrate_row(OLD), "prompt_id": "p1"})
    lines = [json.loads(line) for line in f.read_text().splitlines()]
    assert "schema_version" not in lines[0] and list(lines[1])[0] == "schema_version"
    rows = read_rows(f)
    assert rows[0] == migrate_row(OLD) and all(r["schema_version"] == SCHEMA_VERSION for r in rows)


def test_migrating_a_file_rewrites_it_once(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(OLD) + "\n" + json.dumps({**OLD, "prompt_id": "p1"}) + "\n")
    before = read_rows(f)
    assert migrate_file(f) is True
    assert [json.loads(line) for line in f.read_text().splitlines()] == before == read_rows(f)
    text = f.read_text()
    assert migrate_file(f) is False and f.read_text() == text  # idempotent


def test_typed_view_round_trips():
    row = {**migrate_row(OLD), "tau": 1.5, "budget_extra": 1}
    typed = ResultRow.from_dict(row)
    assert typed.tau == 1.5 and typed.extra == {"budget_extra": 1} and typed.to_dict() == row
    assert ResultRow.from_dict(OLD).to_dict() == migrate_row(OLD)


def test_cell_fields_are_documented_fields():
    assert set(CELL_FIELDS) <= field_names() and set(V0_DEFAULTS) <= field_names()


def test_shipped_rows_are_current_and_documented():
    assert SHIPPED
    for path in SHIPPED:
        for line in read_from(path).splitlines():
            row = json.loads(line)
            assert row.get("schema_version") == SCHEMA_VERSION, path
            assert not unknown_fields(row), (path, unknown_fields(row))


def test_records_doc_is_generated_from_the_schema():
    """Regenerate with `python -m goose.records.schema_doc > docs/records.md`."""
    assert (ROOT / "docs" / "records.md").read_text() == render()


def test_a_row_from_before_prompt_format_keys_as_none():
    """`prompt_format` joined the cell key within version 2: a version-2 row without it had no base-model
    format, and keys (and reads) as the same cell as a current row with None."""
    current = {**migrate_row(OLD), "prompt_format": None}
    before = {k: v for k, v in current.items() if k != "prompt_format"}
    assert migrate_row(before) is before and cell_key(before) == cell_key(current)
    assert cell_key(before) != cell_key({**current, "prompt_format": "Q: {prompt}\nA:"})


def _typed_row(**fields) -> ResultRow:
    row = ResultRow.from_dict({**migrate_row(OLD), "wall_time_s": 0.5, "tokens_per_s": 4.0})
    row.fill({"generated_tokens": 2, "lossless": True, "sample_idx": None, **fields})
    return row


def test_a_typed_row_is_checked_when_written(tmp_path):
    f = tmp_path / "r.jsonl"
    append_row(f, _typed_row())
    assert read_rows(f)[0]["generated_tokens"] == 2
    with pytest.raises(RowError, match="'max_new_tokens' = '8' \\(str\\) is not int"):
        append_row(f, _typed_row(max_new_tokens="8"))
    with pytest.raises(RowError, match="'generated_tokens' = True \\(bool\\) is not int"):
        append_row(f, _typed_row(generated_tokens=True))
    missing = _typed_row()
    missing.output_ids = ABSENT
    with pytest.raises(RowError, match="'output_ids' is missing \\(a row of status 'ok' has it\\)"):
        append_row(f, missing)
    failed = _typed_row(status="failed")
    with pytest.raises(RowError, match="'error' is missing"):
        append_row(f, failed)
    failed.error = "ValueError: x"
    append_row(f, failed)
    assert [r["status"] for r in read_rows(f)] == ["ok", "failed"]  # nothing of the refused rows written


def test_a_row_is_filled_by_name_and_reads_like_a_dict():
    row = _typed_row(tau=1.5)
    assert row.get("tau") == 1.5 and row.get("degenerate") is None and row.get("nosuch", 0) == 0
    with pytest.raises(RowError, match="no field 'tua'"):
        row.fill({"tua": 1.0})
    row.fill({"budget_extra": 1}, strict=False)
    assert row.extra == {"budget_extra": 1} and list(row.to_dict())[-1] == "budget_extra"
    assert row.get("budget_extra") == 1
