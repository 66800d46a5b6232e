"""The README names every configured method, so its list cannot fall behind conf/method/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_names_every_method_config():
    readme = (ROOT / "README.md").read_text()
    configs = sorted(p.stem for p in (ROOT / "conf" / "method").glob("*.yaml"))
    assert len(configs) >= 30
    missing = [name for name in configs if f"`{name}`" not in readme]
    assert not missing, f"README.md does not name these conf/method configs: {missing}"
