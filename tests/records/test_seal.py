"""Sealed results files (goose.records.seal): rows appended, sealed into X.jsonl.xz and appended again read
back whole and in order, by file and by folder; offsets taken before a seal stay valid; a seal is
idempotent, and one cut short at any step loses and repeats no row; a cut last line is still skipped; the
runner's resume sees sealed rows."""

from __future__ import annotations

import json
import lzma
import os

import pytest

from goose.harness.resume import merge_new_rows
from goose.records import seal as sealing
from goose.records.migrate import migrate_file
from goose.records.results import append_row, cell_key, read_appended, read_rows
from goose.records.row import SCHEMA_VERSION
from goose.records.seal import (
    copy_results_file,
    pending_path,
    read_from,
    read_json,
    results_files,
    seal,
    seal_tree,
    sealed_path,
    write_json_xz,
)


def ids(rows):
    return [r["i"] for r in rows]


def test_rows_appended_sealed_and_appended_again_read_back_in_order(tmp_path):
    f = tmp_path / "m" / "b.jsonl"
    for i in range(3):
        append_row(f, {"i": i})
    assert seal(f)
    assert not f.exists() and sealed_path(f).is_file()
    for i in range(3, 5):
        append_row(f, {"i": i})
    assert f.is_file()
    assert ids(read_rows(f)) == ids(read_rows(sealed_path(f))) == [0, 1, 2, 3, 4]
    assert seal(f) and not f.exists()  # a second seal folds the new tail in
    append_row(f, {"i": 5})
    assert ids(read_rows(f)) == list(range(6))


def test_a_folder_read_finds_each_results_file_once_sealed_part_first(tmp_path):
    sealed_only, both, plain = tmp_path / "a" / "x.jsonl", tmp_path / "b" / "y.jsonl", tmp_path / "c.jsonl"
    for path, first in ((sealed_only, 0), (both, 10), (plain, 20)):
        append_row(path, {"i": first})
    seal(sealed_only)
    seal(both)
    append_row(both, {"i": 11})
    assert results_files(tmp_path) == [sealed_only, both, plain]
    assert ids(read_rows(tmp_path)) == [0, 10, 11, 20]


def test_offsets_taken_before_a_seal_still_point_after_the_rows_seen(tmp_path):
    f = tmp_path / "b.jsonl"
    append_row(f, {"i": 0})
    append_row(f, {"i": 1})
    seen, offset = read_appended(f)
    assert ids(seen) == [0, 1] and offset == f.stat().st_size
    append_row(f, {"i": 2})
    seal(f)
    append_row(f, {"i": 3})
    new, offset = read_appended(f, offset)
    assert ids(new) == [2, 3]
    seal(f)
    assert read_appended(f, offset) == ([], offset)  # a seal adds nothing to the logical stream
    append_row(f, {"i": 4})
    assert ids(read_appended(f, offset)[0]) == [4]
    assert read_from(f) == b"".join(read_from(f, k)[:1] for k in range(len(read_from(f))))


def test_seal_is_idempotent_and_a_no_op_without_a_tail(tmp_path):
    f = tmp_path / "b.jsonl"
    assert not seal(f) and not sealed_path(f).exists()  # no file at all
    append_row(f, {"i": 0})
    assert seal(f)
    packed = sealed_path(f).read_bytes()
    stat = sealed_path(f).stat()
    assert not seal(f)  # no tail: nothing changes
    assert sealed_path(f).read_bytes() == packed and sealed_path(f).stat().st_ino == stat.st_ino
    f.write_bytes(b"")
    assert not seal(f) and f.exists()  # an empty tail holds no rows
    assert seal_tree(tmp_path) == [] and ids(read_rows(f)) == [0]


def test_a_cut_last_line_of_the_tail_is_skipped_and_sealed_off(tmp_path):
    f = tmp_path / "b.jsonl"
    append_row(f, {"i": 0})
    seal(f)
    append_row(f, {"i": 1})
    with f.open("a") as fh:
        fh.write('{"i": 2, "cut mid-wr')  # a writer killed mid-line
    rows, offset = read_appended(f)
    assert ids(rows) == [0, 1]  # left for the next call: it may still be being written
    with pytest.warns(UserWarning, match="cut or corrupt"):
        assert ids(read_rows(f)) == [0, 1]
    seal(f)  # the cut line is sealed off with a newline, as the next append would do
    append_row(f, {"i": 3})
    with pytest.warns(UserWarning, match="cut or corrupt"):
        more, _ = read_appended(f, offset)
    assert ids(more) == [3]


def test_the_runners_resume_sees_sealed_rows(tmp_path):
    f = tmp_path / "m" / "b.jsonl"
    rows = [
        {"model": "m", "bench": "b", "method": "ar", "prompt_id": str(i), "status": "ok"} for i in range(3)
    ]
    for row in rows[:2]:
        append_row(f, row)
    seal(f)
    existing: dict = {}
    offset = merge_new_rows(existing, f, 0)
    assert set(existing) == {cell_key(r) for r in rows[:2]}
    append_row(f, rows[2])
    seal(f)
    merge_new_rows(existing, f, offset)
    assert set(existing) == {cell_key(r) for r in rows}


def test_a_seal_cut_short_at_any_step_loses_and_repeats_no_row(tmp_path, monkeypatch):
    f = tmp_path / "b.jsonl"
    append_row(f, {"i": 0})
    seal(f)
    append_row(f, {"i": 1})

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    def replace_but_not_the_pending_part(src, dst, replace=os.replace):
        return crash() if str(src).endswith(".pending") else replace(src, dst)

    # cut after the pending part was written: the tail still holds its rows, the pending part is dropped
    monkeypatch.setattr(sealing.Path, "unlink", crash)
    with pytest.raises(KeyboardInterrupt):
        seal(f)
    monkeypatch.undo()
    assert pending_path(f).is_file() and ids(read_rows(f)) == [0, 1]
    append_row(f, {"i": 2})
    assert not pending_path(f).exists() and ids(read_rows(f)) == [0, 1, 2]

    # cut after the tail was removed: the pending part is the sealed part; the next append puts it in place
    monkeypatch.setattr(sealing.os, "replace", replace_but_not_the_pending_part)
    with pytest.raises(KeyboardInterrupt):
        seal(f)
    monkeypatch.undo()
    assert pending_path(f).is_file() and not f.exists()
    assert ids(read_rows(f)) == [0, 1, 2] and results_files(tmp_path) == [f]
    append_row(f, {"i": 3})
    assert not pending_path(f).exists() and ids(read_rows(f)) == [0, 1, 2, 3]


def test_the_sealed_part_is_plain_xz_of_the_rows(tmp_path):
    f = tmp_path / "b.jsonl"
    append_row(f, {"i": 0})
    before = f.read_bytes()
    seal(f)
    assert lzma.decompress(sealed_path(f).read_bytes()) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # no temporary file left


def test_migrate_keeps_a_sealed_file_sealed(tmp_path):
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps({"i": 0}) + "\n")  # a version-0 row, as an old run wrote it
    seal(f)
    f.write_text(json.dumps({"i": 1}) + "\n")
    assert migrate_file(f) and not migrate_file(f)
    assert not f.exists() and sealed_path(f).is_file()
    assert [json.loads(line).get("schema_version") for line in read_from(f).splitlines()] == [
        SCHEMA_VERSION
    ] * 2


def test_a_copy_replaces_every_part_of_the_destination(tmp_path):
    src, dst = tmp_path / "run" / "b.jsonl", tmp_path / "out" / "b.jsonl"
    append_row(dst, {"i": -1})
    seal(dst)  # an earlier copy, since sealed
    append_row(src, {"i": 0})
    seal(src)
    append_row(src, {"i": 1})
    copy_results_file(src, dst)
    assert ids(read_rows(dst)) == [0, 1] and not sealed_path(dst).exists()


def test_a_json_record_reads_plain_or_compressed(tmp_path):
    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"a": 1}))
    assert read_json(path) == {"a": 1}
    packed = write_json_xz(path, {"a": 2})
    assert packed.name == "replay.json.xz" and not path.exists() and read_json(path) == {"a": 2}


def test_the_seal_command_prints_bytes_before_and_after(tmp_path, capsys):
    for i in range(50):
        append_row(tmp_path / "m" / "b.jsonl", {"i": i, "text": "the same words again " * 20})
    size = os.path.getsize(tmp_path / "m" / "b.jsonl")
    sealing.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert f"1 of 1 results files sealed, {size:,} -> " in out
    assert ids(read_rows(tmp_path)) == list(range(50))
