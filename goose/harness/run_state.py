"""Checkpoints of a drafter's state across the prompts of a cell, beside the cell's rows, so that
an interrupted and resumed cell gives the same rows as an uninterrupted one.

Some drafters carry state from one prompt of a run to the next (`Drafter.carries_run_state`:
Token Recycling's run-long adjacency table, budget=auto's learnt acceptance rates). Without a
checkpoint, a cell interrupted after k prompts and resumed would start prompt k + 1 with a fresh
state, and every later prompt's drafts (hence forward calls and τ) would differ from an
uninterrupted run.

Layout: `<out_dir>/<model>/<bench>.state/<cell id>-<n>.pkl`, where the cell id hashes the cell's
key fields (method, method config, max_new_tokens, dtype, chat template) and n is the number of
prompts the state has seen. Each file holds {"prompt_ids": the ids of those n prompts in the order
they ran, "state": `drafter.run_state()`}, written atomically (a temporary file, then a rename).

Crash safety: after prompt j the runner writes the checkpoint that has seen j + 1 prompts *before*
it appends prompt j's row, and deletes the older checkpoint only after the row is on disk. A kill
at any point leaves the checkpoint a resume needs: before the row is written, the one that has
seen j prompts; after it, the one that has seen j + 1. A resumed cell restores the checkpoint whose
prompt ids equal the prompts before its first prompt to run; if none does (rows written by an
older version, a hand-edited file, holes left by failed prompts), it says so and goes on with a
fresh state, and every row records the state it started from (`run_state_prompts`: how many
earlier prompts of the cell the state has seen; `run_state_restored`: whether that state came
from a checkpoint written by an earlier process).

Parallel launchers (Hydra joblib, submitit, SLURM) run one cell per job, so a cell's prompts are
never split across processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any


def _replace_atomically(path: Path, payload: bytes) -> None:
    """Write `payload` to `path` through a temporary file in the same folder and a rename, so that
    a kill at any moment leaves either the old file or the new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_atomically(path: Path, obj: Any) -> None:
    """Pickle `obj` to `path` atomically (a kill leaves the old file or the new one)."""
    _replace_atomically(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (a kill leaves the old file or the new one)."""
    _replace_atomically(path, text.encode())


class RunStateStore:
    """The checkpoints of one cell (see the module docstring)."""

    def __init__(self, results_file: Path, cell_fields: dict[str, Any]) -> None:
        blob = json.dumps(cell_fields, sort_keys=True, default=str).encode()
        self.cell_id = hashlib.sha1(blob).hexdigest()[:16]
        self.folder = results_file.with_name(results_file.stem + ".state")

    def _path(self, seen: int) -> Path:
        return self.folder / f"{self.cell_id}-{seen}.pkl"

    def checkpoints(self) -> list[Path]:
        return sorted(self.folder.glob(f"{self.cell_id}-*.pkl")) if self.folder.is_dir() else []

    def load(self, prompt_ids: list[str]) -> Any | None:
        """The state that has seen exactly `prompt_ids` (in that order), or None if no checkpoint
        has."""
        path = self._path(len(prompt_ids))
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            saved = pickle.load(fh)
        return saved["state"] if saved["prompt_ids"] == list(prompt_ids) else None

    def save(self, prompt_ids: list[str], state: Any) -> None:
        """Write the checkpoint that has seen `prompt_ids`, atomically."""
        dump_atomically(self._path(len(prompt_ids)), {"prompt_ids": list(prompt_ids), "state": state})

    def prune(self, keep_seen: int) -> None:
        """Delete the checkpoints that have seen fewer prompts than `keep_seen`."""
        for path in self.checkpoints():
            if int(path.stem.rsplit("-", 1)[1]) < keep_seen:
                path.unlink(missing_ok=True)
