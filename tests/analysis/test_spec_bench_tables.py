"""The Spec-Bench table and combining-vs-choosing on small synthetic rows, cells worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import combine_vs_choose, spec_bench_table
from analysis.load import load
from analysis.report import Skip
from goose.records.results import config_hash
from goose.records.spec_bench import per_category_sample, spec_bench_category
from tests.conftest import SHARED_DATA, require_shared

SPEC_BENCH_FILE = SHARED_DATA / "spec_bench" / "question.jsonl"


def row(method, bench, prompt, gen, calls, wall, **extra):
    cfg = {"m": method}
    return {
        "model": "tiny",
        "bench": bench,
        "method": method,
        "method_config": cfg,
        "config_hash": config_hash(cfg),
        "max_new_tokens": 64,
        "dtype": "float32",
        "chat_template": False,
        "temperature": 0.0,
        "prompt_id": prompt,
        "generated_tokens": gen,
        "forward_calls": calls,
        "wall_time_s": wall,
        "status": "ok",
        **extra,
    }


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def md_row(md: str, first: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {first} |"))


# ---------------------------------------------------------------- categories and the per-category sample
def test_category_from_question_id() -> None:
    assert [spec_bench_category(i) for i in (81, "160", 161, 320, 321, 480, 560)] == [
        "mt_bench", "mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"
    ]  # fmt: skip
    assert spec_bench_category("HumanEval/0") is None and spec_bench_category(80) is None


def test_category_ranges_match_the_question_file() -> None:
    groups = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}
    for line in require_shared(SPEC_BENCH_FILE, "Spec-Bench's questions").read_text().splitlines():
        q = json.loads(line)
        want = "mt_bench" if q["category"] in groups else q["category"]
        assert spec_bench_category(q["question_id"]) == want, q["question_id"]


def test_per_category_sample_spreads_over_each_category() -> None:
    ids = [str(i) for i in range(81, 241)] + ["HumanEval/0"]
    got = per_category_sample(ids, 2, prompt_id=lambda p: p)
    assert got == ["81", "121", "161", "201"]  # 80 per category: every 40th
    assert per_category_sample(ids[:3], 5, prompt_id=lambda p: p) == ["81", "82", "83"]
    with pytest.raises(ValueError):
        per_category_sample(ids, 0, prompt_id=lambda p: p)


# ---------------------------------------------------------------- the Spec-Bench table
def spec_rows() -> list[dict]:
    # AR: 10 tokens per second everywhere. 241 (summarisation) lacks Goose: left out for every method.
    return [
        row("ar", "spec_bench", "81", 10, 10, 1.0),
        row("ar", "spec_bench", "161", 10, 10, 1.0),
        row("ar", "spec_bench", "241", 20, 20, 2.0),
        row("pld", "spec_bench", "81", 10, 5, 0.5),
        row("pld", "spec_bench", "161", 10, 8, 0.8),
        row("pld", "spec_bench", "241", 20, 10, 1.0),
        row("goose", "spec_bench", "81", 10, 4, 0.4),
        row("goose", "spec_bench", "161", 10, 5, 0.5),
        row("goose_auto", "spec_bench", "81", 10, 1, 0.1),  # not one of the table's methods
    ]


def test_spec_bench_table_from_run_rows(tmp_path: Path) -> None:
    write(tmp_path / "results" / "runs" / "tiny" / "spec_bench.jsonl", spec_rows())
    out = spec_bench_table.build(load(tmp_path / "results" / "runs"), tmp_path / "fig")
    md = (tmp_path / "fig" / "spec_bench_table_1.md").read_text()
    # PLD: 81 τ 2, × (10/.5)/(10/1) = 2; 161 τ 1.25, × 1.25; overall τ 20/13, × (20/1.3)/(20/2) = 1.54
    assert md_row(md, "PLD") == "| PLD | 2.00 | 1.25 | — | — | — | — | 1.54 | 1.54 |"
    # Goose: 81 τ 2.5, × 2.5; 161 τ 2, × 2; overall τ 20/9 = 2.22, × 2.22
    assert md_row(md, "Goose") == "| Goose | 2.50 | 2.00 | — | — | — | — | 2.22 | 2.22 |"
    assert md_row(md, "AR") == "| AR | 1.00 | 1.00 | — | — | — | — | 1.00 | 1.00 |"
    assert md_row(md, "Lookahead") == "| Lookahead | — | — | — | — | — | — | — | — |"
    lines = [line.split(" |")[0] for line in md.splitlines() if line.startswith("| ")][1:]
    assert lines[:12] == [
        "| AR", "| PLD", "| Lookahead", "| REST", "| Token Recycling", "| SAM-Decoding", "| SuffixDecoding",
        "| LogitSpec", "| Hierarchy Drafting", "| Source selection", "| OPT-Tree (Goose cand.)", "| Goose",
    ]  # fmt: skip
    assert (
        "| Token Recycling (published: Vicuna-7B, A100) | 2.37 | 2.02 | 2.27 | 2.08 | 2.53 | 2.02 | 2.73 | 2.22 |"
        in md
    )
    assert "MT 1, Transl. 1, Summ. 0, QA 0, Math 0, RAG 0, Overall 2" in md and "other models and GPUs" in md
    tau = (tmp_path / "fig" / "spec_bench_table_1_tau.md").read_text()
    assert md_row(tau, "PLD") == "| PLD | 2.00 | 1.25 | — | — | — | — | 1.54 |"
    assert (
        "| LogitSpec (published: Vicuna-7B, GPU not stated) | 2.31 | 1.85 | 3.02 | 2.11 | 2.65 | 2.44 | 2.37 |"
        in tau
    )
    assert len(out.files) == 4


def test_bench_run_speedup_is_the_median_over_repeats(tmp_path: Path) -> None:
    rows = []
    for rep, (ar_wall, pld_wall) in enumerate([(1.0, 0.5), (2.0, 0.8)]):  # ratios 2.0 and 2.5
        rows += [
            row("ar", "spec_bench", "161", 10, 10, ar_wall, repeat=rep),
            row("pld", "spec_bench", "161", 10, 5, pld_wall, repeat=rep),
        ]
    write(tmp_path / "results" / "bench" / "run1" / "repeat0" / "tiny" / "spec_bench.jsonl", rows)
    (tmp_path / "results" / "reference").mkdir(parents=True)
    res = load(tmp_path / "results" / "reference", records=tmp_path / "results")
    spec_bench_table.build(res, tmp_path / "fig")
    md = (tmp_path / "fig" / "spec_bench_table_1.md").read_text()
    assert "run run1" in md
    assert md_row(md, "PLD") == "| PLD | — | 2.25 | — | — | — | — | 2.00 | 2.25 |"


def test_a_method_run_only_at_budget_auto_fills_its_row(tmp_path: Path) -> None:
    rows = [
        row("ar", "spec_bench", "481", 10, 10, 1.0),
        row("goose_auto", "spec_bench", "481", 10, 4, 0.5),
        row("pld", "spec_bench", "481", 10, 5, 0.5),
        row("pld_auto", "spec_bench", "481", 10, 2, 0.1),  # PLD has rows of its own: these are not used
    ]
    write(tmp_path / "r" / "x.jsonl", rows)
    spec_bench_table.build(load(tmp_path / "r"), tmp_path / "fig")
    md = (tmp_path / "fig" / "spec_bench_table_1.md").read_text()
    assert md_row(md, "Goose") == "| Goose | — | — | — | — | — | 2.00 | 2.50 | 2.00 |"
    assert md_row(md, "PLD") == "| PLD | — | — | — | — | — | 2.00 | 2.00 | 2.00 |"
    assert "At budget=auto (its `<method>_auto` rows): Goose." in md


def degenerate_rows(**extra) -> list[dict]:
    """10-token outputs at max_new_tokens 10: AR loops on 81 (one token ten times) and answers 161."""
    loop, answer = [7] * 10, list(range(10))
    spec = [("ar", "81", 10, 1.0, loop), ("ar", "161", 10, 1.0, answer)]
    spec += [("pld", "81", 2, 0.2, loop), ("pld", "161", 8, 0.8, answer)]  # 81: ×5, 161: ×1.25
    return [
        row(m, "spec_bench", p, 10, calls, wall, max_new_tokens=10, output_ids=ids, **extra)
        for m, p, calls, wall, ids in spec
    ]


def test_degenerate_ar_prompts_are_counted_and_left_out_of_the_second_table(tmp_path: Path) -> None:
    """Rows without the flags (written before them): computed from output_ids."""
    write(tmp_path / "r" / "x.jsonl", degenerate_rows())
    out = spec_bench_table.build(load(tmp_path / "r"), tmp_path / "fig")
    md = (tmp_path / "fig" / "spec_bench_table_1.md").read_text()
    assert (
        md_row(md, "PLD") == "| PLD | 5.00 | 1.25 | — | — | — | — | 2.00 | 2.00 |"
    )  # 20 / 10 calls, 2 s / 1 s
    counts = "MT 1/1, Transl. 0/1, Summ. 0/0, QA 0/0, Math 0/0, RAG 0/0, Overall 1/2"
    assert f"goose.records.degenerate): {counts}" in md
    clean = (tmp_path / "fig" / "spec_bench_table_1_nondegenerate.md").read_text()
    assert md_row(clean, "PLD") == "| PLD | — | 1.25 | — | — | — | — | 1.25 | 1.25 |"  # 161 only
    assert "MT 0, Transl. 1, Summ. 0, QA 0, Math 0, RAG 0, Overall 1" in clean and counts in clean
    assert "without the prompts whose AR output is degenerate" in clean
    assert len(out.files) == 6


def test_a_rows_own_degenerate_flag_is_used(tmp_path: Path) -> None:
    rows = [{**r, "repeat": 0, "degenerate": False} for r in degenerate_rows()]  # flagged by the writer
    write(tmp_path / "results" / "bench" / "run1" / "repeat0" / "tiny" / "spec_bench.jsonl", rows)
    (tmp_path / "results" / "reference").mkdir(parents=True)
    spec_bench_table.build(
        load(tmp_path / "results" / "reference", records=tmp_path / "results"), tmp_path / "f"
    )
    md = (tmp_path / "f" / "spec_bench_table_1.md").read_text()
    assert "MT 0/1, Transl. 0/1" in md and "run run1" in md


def test_spec_bench_table_skips_without_rows(tmp_path: Path) -> None:
    write(tmp_path / "r" / "x.jsonl", [row("ar", "humaneval", "HumanEval/0", 10, 10, 1.0)])
    with pytest.raises(Skip):
        spec_bench_table.build(load(tmp_path / "r"), tmp_path / "fig")


# ---------------------------------------------------------------- combining vs choosing
def choose_rows() -> list[dict]:
    spec = {  # method: (forward calls, wall seconds) for 10 tokens; AR: 10 calls, 1 s
        "humaneval": {"goose": (4, 0.5), "source_select": (5, 0.4), "pld": (8, 0.8), "tr": (6, 0.7), "suffix": (7, 0.9)},
        "gsm8k": {"goose": (5, 0.6), "source_select": (4, 0.5), "pld": (4, 0.5), "tr": (9, 0.9), "suffix": (8, 0.8)},
    }  # fmt: skip
    rows = []
    for bench, methods in spec.items():
        rows.append(row("ar", bench, f"{bench}-0", 10, 10, 1.0))
        rows += [row(m, bench, f"{bench}-0", 10, calls, wall) for m, (calls, wall) in methods.items()]
    return rows


def test_combine_vs_choose_table_and_sentence(tmp_path: Path) -> None:
    write(tmp_path / "r" / "tiny.jsonl", choose_rows())
    out = combine_vs_choose.build(load(tmp_path / "r"), tmp_path / "fig")
    md = (tmp_path / "fig" / "combine_vs_choose_1.md").read_text()
    # τ = 10 / calls; × = 1 / wall
    assert (
        md_row(md, "HumanEval")
        == "| HumanEval | 1 | 2.50 | 2.00 | 1.25 | 1.67 | 1.43 | 2.00 | 2.50 | 1.25 | 1.43 | 1.11 |"
    )
    assert (
        md_row(md, "GSM8K")
        == "| GSM8K | 1 | 2.00 | 2.50 | 2.50 | 1.11 | 1.25 | 1.67 | 2.00 | 2.00 | 1.11 | 1.25 |"
    )
    sentence = (
        "Combining (Goose) beats choosing (source selection) on τ in 1/2 benchmarks and on wall clock in 0/2; "
        "the highest τ: Goose on HumanEval; Source selection on GSM8K; "
        "the fastest: Source selection on HumanEval, GSM8K."
    )
    assert sentence in md
    assert any(sentence in n for n in out.notes)


def test_combine_vs_choose_counts_spec_bench_categories(tmp_path: Path) -> None:
    rows = [
        row(m, "spec_bench", "401", 10, c, 1.0) for m, c in (("ar", 10), ("goose", 4), ("source_select", 5))
    ]
    write(tmp_path / "r" / "tiny.jsonl", rows)
    combine_vs_choose.build(load(tmp_path / "r"), tmp_path / "fig")
    md = (tmp_path / "fig" / "combine_vs_choose_1.md").read_text()
    assert md_row(md, "Spec-Bench Math").startswith("| Spec-Bench Math | 1 | 2.50 | 2.00 | — |")
    assert "highest τ: Goose on Spec-Bench Math" in md


def test_combine_vs_choose_skips_without_both(tmp_path: Path) -> None:
    write(tmp_path / "r" / "x.jsonl", [r for r in choose_rows() if r["method"] != "source_select"])
    with pytest.raises(Skip):
        combine_vs_choose.build(load(tmp_path / "r"), tmp_path / "fig")


def test_a_base_model_format_is_a_table_of_its_own(tmp_path: Path) -> None:
    form = "### Instruction:\n{prompt}\n\n### Response:\n"
    write(tmp_path / "r" / "x.jsonl", degenerate_rows() + degenerate_rows(prompt_format=form))
    out = spec_bench_table.build(load(tmp_path / "r"), tmp_path / "fig")
    assert len(out.files) == 12 and any("raw prompts" in n for n in out.notes)
    assert any("base-model format '### Instruction:" in n for n in out.notes)
