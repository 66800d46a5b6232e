"""Results I/O: one JSON line per (model, bench, method, config, prompt), appended safely.

Appends hold an exclusive lock (`append_lock`: the `filelock` library, an `flock` on Unix, on the
file `<results file>.append.lock`) and write the whole line with one `write` call, so parallel
writers (jobs of a joblib or submitit sweep sharing one results file) never interleave lines. A
line cut by a crash (no trailing newline, or not valid JSON) is skipped with a warning when
reading and sealed off with a newline before the next append, so the cut cell is simply re-run on
resume. Reading takes no lock: a reader uses only newline-terminated lines.

A results file `X.jsonl` may be sealed (`goose.records.seal`, `make pack-results`): its rows so far
compressed into `X.jsonl.xz`, later appends going to the plain `X.jsonl` as before. Every reader here
reads the whole logical file, the sealed rows first; byte offsets are offsets into its logical
stream (the decompressed sealed part, then the plain tail), so they stay valid across a seal.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from goose.records.row import CELL_FIELDS, ResultRow, migrate_row
from goose.records.seal import append_lock, finish_pending, read_from, results_files, tail_path


def config_hash(config: dict[str, Any]) -> str:
    """Short stable hash of a method config (sorted JSON)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def cell_key(row: dict[str, Any]) -> tuple:
    """The identity of a result row (`goose.records.row.CELL_FIELDS`): a re-run of the same cell has
    the same key. A row without `schema_version` is read as version 0 and migrated (an old row without
    `chat_template` is a raw one)."""
    row = migrate_row(row)
    return tuple(_plain(row.get(f)) for f in CELL_FIELDS)


def _plain(value: Any) -> Any:
    """A key value as JSON gives it back: NaN (a missing field in a DataFrame) reads as None and
    whole floats of integer fields compare equal to their ints."""
    if isinstance(value, float) and value != value:
        return None
    return value


def sample_key(row: dict[str, Any]) -> tuple[Any, Any]:
    """(prompt_id, sample_seed): which AR row a row is compared with (the AR sample of the same
    prompt with the same seed; greedy rows have no seed)."""
    seed = _plain(row.get("sample_seed"))
    return row["prompt_id"], None if seed is None else int(seed)


def append_row(path: str | Path, row: ResultRow | dict[str, Any]) -> None:
    """Append one row as one whole line (`append_line`), in the current schema (`encode_row`; a typed row
    is checked first and raises `RowError` naming a bad field, before anything is written). All writers of
    results files go through here, so lines never interleave."""
    append_line(path, encode_row(row))


def append_line(path: str | Path, line: bytes) -> None:
    """Append `line` (ending in a newline) to the plain tail of the results file `path`: under
    `append_lock(path)`, finish a seal cut short (`goose.records.seal.finish_pending`), seal off a cut
    last line (a writer killed mid-write left no newline) with a newline, then write the line with a
    single `write` call and fsync it."""
    path = tail_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with append_lock(path):
        finish_pending(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0), 0o644)
        try:
            size = os.fstat(fd).st_size
            if size:
                os.lseek(fd, size - 1, os.SEEK_SET)
                if os.read(fd, 1) != b"\n":  # a previous writer died mid-line: seal it off
                    line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


def encode_row(row: ResultRow | dict[str, Any]) -> bytes:
    """The line a row is written as: its JSON in the current schema (`schema_version` first; a row
    without one is version 0, like a row read without one, and is migrated), and a newline. A typed row
    is checked (`ResultRow.check`) and written as `ResultRow.to_dict` gives it."""
    if isinstance(row, ResultRow):
        row.check()
        row = row.to_dict()
    return (json.dumps(migrate_row(row), default=str) + "\n").encode()


def read_appended(
    path: str | Path, offset: int = 0, whole: bool = False, migrate: bool = True
) -> tuple[list[dict[str, Any]], int]:
    """(the rows of `path` from byte `offset` on, the offset after the last whole line read).

    The one JSONL reader of the harness: `read_rows` reads whole files with it, and a running
    cell re-reads only what other jobs appended since its last look (linear in the file size).
    `path` names a results file, sealed or not (`X.jsonl` or `X.jsonl.xz`); offsets count bytes of
    its logical stream, the decompressed sealed part followed by the plain tail (for a file never
    sealed: its bytes), so an offset from an earlier call still points after the rows that call
    returned, even if the file was sealed in between.
    A line that is not a JSON object (a write cut by a crash) is skipped with a warning; a last
    line without its newline (being written, or cut) is left for the next call, and the next
    append seals a cut one off with a newline; with `whole` (a file read once, at rest) it is read
    too. A missing file has no rows. Rows of older schema versions come back migrated
    (`goose.records.row.migrate_row`), unless `migrate` is False (JSON lines that are not result
    rows, e.g. experiments/delayed_grid.py's grid).
    """
    data = read_from(path, offset)
    end = len(data) if whole else data.rfind(b"\n") + 1
    rows: list[dict[str, Any]] = []
    for raw in data[:end].splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            warnings.warn(f"{path}: skipping a cut or corrupt line ({len(raw)} bytes)", stacklevel=3)
            continue
        if isinstance(row, dict):
            rows.append(migrate_row(row) if migrate else row)
    return rows, offset + end


def read_rows(paths: str | Path | Iterable[str | Path], migrate: bool = True) -> list[dict[str, Any]]:
    """Every valid row of one results file, a directory (recursively, every `*.jsonl`, sealed or
    not, once) or a list of files (`read_appended` over each whole file)."""
    if isinstance(paths, (str, Path)):
        p = Path(paths)
        files = results_files(p) if p.is_dir() else [p]
    else:
        files = [Path(x) for x in paths]
    rows: list[dict[str, Any]] = []
    for f in files:
        rows += read_appended(f, whole=True, migrate=migrate)[0]
    return rows


def results_path(out_dir: str | Path, model: str, bench: str) -> Path:
    """Where rows of (model, bench) live: <out_dir>/<model>/<bench>.jsonl (and, once sealed, the
    .jsonl.xz beside it)."""
    return Path(out_dir) / model / f"{bench}.jsonl"
