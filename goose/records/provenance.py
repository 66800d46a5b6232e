"""Provenance of a result row, after lm-evaluation-harness (`prompt_hash`, `chat_template_sha`, seeds).

Row fields (rows written before them lack them; readers use `row.get`):
- prompt_hash: sha256 of the prompt text as the benchmark gave it (before any chat template);
- prompt_ids_hash: sha256 of the token ids the model was fed (chat template applied or not);
- chat_template_sha: sha256 of the tokenizer's chat template when the prompt was put in it, else None;
- seeds: {"run": the sampling group's seed, "sample": the sample's seed (None when greedy),
  "sequence": the seed of this generation's noise (0 when greedy)}.
None of these is part of the cell key (`goose.records.results.CELL_FIELDS`) or the config hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any


def sha256(value: Any) -> str | None:
    """Hex sha256 of a string (UTF-8), or of the compact sorted JSON of anything else; None for None."""
    if value is None:
        return None
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prompt_fields(text: Any, prompt_ids: Sequence[int]) -> dict[str, Any]:
    """prompt_hash (of the text, or of its JSON when it is not a string; None without text) and
    prompt_ids_hash."""
    return {
        "prompt_hash": sha256(text),
        "prompt_ids_hash": sha256([int(t) for t in prompt_ids]),
    }


def chat_template_fields(tokenizer: Any, applied: bool) -> dict[str, Any]:
    """chat_template_sha: the hash of the template the prompts were put in (None for raw prompts,
    or a tokenizer without one)."""
    template = getattr(tokenizer, "chat_template", None) if applied else None
    return {"chat_template_sha": sha256(template) if template else None}


def seed_fields(run_seed: int, sample_seed: int | None, sequence_seed: int) -> dict[str, Any]:
    """The seeds one generation used."""
    return {"seeds": {"run": run_seed, "sample": sample_seed, "sequence": sequence_seed}}
