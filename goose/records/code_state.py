"""The code state a row was produced by, and the check that keeps one results file to one code state.

A number can be cited only if one version of the code produced it. `code_state()` names that version:
the commit, and where tracked files outside the run outputs (results/, figures/) carry local changes, a
digest of those changes (`<commit>-dirty-<sha256[:8] of git diff HEAD>`), so two runs of the very same
edits compare equal and any other edit does not. Outside a git checkout (an installed package) it is `unknown`.

`check_one_code_state` is what a resume runs before it appends to a results file: rows of another code
state refuse, unless the caller allows mixing on purpose (then every row it writes says so,
`allow_mixed_code`, and every table built from them lists the states). Rows older than the field are
read by their `git_commit`; an old `-dirty` row has no digest and so never matches.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

UNKNOWN = "unknown"


class MixedCodeError(ValueError):
    """Appending to a results file whose rows another code state wrote."""


# What a run produces, not what it runs: changes under these top-level folders leave the state clean, so a
# run that writes a tracked record before the next run starts does not mark that run's rows dirty.
OUTPUT_DIRS: tuple[str, ...] = ("results", "figures")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=10).stdout


def state_at(cwd: Path) -> str:
    """The code state of the git checkout holding `cwd` (`UNKNOWN` outside one): the commit, and a digest of
    the local changes to tracked files outside `OUTPUT_DIRS`."""
    try:
        commit = _git(cwd, "rev-parse", "--short=12", "HEAD").strip()
        if not commit:
            return UNKNOWN
        outputs = [f":(top,exclude){d}" for d in OUTPUT_DIRS]
        diff = _git(cwd, "diff", "HEAD", "--no-ext-diff", "--binary", "--", ":(top)", *outputs)
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    if not diff:
        return commit
    return f"{commit}-dirty-{hashlib.sha256(diff.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


@functools.lru_cache(maxsize=1)
def code_state() -> str:
    """This process's code state (computed once: the code a process runs is the code it loaded)."""
    return state_at(Path(__file__).resolve().parent)


def row_code_state(row: dict[str, Any]) -> str:
    """The code state of a row: its `code_state`, else (older rows) its `git_commit`, else unknown."""
    return str(row.get("code_state") or row.get("git_commit") or UNKNOWN)


def code_states(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """{code state: rows} of `rows`, most rows first."""
    return dict(Counter(row_code_state(r) for r in rows).most_common())


def check_one_code_state(rows: Iterable[dict[str, Any]], current: str, where: str, allow: bool) -> None:
    """Refuse (MixedCodeError) to add rows of code state `current` to `where`, which holds `rows`, when
    any of them has another state, unless `allow`. The message names the states, how many rows each
    wrote, and the two ways on."""
    others = {s: n for s, n in code_states(rows).items() if s != current}
    if not others or allow:
        return
    listed = ", ".join(f"{s} ({n} rows)" for s, n in others.items())
    raise MixedCodeError(
        f"{where} holds rows of another code state: {listed}; this code is {current}. Resuming would mix "
        "code versions in one results file. Write to another folder for a fresh run, or allow the mix on "
        "purpose (run.py allow_mixed_code=true, experiments.bench --allow-mixed-code): every row written "
        "then records allow_mixed_code and every table built from them lists the code states."
    )
