"""goose.records.heldout on hand-built rows (tests/records/heldout_rows.py): the fresh processes' rows read as
rounds, Spec-Bench's grouped by the question file's `category` field, ratios within a repeat, the best single
source per repeat, the floors and the verdicts. Ratios worked out by hand in the comments."""

from __future__ import annotations

import json

import pytest

from goose.records.bench_run import record_from_rows
from goose.records.heldout import (
    ALL,
    BEST_SINGLE,
    VS_BEST,
    below_floor,
    below_in_every_repeat,
    by_question_category,
    floor_of,
    fresh_record,
    fresh_rows,
    group_ratios,
    spec_record,
    texts_line,
    texts_written,
    verdict_lines,
)
from goose.records.spec_bench import (
    SPEC_BENCH_QUESTION_CATEGORIES,
    per_category_sample,
    question_category,
    spec_bench_category,
)
from tests.conftest import SHARED_DATA, require_shared
from tests.records.heldout_rows import METHODS, row, write_fresh_run, write_spec_run


def rounded(columns: dict[str, list[float]]) -> dict[str, list[float]]:
    return {c: [round(x, 4) for x in v] for c, v in columns.items()}


def test_question_categories_match_the_question_file() -> None:
    questions = require_shared(SHARED_DATA / "spec_bench" / "question.jsonl", "Spec-Bench's questions")
    records = [json.loads(line) for line in questions.read_text().splitlines()]
    assert all(question_category(q["question_id"]) == q["category"] for q in records)
    in_file = list(dict.fromkeys(q["category"] for q in records))
    assert in_file == [c for c, _, _ in SPEC_BENCH_QUESTION_CATEGORIES]


def test_question_category_and_its_sample() -> None:
    assert [question_category(i) for i in (81, "90", 91, 160, "161#2", 560)] == [
        "writing", "writing", "roleplay", "humanities", "translation", "rag"
    ]  # fmt: skip
    assert question_category(80) is None and question_category("HumanEval/0") is None
    ids = [str(i) for i in range(81, 171)]  # MT-Bench's eight kinds, then ten translations
    got = per_category_sample(ids, 3, prompt_id=lambda p: p, category=question_category)
    # ten questions per kind: every 10/3-th (indices 0, 3, 6); the first ten of translation alike
    assert got[:3] == ["81", "84", "87"] and got[-3:] == ["161", "164", "167"] and len(got) == 27
    # the default groups by the leaderboard's six: 80 of mt_bench, 10 of translation here
    assert per_category_sample(ids, 1, prompt_id=lambda p: p) == ["81", "161"]
    assert spec_bench_category("81") == "mt_bench"


def test_fresh_rows_are_each_folders_own_method_with_its_round_as_repeat(tmp_path) -> None:
    run = write_fresh_run(tmp_path / "run")
    rows = fresh_rows(run / "fresh", {"contenders": ["engine:ar"]})
    # 2 benchmarks x 3 rounds x 5 contenders; the seeded AR rows of the other folders and the reference's not
    assert len(rows) == 30
    assert sorted({r["repeat"] for r in rows}) == [0, 1, 2]
    assert sum(r["method"] == "ar" for r in rows) == 6 and all(r["wall_time_s"] < 100 for r in rows)
    assert all(r["bench_protocol"] == {"contenders": ["engine:ar"]} for r in rows)


def test_spec_bench_ratios_per_question_category_and_the_best_single_source_per_repeat(tmp_path) -> None:
    record = spec_record(write_spec_run(tmp_path / "run"))
    ratios = group_ratios(record, by_question_category)
    assert list(ratios) == ["writing", "qa", ALL]
    # writing, AR 10 tok/s: pld 12, 9, 11; suffix:auto 11, 11, 8; hw_tree:auto 13, 10, 9.5. The best single
    # source per repeat is 12, 11, 11 (not the better of the two medians), hw_tree over it 13/12, 10/11, 9.5/11
    assert rounded(ratios["writing"]) == {
        "engine:pld": [1.2, 0.9, 1.1],
        "engine:suffix:auto": [1.1, 1.1, 0.8],
        "engine:hw_tree:auto": [1.3, 1.0, 0.95],
        BEST_SINGLE: [1.2, 1.1, 1.1],
        VS_BEST: [1.0833, 0.9091, 0.8636],
    }
    # all prompts, token-weighted: pld repeat 0 = 120 / (60/12 + 60/18) over 120 / (60/10 + 60/20)
    assert rounded(ratios[ALL])["engine:pld"] == [1.08, 0.9161, 1.0828]
    assert verdict_lines("spec_bench", ratios) == [
        "spec_bench: hw_tree:auto below 1.00x the best single source (median over repeats) in writing (0.91), "
        "all prompts (0.99)",
        "spec_bench: budget=auto contenders below 0.98x engine:ar (median over repeats) in "
        "qa: engine:suffix:auto (0.95)",
    ]


def test_fresh_ratios_per_benchmark_in_the_manifests_order(tmp_path) -> None:
    record = fresh_record(write_fresh_run(tmp_path / "run"))
    assert list(record["summary"]["tokens_per_s"]) == [
        "engine:ar", "engine:pld", "engine:suffix:auto", "engine:hw_tree:auto", "engine:goose:auto"
    ]  # fmt: skip
    ratios = group_ratios(record)
    assert list(ratios) == ["humaneval", "gsm8k", ALL]
    assert rounded(ratios["humaneval"])[VS_BEST] == [1.1, 1.1111, 0.9375]  # 22/20, 20/18, 15/16
    assert rounded(ratios["gsm8k"])[VS_BEST] == [1.0, 1.0, 1.0]  # at the floor: not below it
    assert verdict_lines("fresh", ratios) == [
        "fresh: hw_tree:auto below 1.00x the best single source (median over repeats) in no group",
        "fresh: budget=auto contenders below 0.98x engine:ar (median over repeats) in gsm8k: engine:suffix:auto "
        "(0.97); gsm8k: engine:goose:auto (0.90); all prompts: engine:goose:auto (0.94)",
    ]
    assert record["summary"]["identical_to_engine_ar"]["engine:goose:auto"]["identical"] == 2


@pytest.mark.parametrize(
    "column, floor",
    [
        (VS_BEST, 1.0),
        ("engine:tr:auto", 0.98),
        ("engine:pld", None),
        (BEST_SINGLE, None),
        ("engine:ar", None),
    ],
)
def test_floors(column, floor) -> None:
    assert floor_of(column) == floor


def test_below_in_every_repeat_is_below_the_floor_beyond_the_spread() -> None:
    assert below_in_every_repeat(VS_BEST, [0.95, 0.97, 0.99])
    assert not below_in_every_repeat(VS_BEST, [0.95, 0.97, 1.0])  # one repeat at the floor: within the spread
    assert below_floor(VS_BEST, [0.95, 0.97, 1.0])  # while its median is below
    assert below_in_every_repeat("engine:tr:auto", [0.97, 0.979]) and not below_in_every_repeat(
        "engine:tr:auto", [0.97, 0.98]
    )
    assert not below_in_every_repeat("engine:pld", [0.5, 0.6]) and not below_in_every_repeat(VS_BEST, [])


def test_no_rows_no_record(tmp_path) -> None:
    assert spec_record(tmp_path) is None and fresh_record(tmp_path) is None


def test_texts_written_count_outputs_not_ars_and_their_repetition() -> None:
    """Per compared contender over every repeat of a group: the outputs that differ from the same repeat's
    engine AR output, and the mean repeated-4-gram share; a contender that wrote AR's text counts 0."""
    ar_out = list(range(60))
    other = [*range(30), *([7, 8, 9, 10] * 8)[:30]]  # leaves AR's output at token 30, into a loop
    rows, t = [], 0.0
    for rep in range(2):
        for prompt, bench in (("81", "writing"), ("321", "qa")):
            outs = {
                "engine:ar": (ar_out, 0.1),
                "engine:pld": (ar_out, 0.1),
                "engine:suffix:auto": (
                    other if bench == "writing" else ar_out,
                    0.5 if bench == "writing" else 0.1,
                ),
                "engine:hw_tree:auto": (other if rep == 1 else ar_out, 0.3 if rep == 1 else 0.1),
            }
            for name, (out, share) in outs.items():
                t += 1
                rows.append(
                    row(
                        METHODS[name], bench, prompt, 10.0, rep, t, output_ids=out, repeated_4gram_share=share
                    )
                )
    record = record_from_rows(rows, "texts")
    writing = texts_written(
        {**record, "per_prompt": [p for p in record["per_prompt"] if p["bench"] == "writing"]}, "writing"
    )
    assert writing == {
        "engine:ar": {"runs": 2, "diverged": 0, "repetition": 0.1},
        "engine:suffix:auto": {"runs": 2, "diverged": 2, "repetition": 0.5},
        "engine:pld": {"runs": 2, "diverged": 0, "repetition": 0.1},
        "engine:hw_tree:auto": {"runs": 2, "diverged": 1, "repetition": pytest.approx(0.2)},
    }
    everything = texts_written(record, ALL)
    assert (
        everything["engine:suffix:auto"]["diverged"] == 2
        and everything["engine:hw_tree:auto"]["diverged"] == 2
    )
    assert everything["engine:hw_tree:auto"]["runs"] == 4
    line = texts_line("writing", writing)
    assert line.startswith(
        "writing, what the compared contenders wrote (all repeats): ar repeated 4-grams 0.10; "
    )
    assert "suffix:auto 2/2 outputs not AR's, repeated 4-grams 0.50" in line
    assert "hw_tree:auto 1/2 outputs not AR's, repeated 4-grams 0.20" in line
    unrecorded = {name: {**t, "repetition": float("nan")} for name, t in writing.items()}
    assert texts_line("writing", unrecorded).endswith(
        "ar -; suffix:auto 2/2 outputs not AR's; pld 0/2 outputs not AR's; hw_tree:auto 1/2 outputs not AR's"
    )
