"""Spec-Bench's categories (multi-turn conversation, translation, summarisation, QA, math reasoning, RAG) by
question id, and a sample of each: the bench driver draws its `--per-category` prompts with them and the
Spec-Bench tables group rows by them. Spec-Bench's question ids are laid out in fixed ranges per category
(data/spec_bench/question.jsonl; Spec-Bench's own speed.py splits by the same ranges).

The file's own `category` field is finer: the multi-turn group is MT-Bench's eight kinds (writing,
roleplay, ...), ten questions each. `question_category` gives it by the same ranges, for the held-out
protocol (experiments/heldout/), which samples and tabulates per value of that field."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

SPEC_BENCH = "spec_bench"
# (key, column, first id, last id): Spec-Bench's question.jsonl, in its leaderboard's column order.
SPEC_BENCH_CATEGORIES: tuple[tuple[str, str, int, int], ...] = (
    ("mt_bench", "MT", 81, 160),
    ("translation", "Transl.", 161, 240),
    ("summarization", "Summ.", 241, 320),
    ("qa", "QA", 321, 400),
    ("math_reasoning", "Math", 401, 480),
    ("rag", "RAG", 481, 560),
)
# (the `category` field of question.jsonl, first id, last id), in file order. Ids 81-100 (writing,
# roleplay) are MT-Bench's first twenty questions, the prompts of the canonical protocol's mtbench.
SPEC_BENCH_QUESTION_CATEGORIES: tuple[tuple[str, int, int], ...] = (
    ("writing", 81, 90),
    ("roleplay", 91, 100),
    ("reasoning", 101, 110),
    ("math", 111, 120),
    ("coding", 121, 130),
    ("extraction", 131, 140),
    ("stem", 141, 150),
    ("humanities", 151, 160),
    ("translation", 161, 240),
    ("summarization", 241, 320),
    ("qa", 321, 400),
    ("math_reasoning", 401, 480),
    ("rag", 481, 560),
)
P = TypeVar("P")


def _question_id(prompt_id: Any) -> int | None:
    try:
        return int(str(prompt_id).split("#")[0])
    except ValueError:
        return None


def spec_bench_category(prompt_id: Any) -> str | None:
    """The Spec-Bench category of a question id (None outside the file's ranges)."""
    qid = _question_id(prompt_id)
    return next(
        (key for key, _, lo, hi in SPEC_BENCH_CATEGORIES if qid is not None and lo <= qid <= hi), None
    )


def question_category(prompt_id: Any) -> str | None:
    """The `category` field of a Spec-Bench question by its id (writing, ..., rag; None outside the file's
    ranges)."""
    qid = _question_id(prompt_id)
    return next(
        (key for key, lo, hi in SPEC_BENCH_QUESTION_CATEGORIES if qid is not None and lo <= qid <= hi), None
    )


def per_category_sample(
    prompts: Sequence[P],
    n: int,
    prompt_id=lambda p: p.prompt_id,
    category: Callable[[Any], str | None] = spec_bench_category,
) -> list[P]:
    """`n` prompts of each Spec-Bench category, evenly spaced over the category in file order (so the
    multi-turn group's eight MT-Bench kinds all appear), in the prompts' order; all of a smaller one.
    `category`: a question id's group, the leaderboard's six (`spec_bench_category`, the default) or the
    file's `category` field (`question_category`)."""
    if n < 1:
        raise ValueError(f"per-category count must be >= 1, got {n}")
    by_cat: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        cat = category(prompt_id(p))
        if cat is not None:
            by_cat.setdefault(cat, []).append(i)
    keep: set[int] = set()
    for idx in by_cat.values():
        step = len(idx) / min(n, len(idx))
        keep.update(idx[int(j * step)] for j in range(min(n, len(idx))))
    return [p for i, p in enumerate(prompts) if i in keep]
