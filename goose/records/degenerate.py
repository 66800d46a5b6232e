"""Degenerate outputs: generations that ran to `max_new_tokens` repeating themselves instead of answering.

A base model given a chat prompt it does not know how to end often loops ("The answer is 4. The answer is
4. ..."): such a prompt says little about a method's speed-up (a loop is easy to draft), so tables report
how many there are and what the speed-up is without them. From a row's `output_ids`, `generated_tokens` and
`max_new_tokens` (no torch):

- `repeated_4gram_share`: the share of the output's 4-grams (token windows at positions 0, 1, ...) that
  occurred earlier in the output (starting at a smaller position, overlaps allowed); 0.0 without any.
- `hit_max_new_tokens`: the generation stopped at the length limit (not at EOS or the context).
- `degenerate`: both, with more than `DEGENERATE_SHARE` (half) of the 4-grams repeats: a loop that began
  before the middle of the output and never ended. An output that ended by itself, however repetitive, or
  a long one that repeats little, is not degenerate.

`degenerate_fields(row)` gives the three as row fields (goose.records.row.ResultRow); `row_degenerate(row)`
reads them, computing them from `output_ids` where an older row lacks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NGRAM = 4
DEGENERATE_SHARE = 0.5  # repeated 4-gram share above which an output cut at max_new_tokens is degenerate


def repeated_ngram_share(output_ids: Sequence[int], n: int = NGRAM) -> float:
    """The share of the n-grams of `output_ids` that occurred earlier in it (0.0 when it has none)."""
    grams = [tuple(output_ids[i : i + n]) for i in range(len(output_ids) - n + 1)]
    if not grams:
        return 0.0
    seen: set[tuple[int, ...]] = set()
    repeats = 0
    for gram in grams:
        repeats += gram in seen
        seen.add(gram)
    return repeats / len(grams)


def repeated_4gram_share(output_ids: Sequence[int]) -> float:
    """The share of the output's 4-grams that occurred earlier in the output."""
    return repeated_ngram_share(output_ids, NGRAM)


def hit_max_new_tokens(generated_tokens: int, max_new_tokens: int) -> bool:
    """The generation used its whole length budget (it did not stop at EOS)."""
    return generated_tokens >= max_new_tokens


def is_degenerate(
    output_ids: Sequence[int], max_new_tokens: int, generated_tokens: int | None = None
) -> bool:
    """Ran to `max_new_tokens` with more than DEGENERATE_SHARE of its 4-grams repeats; `generated_tokens`
    defaults to the output's length."""
    row = {"output_ids": output_ids, "max_new_tokens": max_new_tokens, "generated_tokens": generated_tokens}
    return degenerate_fields(row)["degenerate"]


def degenerate_fields(row: dict[str, Any]) -> dict[str, Any]:
    """{repeated_4gram_share, hit_max_new_tokens, degenerate} of a row with `output_ids` and
    `max_new_tokens` (`generated_tokens`: the output's length where absent); {} for a row without them (a
    failed generation)."""
    output, max_new = row.get("output_ids"), row.get("max_new_tokens")
    if output is None or max_new is None:
        return {}
    generated = row.get("generated_tokens")
    generated = len(output) if generated is None else int(generated)
    share = repeated_4gram_share(output)
    hit = hit_max_new_tokens(generated, int(max_new))
    return {
        "repeated_4gram_share": share,
        "hit_max_new_tokens": hit,
        "degenerate": hit and share > DEGENERATE_SHARE,
    }


def row_degenerate(row: dict[str, Any]) -> bool | None:
    """The row's `degenerate` field, else computed from its `output_ids` (rows written before the field);
    None when neither is there."""
    if row.get("degenerate") is not None:
        return bool(row["degenerate"])
    return degenerate_fields(row).get("degenerate")
