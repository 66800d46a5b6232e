"""Rewrite results files in the current row schema, once: `python -m goose.records.migrate results/reference`.

Reading migrates older rows anyway (`goose.records.results.read_appended`); rewriting the files makes
what is on disk say so. Each row becomes `migrate_row(row)` written as `append_row` writes it; lines
that are not JSON objects are kept as they are. Idempotent: a file already current is left untouched. A
sealed file (`goose.records.seal`) is rewritten sealed, its plain tail folded in.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

from goose.records.results import encode_row
from goose.records.seal import (
    append_lock,
    finish_pending,
    read_from,
    replace_atomically,
    results_files,
    sealed_path,
    store_sealed,
    tail_path,
)


def migrate_lines(lines: Iterable[bytes]) -> list[bytes]:
    """The lines of a results file with every row in the current schema."""
    out = []
    for raw in lines:
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            row = None
        out.append(encode_row(row) if isinstance(row, dict) else raw)
    return out


def migrate_file(path: str | Path) -> bool:
    """Rewrite the results file `path` (sealed or not) in the current schema, under its append lock;
    True if it changed."""
    path = tail_path(path)
    with append_lock(path):
        finish_pending(path)
        before = read_from(path)
        lines = before.splitlines(keepends=True)
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        after = b"".join(migrate_lines(line for line in lines if line.strip()))
        if after == before:
            return False
        if sealed_path(path).is_file():
            store_sealed(path, after)
        else:
            replace_atomically(path, after)
    return True


def main(argv: list[str]) -> None:
    for arg in argv or ["results"]:
        root = Path(arg)
        files = results_files(root) if root.is_dir() else [root]
        for f in files:
            print(f"{f}: {'migrated' if migrate_file(f) else 'current'}")


if __name__ == "__main__":
    main(sys.argv[1:])
