"""Share of docstring and comment lines in the product's Python (goose/ + baselines/).

A line counts as documentation when it lies inside a module, class or function docstring or holds
only a comment; blank lines count for neither side. `python -m tests.style.doc_share` prints the
share per folder and per file.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("goose", "baselines")


def line_kinds(source: str) -> tuple[int, int]:
    """(documentation lines, non-blank lines) of one module."""
    lines = source.splitlines()
    doc: set[int] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].strip().startswith("#"):
            doc.add(tok.start[0])
    non_blank = {i + 1 for i, line in enumerate(lines) if line.strip()}
    return len(doc & non_blank), len(non_blank)


def share(folders: tuple[str, ...] = PRODUCT) -> tuple[float, dict[str, tuple[int, int]]]:
    per_file = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            per_file[str(path.relative_to(ROOT))] = line_kinds(path.read_text())
    doc = sum(d for d, _ in per_file.values())
    total = sum(t for _, t in per_file.values())
    return doc / max(total, 1), per_file


if __name__ == "__main__":
    overall, per_file = share(tuple(sys.argv[1:]) or PRODUCT)
    for name, (d, t) in sorted(per_file.items(), key=lambda kv: -kv[1][0]):
        print(f"{d / max(t, 1):6.1%} {d:5d}/{t:5d}  {name}")
    print(f"overall: {overall:.1%}")
