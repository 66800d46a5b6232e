"""docs/layout.md cannot drift from the tree: every module of goose/, baselines/, experiments/ and
analysis/ is listed there (by its own row, or named in its folder's row), and every file or folder it
lists exists.

Rows are read from the tables: a bold first cell (`**`goose/engine/core/`**`) or a `## baselines/`
heading sets the folder of the rows below it; a first cell ending in `/` is a subfolder whose row names
its modules.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "docs" / "layout.md"
PACKAGES = ("goose", "baselines", "experiments", "analysis")
CELL = re.compile(r"^\|\s*(\*\*)?`([^`]+)`")


def documented() -> tuple[set[str], dict[str, str]]:
    """(files listed by their own row, {subfolder: its row's text}), paths relative to the root."""
    files: set[str] = set()
    folders: dict[str, str] = {}
    folder = ""
    for line in LAYOUT.read_text().splitlines():
        heading = re.match(r"^## (\S+/)\s*$", line)
        if heading:
            folder = heading.group(1)
            continue
        m = CELL.match(line)
        if not m:
            continue
        bold, name = m.group(1), m.group(2)
        if bold:
            folder = name
            continue
        path = name if name.split("/")[0] in PACKAGES and "/" in name else folder + name
        if name.endswith("/"):
            folders[path] = line
        else:
            files.add(path)
    return files, folders


def modules() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def test_every_module_is_in_the_layout():
    files, folders = documented()
    missing = []
    for mod in sorted(modules()):
        if mod in files:
            continue
        owner = max((f for f in folders if mod.startswith(f)), key=len, default=None)
        if owner is None or f"`{mod[len(owner) :]}`" not in folders[owner]:
            missing.append(mod)
    assert not missing, f"docs/layout.md does not list: {missing}"


def test_every_listed_path_exists():
    files, folders = documented()
    gone = sorted(p for p in [*files, *folders] if not (ROOT / p).exists())
    assert not gone, f"docs/layout.md lists paths that do not exist: {gone}"
