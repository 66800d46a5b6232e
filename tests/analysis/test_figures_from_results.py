"""`figures/` holds only what `make figures` writes from `results/`: a copy of the repository's
results/ and an empty figures folder give back every tracked file under figures/, the text tables
(.md, .tex, .csv and the manifest) byte for byte."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from analysis import make_figures

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".md", ".tex", ".csv", ".manifest")


def tracked_figures() -> list[str]:
    """The files git tracks under figures/, relative to it."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "figures"], check=True, capture_output=True, text=True
    ).stdout
    return sorted(line.removeprefix("figures/") for line in out.splitlines() if line)


def test_make_figures_rebuilds_every_tracked_figure_from_results_alone(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results, ignore=shutil.ignore_patterns("*.lock", "*.state"))
    out = tmp_path / "figures"
    out.mkdir()
    assert make_figures.main(["--results", str(results / "reference"), "--out", str(out)]) == 0
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    tracked = tracked_figures()
    assert written == tracked, {"missing": set(tracked) - set(written), "extra": set(written) - set(tracked)}
    differ = [
        name
        for name in tracked
        if name.endswith(TEXT) and (out / name).read_bytes() != (ROOT / "figures" / name).read_bytes()
    ]
    assert not differ, f"regenerated text differs from the tracked figures/: {differ}"
