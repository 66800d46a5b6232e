"""The record of `make gpu-check`, <out>/gpu_check.json: read back to be extended by a later invocation on
the same kind of device, saved atomically after every stage (and every timed shape), and one reader of its
cost curves (`ratio`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from goose.harness.run_state import write_text_atomically


def load_record(path: Path, device: str) -> dict[str, Any]:
    """The record to extend: the existing one if it was made on the same kind of device."""
    if path.is_file():
        record = json.loads(path.read_text())
        if record.get("device") == device:
            return record
    return {"device": device, "stages": {}}


def save_record(record: dict[str, Any], path: Path) -> None:
    write_text_atomically(path, json.dumps(record, indent=1, default=str))


def ratio(curve: dict[str, Any], n: int) -> float | None:
    sizes = curve["sizes"]
    return curve["relative"][sizes.index(n)] if n in sizes else None
