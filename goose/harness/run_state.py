"""Checkpoints of a drafter's state across the prompts of a cell (TR's table, budget=auto's rates), so that an
interrupted and resumed cell gives the same rows as an uninterrupted one.

Layout: `<out_dir>/<model>/<bench>.state/<cell id>-<n>.pkl` holding {"prompt_ids", "state"}, n the prompts
seen, written atomically. After prompt j the checkpoint for j + 1 prompts is written before j's row, and
older ones are deleted after it, so a kill always leaves the one a resume needs. A resume restores the
checkpoint whose prompt ids match, else starts fresh and says so; rows record `run_state_prompts` and
`run_state_restored`. One cell runs in one process.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

from goose.records.seal import replace_atomically as _replace_atomically


def dump_atomically(path: Path, obj: Any) -> None:
    _replace_atomically(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def write_text_atomically(path: Path, text: str) -> None:
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
        """The state that has seen exactly `prompt_ids` (in order), or None."""
        path = self._path(len(prompt_ids))
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            saved = pickle.load(fh)
        return saved["state"] if saved["prompt_ids"] == list(prompt_ids) else None

    def save(self, prompt_ids: list[str], state: Any) -> None:
        dump_atomically(self._path(len(prompt_ids)), {"prompt_ids": list(prompt_ids), "state": state})

    def prune(self, keep_seen: int) -> None:
        for path in self.checkpoints():
            if int(path.stem.rsplit("-", 1)[1]) < keep_seen:
                path.unlink(missing_ok=True)
