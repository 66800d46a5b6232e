"""analysis/heldout.py on a hand-built held-out run (tests/records/heldout_rows.py): each workload's table cell
by cell, the ▼ marks of the floors, the notes and the verdict table."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import heldout
from analysis.load import Results
from analysis.report import Skip
from tests.records.heldout_rows import write_fresh_run, write_spec_run


def md_row(md: str, first: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {first}"))


@pytest.fixture
def figures(tmp_path):
    run = tmp_path / "heldout" / "tiny-bfloat16"
    write_spec_run(run)
    write_fresh_run(run)
    out = tmp_path / "fig"
    files = heldout.build(Results(rows=pd.DataFrame(), records=tmp_path), out).files
    return out / "heldout", {f.name for f in files}


def test_nothing_to_judge_is_a_skip(tmp_path):
    with pytest.raises(Skip, match="no held-out run"):
        heldout.build(Results(rows=pd.DataFrame(), records=tmp_path), tmp_path / "fig")


def test_one_table_per_workload_and_the_verdicts(figures):
    _, files = figures
    stems = ("heldout_tiny-bfloat16_spec_bench", "heldout_tiny-bfloat16_fresh", "heldout_verdicts")
    assert files == {f"{s}.{e}" for s in stems for e in ("md", "tex")}


def test_spec_bench_table_per_category(figures):
    folder, _ = figures
    md = (folder / "heldout_tiny-bfloat16_spec_bench.md").read_text()
    assert md_row(md, "category") == (
        "| category | pld | suffix:auto | hw_tree:auto | best single source | hw_tree:auto / best single source |"
    )
    # writing: pld 1.2, 0.9, 1.1; suffix:auto 1.1, 1.1, 0.8; hw_tree:auto 1.3, 1.0, 0.95 over AR; the best
    # single source per repeat 1.2, 1.1, 1.1; hw_tree over it 13/12, 10/11, 9.5/11: median 0.91 < 1.0
    assert md_row(md, "writing") == (
        "| writing * (n = 1) | 1.10 [0.90, 1.20] | 1.10 [0.80, 1.10] | 1.00 [0.95, 1.30] | 1.10 [1.10, 1.20] "
        "| 0.91 [0.86, 1.08] ▼ |"
    )
    # qa: suffix:auto 0.95 every repeat (budget=auto, < 0.98: marked); pld 0.95 median (fixed budget: not)
    assert md_row(md, "qa") == (
        "| qa (n = 1) | 0.95 [0.90, 1.05] | 0.95 [0.95, 0.95] ▼ | 1.10 [1.00, 1.20] | 0.95 [0.95, 1.05] "
        "| 1.16 [0.95, 1.26] |"
    )
    assert md_row(md, "all prompts (n = 2)").startswith("| all prompts (n = 2) | 1.08 [0.92, 1.08] |")
    assert "* writing: MT-Bench questions 81–100, the canonical protocol's mtbench prompts" in md
    assert (
        "spec_bench: hw_tree:auto below 1.00x the best single source (median over repeats) in writing" in md
    )
    assert (
        "outputs identical to engine:ar in the first repeat: pld 2/2, suffix:auto 2/2, hw_tree:auto 2/2" in md
    )
    # the groups below hw_tree's floor say what the compared contenders wrote (here AR's text, unrecorded share)
    assert (
        "writing, what the compared contenders wrote (all repeats): ar -; suffix:auto 0/3 outputs not AR's; "
        "pld 0/3 outputs not AR's; hw_tree:auto 0/3 outputs not AR's" in md
    )
    assert "qa, what the compared" not in md
    assert "Spec-Bench, 1 questions of each category" in md and "3 interleaved repeats" in md
    assert "test-cpu with 1 threads (`tiny-bfloat16/spec_bench`); code 0123456789ab" in md


def test_fresh_table_per_benchmark(figures):
    folder, _ = figures
    md = (folder / "heldout_tiny-bfloat16_fresh.md").read_text()
    assert md_row(md, "benchmark").startswith("| benchmark | pld | suffix:auto | hw_tree:auto | goose:auto |")
    # HumanEval: hw_tree over the best single source (suffix:auto each round) 22/20, 20/18, 15/16
    assert md_row(md, "HumanEval") == (
        "| HumanEval (n = 1) | 1.50 [1.50, 1.50] | 1.80 [1.60, 2.00] | 2.00 [1.50, 2.20] | 0.99 [0.90, 1.05] "
        "| 1.80 [1.60, 2.00] | 1.10 [0.94, 1.11] |"
    )
    # GSM8K: suffix:auto 0.97 and goose:auto 0.90 below 0.98; hw_tree at exactly 1.0x the best: not below
    assert md_row(md, "GSM8K") == (
        "| GSM8K (n = 1) | 1.00 [1.00, 1.00] | 0.97 [0.97, 0.97] ▼ | 1.00 [1.00, 1.00] | 0.90 [0.90, 0.90] ▼ "
        "| 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] |"
    )
    assert "3 rounds" in md and "the first 1 prompts" in md and "with 2 threads" in md


def test_verdict_table(figures):
    folder, _ = figures
    md = (folder / "heldout_verdicts.md").read_text()
    assert md_row(md, "tiny-bfloat16 | spec_bench") == (
        "| tiny-bfloat16 | spec_bench | 0.99 [0.89, 1.17] ▼ | writing, all prompts | none | qa: suffix:auto 0.95 |"
    )
    assert md_row(md, "tiny-bfloat16 | fresh") == (
        "| tiny-bfloat16 | fresh | 1.05 [0.99, 1.06] | none | none | gsm8k: suffix:auto 0.97; gsm8k: goose:auto 0.90; "
        "all prompts: goose:auto 0.94 |"
    )
