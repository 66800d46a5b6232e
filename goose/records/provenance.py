"""Provenance of a result row, after lm-evaluation-harness: sha256 of the benchmark's prompt text
(`prompt_hash`), of the ids fed (`prompt_ids_hash`) and of the chat template used (`chat_template_sha`), and
the `seeds` {run, sample, sequence}. Older rows lack them (`row.get`); none is in the cell key or config hash.
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
    """prompt_hash (of the text, or of its JSON; None without text) and prompt_ids_hash."""
    return {
        "prompt_hash": sha256(text),
        "prompt_ids_hash": sha256([int(t) for t in prompt_ids]),
    }


def chat_template_fields(tokenizer: Any, applied: Any) -> dict[str, Any]:
    """chat_template_sha of the template the prompts were put in (None for raw prompts or none). `applied`:
    the prompt form (goose.harness.chat.PromptForm); only True is the tokenizer's template (a base model's
    plain format is in the row's `prompt_format`)."""
    template = getattr(tokenizer, "chat_template", None) if applied is True else None
    return {"chat_template_sha": sha256(template) if template else None}


def seed_fields(run_seed: int, sample_seed: int | None, sequence_seed: int) -> dict[str, Any]:
    """The seeds one generation used."""
    return {"seeds": {"run": run_seed, "sample": sample_seed, "sequence": sequence_seed}}
