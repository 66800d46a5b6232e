"""Results I/O: one JSON line per (model, bench, method, config, prompt), appended safely.

Appends take an exclusive `flock` on the file and write the whole line with one `write` call, so
parallel jobs never interleave rows. A line cut by a crash (no trailing newline, or not valid
JSON) is skipped with a warning when reading and sealed off with a newline before the next append,
so the cut cell is simply re-run on resume.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CELL_FIELDS = ("model", "bench", "method", "config_hash", "prompt_id", "max_new_tokens", "dtype")


def config_hash(config: dict[str, Any]) -> str:
    """Short stable hash of a method config (sorted JSON)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def cell_key(row: dict[str, Any]) -> tuple:
    """The identity of a result row: a re-run of the same cell has the same key."""
    return tuple(row.get(f) for f in CELL_FIELDS)


def append_row(path: str | Path, row: dict[str, Any]) -> None:
    """Append one row atomically (flock + single write + fsync)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(row, default=str) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size:
            os.lseek(fd, size - 1, os.SEEK_SET)
            if os.read(fd, 1) != b"\n":  # a previous writer died mid-line: seal it off
                line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_rows(paths: str | Path | Iterable[str | Path]) -> list[dict[str, Any]]:
    """Read every valid row of one file, a directory (recursively, *.jsonl) or a list of files.

    Lines that are not valid JSON objects (a write cut by a crash) are skipped with a warning.
    """
    if isinstance(paths, (str, Path)):
        p = Path(paths)
        files = sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]
    else:
        files = [Path(x) for x in paths]
    rows: list[dict[str, Any]] = []
    for f in files:
        if not f.exists():
            continue
        with f.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    row = json.loads(raw)
                except json.JSONDecodeError:
                    warnings.warn(
                        f"{f}:{lineno}: skipping a cut or corrupt line ({len(raw)} bytes)", stacklevel=2
                    )
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    return rows


def results_path(out_dir: str | Path, model: str, bench: str) -> Path:
    """Where rows of (model, bench) live: <out_dir>/<model>/<bench>.jsonl."""
    return Path(out_dir) / model / f"{bench}.jsonl"
