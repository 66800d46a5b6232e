"""No module of the product (goose/, baselines/, experiments/, analysis/, run.py) is over 400 lines: a
module that grows past it holds more than one job and is split by concern (DEVELOPERS.md, Style)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("goose", "baselines", "experiments", "analysis")
MAX_LINES = 400


def product_modules() -> list[Path]:
    found = [ROOT / "run.py"]
    for package in PACKAGES:
        found += sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)
    return found


def test_the_walk_finds_the_product():
    modules = product_modules()
    assert len(modules) > 100
    assert ROOT / "goose" / "engine" / "core" / "verifier.py" in modules


def test_no_module_is_over_the_limit():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in product_modules()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by concern): {over}"
