"""Chat templates: whether a run puts the tokenizer's chat template around its prompts, and the
token ids of one prompt either way.

The paper's prompts are raw text, and every paper preset (conf/experiment/) sets
``bench.chat_template: false``. Outside the presets, ``bench.chat_template`` decides per run:

=============  ==========================================================================
``false``      raw prompts
``true``       the chat template, always; an error if the tokenizer has none
``auto``       the chat template when all three hold: the model is instruction-tuned
               (``model.instruct``), its tokenizer has a chat template, and the benchmark is
               a chat benchmark (``bench.chat``: MT-Bench, Spec-Bench, Alpaca, CNN/DM); else raw
=============  ==========================================================================

Applied, a prompt becomes one user turn with the assistant's generation prompt appended
(``apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)``), and
that text is tokenized without adding special tokens again: a template that writes the BOS
token itself (Llama 3, Gemma) would otherwise get two.

The decision is printed in the run's header line and stored in every result row (field
``chat_template``), where it is part of the row's key (`goose.records.results.CELL_FIELDS`): a
templated and a raw run of one prompt never stand in for each other on resume or as the AR reference.
"""

from __future__ import annotations

from typing import Any

from goose.harness.benchmarks import FIELD_CHECKS, BenchmarkError


def has_chat_template(tokenizer: Any) -> bool:
    """Whether the tokenizer carries a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def decide_chat_template(
    setting: str | bool, *, model: str, instruct: bool, bench: str, chat_bench: bool, tokenizer: Any
) -> tuple[bool, str]:
    """(apply the chat template?, why in a few words, for the run's header line) for ``bench.chat_template = setting`` on model
    `model` (``model.instruct = instruct``) and benchmark `bench` (``bench.chat = chat_bench``).

    Raises BenchmarkError for ``true`` with a tokenizer that has no chat template, and for a
    setting outside auto/true/false.
    """
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
    """The token ids of a prompt: raw (``tokenizer(text)``, with the tokenizer's usual special
    tokens), or in the chat template, tokenized without adding special tokens a second time."""
    if not chat_template:
        return list(tokenizer(text).input_ids)
    return list(tokenizer(chat_text(tokenizer, text), add_special_tokens=False).input_ids)
