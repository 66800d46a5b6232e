"""Chat templates: whether a run wraps its prompts in the tokenizer's chat template (``bench.chat_template``:
false, the paper's raw prompts; true; or auto, for an instruct model with a template on a chat benchmark),
and a prompt's token ids either way. The decision is part of each row's key.

A base model has no chat template, and given a chat benchmark's bare question it rambles on (Gemma-3-270M
ran 55 of 60 Spec-Bench / MT-Bench prompts to max_new_tokens, most of them in loops). Under auto, a base
model whose config names a plain instruction format (``model.base_prompt_format``, one of
`BASE_PROMPT_FORMATS`) gets its chat-benchmark prompts in that format instead: a `BaseFormat`, the third
prompt form beside raw (False) and the chat template (True). Rows record its template in ``prompt_format``
(part of the cell key; None for the other two forms) and ``chat_template`` false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goose.harness.benchmarks.spec import FIELD_CHECKS, BenchmarkError

# model.base_prompt_format -> its template ({prompt}: the benchmark's prompt text). instruction_response:
# Alpaca's headers without its preamble, the best of six forms tried on Gemma-3-270M (AR, greedy, 128 tokens,
# one Spec-Bench prompt per category: degenerate outputs 2/6 vs 4/6 raw, 6/6 Question/Answer). On 18 prompts
# it looped as often as raw prompts (10/18 each): it does not cure a 270M base model, which never wrote EOS
# within 128 tokens in any form (docs/usage.md); analysis.spec_bench_table reports speed-ups without the
# degenerate prompts for that reason.
BASE_PROMPT_FORMATS = {"instruction_response": "### Instruction:\n{prompt}\n\n### Response:\n"}


@dataclass(frozen=True)
class BaseFormat:
    """A base model's plain instruction format: the prompt text put in `template` at ``{prompt}``, then
    tokenized as a raw prompt."""

    name: str
    template: str

    def apply(self, text: str) -> str:
        return self.template.replace("{prompt}", text)  # not str.format: the text may hold braces

    def __str__(self) -> str:
        return f"base_prompt_format={self.name}"


PromptForm = bool | BaseFormat
"""How a prompt's text is fed: False raw, True in the tokenizer's chat template, or a `BaseFormat`."""


def check_base_prompt_format(name: str, value: Any) -> str | None:
    """``model.base_prompt_format``: None (raw prompts) or a name of `BASE_PROMPT_FORMATS`; ValueError names
    the field, the value and the valid ones."""
    if value is not None and value not in BASE_PROMPT_FORMATS:
        raise ValueError(
            f"{name} = {value!r}: not a base prompt format; valid ones: {', '.join(BASE_PROMPT_FORMATS)}, "
            "or null (raw prompts)"
        )
    return value


def base_prompt_form(name: str) -> BaseFormat:
    """The `BaseFormat` called `name` (ValueError for an unknown one)."""
    check_base_prompt_format("model.base_prompt_format", name)
    return BaseFormat(name, BASE_PROMPT_FORMATS[name])


def prompt_format(form: PromptForm) -> str | None:
    """A row's ``prompt_format``: the template of a `BaseFormat`, None for raw prompts or the chat template."""
    return form.template if isinstance(form, BaseFormat) else None


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def decide_chat_template(
    setting: str | bool,
    *,
    model: str,
    instruct: bool,
    bench: str,
    chat_bench: bool,
    tokenizer: Any,
    base_format: str | None = None,
) -> tuple[PromptForm, str]:
    """(the prompt form, why) for ``bench.chat_template = setting``: True applies the chat template, False
    leaves prompts raw, and under auto a base model with `base_format` (``model.base_prompt_format``) on a
    chat benchmark gets its `BaseFormat`. BenchmarkError for ``true`` without a template, an unknown setting
    or an unknown format."""
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
        if base_format is None or not chat_bench:
            return False, f"auto: model={model} is not an instruct model (model.instruct=false)"
        try:
            form = base_prompt_form(base_format)
        except ValueError as exc:
            raise BenchmarkError(str(exc)) from None
        return (
            form,
            f"auto: base model {model} on chat benchmark {bench}: model.base_prompt_format={base_format}",
        )
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


def encode_prompt(tokenizer: Any, text: str, chat_template: PromptForm) -> list[int]:
    """A prompt's token ids: raw, in a base model's `BaseFormat` (then raw), or in the chat template without
    special tokens (it writes BOS itself)."""
    if isinstance(chat_template, BaseFormat):
        return list(tokenizer(chat_template.apply(text)).input_ids)
    if not chat_template:
        return list(tokenizer(text).input_ids)
    return list(tokenizer(chat_text(tokenizer, text), add_special_tokens=False).input_ids)
