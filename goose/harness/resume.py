"""Resume of a cell from its results file: the rows already there (read from a byte offset on, so a
running cell re-reads only what other jobs appended), the lock under which an AR reference is generated
once, a warning for a cut last line, and the restore of a drafter's state across prompts.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from filelock import FileLock

from goose.engine.core.sizing import Speculator
from goose.harness.run_state import RunStateStore
from goose.records.results import append_lock, cell_key, read_appended


def restore_run_state(store: RunStateStore, speculator: Speculator, before: list[str], report: Any) -> bool:
    """Restore the state of the drafter and its sizer after the cell's prompts `before` (already in the
    results) from its checkpoint; True if restored. Without a matching checkpoint the cell goes on with a
    fresh state and says that its later rows may differ from an uninterrupted run."""
    if not before:
        return False
    state = store.load(before)
    if state is None:
        report.warn(
            f"{speculator.drafter.name} carries state across prompts, but no checkpoint of it after the "
            f"{len(before)} prompts already in the results was found in {store.folder}: the cell "
            "goes on with a fresh state, so its next rows may differ from an uninterrupted run "
            "(each row records the state it started from: run_state_prompts)"
        )
        return False
    speculator.restore_run_state(state)
    return True


def merge_new_rows(existing: dict[tuple, dict[str, Any]], path: Path, offset: int) -> int:
    """Add the "ok" rows appended to `path` from byte `offset` on to `existing` (by cell key, the
    first row wins); return the offset after the last whole line read (`read_appended`)."""
    rows, offset = read_appended(path, offset)
    for row in rows:
        if row.get("status", "ok") == "ok":
            existing.setdefault(cell_key(row), row)
    return offset


def reference_lock(results_file: Path) -> FileLock:
    """The exclusive lock under which an AR reference is looked up and, if still missing,
    generated and appended: a `FileLock` on `<results_file>.lock`, held for the whole generation,
    so that parallel jobs write one reference per prompt. A separate file from `append_lock`'s,
    so that other jobs' appends do not wait for the generation."""
    results_file.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(results_file.with_name(results_file.name + ".lock"))


def warn_if_cut(results_file: Path) -> None:
    """Warn when the results file ends in a line cut mid-write (a writer killed before its newline):
    the line is skipped, its cell re-run, and the next append seals it off. Checked under
    `append_lock`, so that a row another job is appending right now is not taken for a cut one."""
    if not results_file.exists():
        return
    with append_lock(results_file), results_file.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - (1 << 20)))
        tail = fh.read() if size else b"\n"
    if not tail.endswith(b"\n"):
        cut = len(tail) - tail.rfind(b"\n") - 1
        warnings.warn(
            f"{results_file}: skipping a cut or corrupt last line ({cut} bytes, no newline): its cell is re-run",
            stacklevel=3,
        )
