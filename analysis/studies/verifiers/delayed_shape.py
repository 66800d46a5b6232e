"""The delayed tree's (K, L1, L2) per setting from the grid search's rows (experiments/delayed_grid.py): the
table of every shape's score, the chosen one marked, that `make figures` writes (the scores and the choice:
goose.records.delayed_shape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from goose.records.delayed_shape import choose_shapes, shape_scores
from goose.records.results import read_rows
from goose.records.seal import results_files


def shape_table(rows: list[dict[str, Any]], title: str) -> str:
    """Markdown: every shape's tokens/s, speed-up over AR sampling and τ per method, the chosen one marked."""
    scored = shape_scores(rows)
    if not scored:
        return ""
    chosen = {m: tuple(c["shape"]) for m, c in choose_shapes(rows).items()}
    lines = [
        f"### {title}",
        "",
        "| method | (K, L1, L2) | tok/s | × AR sampling | τ | prompts |",
        "|---|---|---|---|---|---|",
    ]
    for method, shapes in scored.items():
        for shape, s in shapes.items():
            mark = " **chosen**" if shape == chosen[method] else ""
            lines.append(
                f"| {method} | {shape}{mark} | {s['tokens_per_s']:.1f} | {s['speedup_over_ar']:.2f} "
                f"| {s['tau']:.2f} | {s['prompts']} |"
            )
    return "\n".join(lines) + "\n"


def write_shape_tables(grid_root: Path, out: Path) -> Path | None:
    """<out>/delayed_shape.md from every <grid_root>/<setting>/grid.jsonl (sealed or not); None when
    there is none."""
    parts = []
    for grid in results_files(grid_root, "*/grid.jsonl", recursive=False):
        rows = read_rows(grid, migrate=False)
        table = shape_table(rows, grid.parent.name)
        if table:
            parts.append(table)
    if not parts:
        return None
    head = (
        "# The delayed tree's (K, L1, L2) per setting\n\n"
        "Grid search of measured tokens/s on calibration prompts that the matched evaluation does not use "
        "(`make delayed-grid`, experiments/delayed_grid.py), side by side with AR sampling in one process; "
        "the chosen shape is the one `make bench-verifiers` runs.\n\n"
    )
    path = out / "delayed_shape.md"
    path.write_text(head + "\n".join(parts))
    return path
