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


def test_the_readme_results_block_is_the_generated_one():
    """The block between the README's markers is figures/readme_results.md byte for byte, which
    tests/analysis/test_figures_from_results.py regenerates from the shipped rows: no number in it is typed
    by hand or left from a superseded run."""
    from analysis.readme_results import BEGIN, END

    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index(BEGIN) + len(BEGIN) + 1 : readme.index(END)]
    assert block == (ROOT / "figures" / "readme_results.md").read_text()
    assert "| hw_tree, budget=auto |" in block and "| Goose | 3.46 |" in block


def test_results_readme_is_the_generated_index():
    assert (ROOT / "results" / "README.md").read_text() == (ROOT / "figures" / "results_index.md").read_text()


def test_the_extending_guide_shows_the_real_pld_drafter():
    """docs/extending.md's whole-drafter example is baselines/pld.py's config class and drafter, verbatim,
    and its YAML is conf/method/pld.yaml."""
    guide = (ROOT / "docs" / "extending.md").read_text()
    code = guide.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.startswith("@dataclass(frozen=True)\nclass PldConfig(DrafterConfig):")
    assert code in (ROOT / "baselines" / "pld.py").read_text()
    assert (ROOT / "conf" / "method" / "pld.yaml").read_text() in guide
