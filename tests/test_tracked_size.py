"""The tracked tree stays small: the tracked files that exist take at most 20 MiB, and no tracked plain
results file (results/**/*.jsonl) is over 256 KiB: rows are committed sealed, as X.jsonl.xz
(goose.records.seal; `make pack-results` seals everything under results/)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRACKED_LIMIT = 20 << 20
PLAIN_RESULTS_LIMIT = 256 << 10


def tracked_files() -> list[Path]:
    """The tracked files of the checkout that exist in the work tree (a deleted one is not counted)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the tracked files cannot be listed")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout (no .git): there are no tracked files to size")
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = (ROOT / name for name in listing.decode().split("\0") if name)
    return [p for p in paths if p.is_file()]


def test_the_tracked_files_take_at_most_20_mib():
    sizes = {p: p.stat().st_size for p in tracked_files()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:10]
    assert total <= TRACKED_LIMIT, (
        f"the tracked files take {total / 2**20:.1f} MiB, over {TRACKED_LIMIT >> 20} MiB; the largest: "
        + ", ".join(f"{p.relative_to(ROOT)} ({sizes[p] / 2**20:.2f} MiB)" for p in largest)
        + " (seal result rows with `make pack-results`)"
    )


def test_no_tracked_plain_results_file_is_over_256_kib():
    results = ROOT / "results"
    plain = [p for p in tracked_files() if p.suffix == ".jsonl" and p.is_relative_to(results)]
    too_big = [p for p in plain if p.stat().st_size > PLAIN_RESULTS_LIMIT]
    assert not too_big, (
        f"tracked plain results files over {PLAIN_RESULTS_LIMIT >> 10} KiB, to be sealed "
        "(`make pack-results`, then commit the .jsonl.xz and the removal of the .jsonl): "
        + ", ".join(f"{p.relative_to(ROOT)} ({p.stat().st_size >> 10} KiB)" for p in too_big)
    )
