"""Chat templates: whether a run wraps its prompts in the tokenizer's chat template (``bench.chat_template``:
false, the paper's raw prompts; true; or auto, for an instruct model with a template on a chat benchmark),
and a prompt's token ids either way. The decision is part of each row's key.
"""

from __future__ import annotations

from typing import Any

from goose.harness.benchmarks import FIELD_CHECKS, BenchmarkError


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def decide_chat_template(
    setting: str | bool, *, model: str, instruct: bool, bench: str, chat_bench: bool, tokenizer: Any
) -> tuple[bool, str]:
    """(apply?, why) for ``bench.chat_template = setting``; BenchmarkError for ``true`` without a template or
    an unknown setting."""
    try:
        FIELD_CHECKS["chat_template"]("bench.chat_template", setting)
    except ValueError as exc:
        raise BenchmarkError(str(exc)) from None
    template = has_chat_template(tokenizer)
    if setting is False:
        return False, "configured: raw prompts"
    if setting is True:
        if not template:
            raise BenchmarkError(
                f"bench.chat_template = true, but the tokenizer of model={model} has no chat template, so "
                f"the prompts of bench={bench} cannot be put in one. Use bench.chat_template=false (raw "
                "prompts, as in the paper) or auto (applied only where a template exists), or an "
                "instruction-tuned model whose tokenizer ships a chat template."
            )
        return True, "configured"
    if not instruct:
        return False, f"auto: model={model} is not an instruct model (model.instruct=false)"
    if not template:
        return False, f"auto: the tokenizer of model={model} has no chat template"
    if not chat_bench:
        return False, f"auto: bench={bench} is not a chat benchmark (bench.chat=false)"
    return True, f"auto: instruct model {model} on chat benchmark {bench}"


def chat_text(tokenizer: Any, text: str) -> str:
    """`text` as one user turn in the tokenizer's chat template, ending with the generation prompt."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


def encode_prompt(tokenizer: Any, text: str, chat_template: bool) -> list[int]:
    """A prompt's token ids: raw, or in the chat template without special tokens (it writes BOS itself)."""
    if not chat_template:
        return list(tokenizer(text).input_ids)
    return list(tokenizer(chat_text(tokenizer, text), add_special_tokens=False).input_ids)
