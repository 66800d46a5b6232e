"""Chat templates (goose.harness.chat): the auto/true/false decision, the token ids on SmolLM2's real
tokenizer (no double BOS), the presets stay raw, and the flag in every row and in the row's key; a base
model's plain instruction format (model.base_prompt_format) on chat benchmarks under auto, its own cell."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from baselines.pld import PromptLookupDrafter
from goose.engine.core.drafter import ARDrafter
from goose.harness.benchmarks.spec import BenchmarkError, bench_spec
from goose.harness.chat import (
    BASE_PROMPT_FORMATS,
    BaseFormat,
    base_prompt_form,
    chat_text,
    decide_chat_template,
    encode_prompt,
)
from goose.harness.compose import UserError, compose_config
from goose.harness.models.gguf import gguf_cache_dir, locate_gguf
from goose.harness.models.load import load_model
from goose.harness.runner import Cell, run_cell
from goose.records.results import cell_key, read_rows
from tests.conftest import ROOT, SHARED_DATA, model_spec
from tests.toy_harness import one_thread, tiny_engine, toy_prompts  # noqa: F401

TEXT = "Write a haiku about speculative decoding."


def offline_tokenizer(name: str):
    """An offline model's tokenizer, as `load_model` gives it: from the safetensors cache of the
    dequantised GGUF file when it is there (no weights loaded), else through load_model."""
    spec = model_spec(name)
    cached = gguf_cache_dir(spec["name"], locate_gguf(spec["gguf_package"], spec["gguf_file"]))
    if cached.is_dir():
        return AutoTokenizer.from_pretrained(cached)
    return load_model(**spec).tokenizer


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    """SmolLM2-135M-Instruct's tokenizer."""
    return offline_tokenizer("smollm2-135m")


@pytest.fixture(scope="module")
def no_template(smollm2_tokenizer):
    tok = copy.deepcopy(smollm2_tokenizer)
    tok.chat_template = None
    return tok


# ------------------------------------------------------------------ the decision
@pytest.mark.parametrize(
    "setting, instruct, chat_bench, has_template, expected",
    [
        ("auto", True, True, True, True),  # the one case auto applies it
        ("auto", False, True, True, False),  # base model
        ("auto", True, False, True, False),  # code / completion benchmark
        ("auto", True, True, False, False),  # no template (Vicuna v1.3)
        ("auto", False, False, False, False),
        (True, False, False, True, True),  # forced
        (True, True, True, False, "error"),
        (False, True, True, True, False),  # raw, as in the paper
        (False, False, False, False, False),
    ],
)
def test_decision_table(
    smollm2_tokenizer, no_template, setting, instruct, chat_bench, has_template, expected
):
    tokenizer = smollm2_tokenizer if has_template else no_template
    kw = {"model": "m", "instruct": instruct, "bench": "b", "chat_bench": chat_bench, "tokenizer": tokenizer}
    if expected == "error":
        with pytest.raises(BenchmarkError) as err:
            decide_chat_template(setting, **kw)
        assert "bench.chat_template = true" in str(err.value) and "no chat template" in str(err.value)
        return
    applied, why = decide_chat_template(setting, **kw)
    assert applied is expected and why


def test_decision_rejects_other_values(smollm2_tokenizer):
    kw = {"model": "m", "instruct": True, "bench": "b", "chat_bench": True, "tokenizer": smollm2_tokenizer}
    for bad in ("yes", 1, None):
        with pytest.raises(BenchmarkError, match="bench.chat_template = .*auto, true, false"):
            decide_chat_template(bad, **kw)


def decision_for(overrides: list[str], tokenizer) -> bool | BaseFormat:
    """What run.py's job decides for a composed config (the tokenizer given)."""
    cfg = compose_config(overrides)
    spec = bench_spec(OmegaConf.to_container(cfg.bench))
    return decide_chat_template(
        cfg.bench.chat_template,
        model=cfg.model.name,
        instruct=bool(cfg.model.instruct),
        bench=spec.name,
        chat_bench=spec.chat,
        tokenizer=tokenizer,
        base_format=cfg.model.get("base_prompt_format"),
    )[0]


def test_decision_on_the_shipped_configs(smollm2_tokenizer, no_template):
    assert decision_for(["model=smollm2-135m", "bench=mtbench"], smollm2_tokenizer) is True
    assert decision_for(["model=smollm2-135m", "bench=alpaca"], smollm2_tokenizer) is True
    assert decision_for(["model=smollm2-135m", "bench=humaneval"], smollm2_tokenizer) is False
    assert decision_for(["model=smollm2-135m", "bench=gsm8k"], smollm2_tokenizer) is False
    gemma = base_prompt_form("instruction_response")  # a base model: its plain instruction format
    assert decision_for(["model=gemma3-270m", "bench=mtbench"], smollm2_tokenizer) == gemma
    assert decision_for(["model=gemma3-270m", "bench=humaneval"], smollm2_tokenizer) is False
    assert decision_for(["model=vicuna-7b", "bench=mtbench"], no_template) is False  # no template
    assert decision_for(["bench=mtbench", "bench.chat_template=false"], smollm2_tokenizer) is False
    assert decision_for(["bench=humaneval", "bench.chat_template=true"], smollm2_tokenizer) is True
    with pytest.raises(BenchmarkError, match="model=vicuna-7b has no chat template"):
        decision_for(["model=vicuna-7b", "bench=mtbench", "bench.chat_template=true"], no_template)


def test_instruct_flags_of_the_models():
    from goose.harness.models.load import ModelConfig

    default = ModelConfig.instruct  # a model YAML names only what differs from ModelConfig
    instruct = {
        p.stem: model_spec(p.stem).get("instruct", default) for p in (ROOT / "conf" / "model").glob("*.yaml")
    }
    assert instruct == {
        "smollm2-135m": True,
        "gemma3-270m": False,
        "vicuna-7b": True,
        "vicuna-13b": True,
        "vicuna-33b": True,
        "llama3-8b": True,
        "qwen3-8b": True,
    }


@pytest.mark.parametrize("preset", sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")))
def test_paper_presets_stay_raw(smollm2_tokenizer, preset):
    """Even an instruct model on MT-Bench gets raw prompts under every preset, as in the paper."""
    overrides = [f"+experiment={preset}", "model=smollm2-135m", "bench=mtbench"]
    assert compose_config(overrides).bench.chat_template is False
    assert decision_for(overrides, smollm2_tokenizer) is False


# ------------------------------------------------------------------ the token ids
def test_chat_ids_on_smollm2_have_one_bos(smollm2_tokenizer):
    tok = smollm2_tokenizer
    text = chat_text(tok, TEXT)
    assert text.endswith("<|im_start|>assistant\n") and f"<|im_start|>user\n{TEXT}<|im_end|>" in text
    ids = encode_prompt(tok, TEXT, chat_template=True)
    assert ids == tok(text, add_special_tokens=False).input_ids
    start = tok.convert_tokens_to_ids("<|im_start|>")
    assert ids[0] == start and ids[1] != start  # the template's own first token, once
    if tok.bos_token_id is not None:
        assert ids[:2].count(tok.bos_token_id) <= 1  # no BOS added on top of the template's
    raw = encode_prompt(tok, TEXT, chat_template=False)
    assert raw == tok(TEXT).input_ids and len(ids) > len(raw) + 5
    assert tok.decode(ids) == text


# ------------------------------------------------------------------ rows and keys
class ChatToyTokenizer:
    """Text "3 5 7" -> ids [3, 5, 7]; its chat template wraps a turn in the ids 1 2 ... 4."""

    chat_template = "toy"

    def __call__(self, text: str, add_special_tokens: bool = True) -> SimpleNamespace:
        return SimpleNamespace(input_ids=[int(t) for t in text.split()])

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        assert tokenize is False and add_generation_prompt is True
        return "1 2 " + messages[0]["content"] + " 4"


def run(tmp_path: Path, prompts, method: str, chat: bool | BaseFormat) -> list[dict]:
    make = PromptLookupDrafter if method == "pld" else ARDrafter
    cell = Cell("tiny", "toy", method, make().config(), 12, "float32", chat_template=chat)
    return run_cell(
        tiny_engine(), ChatToyTokenizer(), prompts, cell, make, tmp_path / "r.jsonl", log=lambda s: None
    )


def test_rows_carry_the_flag_and_templated_runs_never_reuse_raw_rows(tmp_path):
    prompts = toy_prompts(2)
    raw = run(tmp_path, prompts, "pld", chat=False)
    assert {r["chat_template"] for r in raw} == {False}
    chat = run(tmp_path, prompts, "pld", chat=True)
    assert {r["chat_template"] for r in chat} == {True}
    rows = read_rows(tmp_path / "r.jsonl")
    assert len(rows) == 8  # AR + PLD, raw and templated, for each of two prompts: nothing resumed
    by = {(r["method"], r["prompt_id"], r["chat_template"]): r for r in rows}
    for p in prompts:
        assert (
            by[("ar", p.prompt_id, True)]["prompt_tokens"]
            == by[("ar", p.prompt_id, False)]["prompt_tokens"] + 3
        )
        # each PLD row was checked against the AR reference of its own prompt form
        assert by[("pld", p.prompt_id, True)]["lossless"] is True
        assert by[("pld", p.prompt_id, False)]["lossless"] is True
    # both resume from their own rows
    assert run(tmp_path, prompts, "pld", chat=False) == raw
    assert run(tmp_path, prompts, "pld", chat=True) == chat
    assert len(read_rows(tmp_path / "r.jsonl")) == 8


def test_old_rows_without_the_field_read_as_raw(tmp_path):
    prompts = toy_prompts(1)
    rows = run(tmp_path, prompts, "ar", chat=False)
    # rows from before the field (and before schema versions: version 0, migrated on read)
    old = [{k: v for k, v in r.items() if k not in ("chat_template", "schema_version")} for r in rows]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    assert cell_key(old[0]) == cell_key(rows[0]) != cell_key({**rows[0], "chat_template": True})
    assert run(tmp_path, prompts, "ar", chat=False)[0]["timestamp"] == old[0]["timestamp"]  # resumed
    assert len(read_rows(tmp_path / "r.jsonl")) == 1
    run(tmp_path, prompts, "ar", chat=True)  # a templated run is a cell of its own
    assert len(read_rows(tmp_path / "r.jsonl")) == 2


# ------------------------------------------------------------------ a base model's plain instruction format
QA = BaseFormat("toy", "9 {prompt} 8")  # ChatToyTokenizer's ids: 9, the prompt's, 8


@pytest.mark.parametrize(
    "setting, instruct, chat_bench, expected",
    [
        ("auto", False, True, "format"),  # the one case: a base model on a chat benchmark
        ("auto", False, False, False),  # a completion benchmark stays raw
        ("auto", True, True, True),  # an instruct model gets its chat template, never the format
        (False, False, True, False),  # false: raw, as in the paper
        (True, False, True, True),  # true: the tokenizer's template, as before
    ],
)
def test_the_base_format_applies_to_a_base_model_on_a_chat_bench_under_auto_only(
    smollm2_tokenizer, setting, instruct, chat_bench, expected
):
    kw = {"model": "m", "instruct": instruct, "bench": "b", "chat_bench": chat_bench}
    form, why = decide_chat_template(
        setting, **kw, tokenizer=smollm2_tokenizer, base_format="instruction_response"
    )
    if expected == "format":
        assert form == BaseFormat("instruction_response", BASE_PROMPT_FORMATS["instruction_response"])
        assert "model.base_prompt_format=instruction_response" in why
    else:
        assert form is expected


def test_an_unknown_base_format_names_the_field_the_value_and_the_valid_ones(smollm2_tokenizer):
    message = (
        r"model.base_prompt_format = 'chatml': not a base prompt format; valid ones: instruction_response"
    )
    with pytest.raises(UserError, match=message):
        compose_config(["model=gemma3-270m", "model.base_prompt_format=chatml"])
    kw = {"model": "m", "instruct": False, "bench": "b", "chat_bench": True, "tokenizer": smollm2_tokenizer}
    with pytest.raises(BenchmarkError, match=message):
        decide_chat_template("auto", **kw, base_format="chatml")


def test_the_base_format_wraps_the_text_then_tokenizes_it_raw(smollm2_tokenizer):
    form = base_prompt_form("instruction_response")
    text = "Fill in {x} and {prompt} {"  # braces in a prompt stay as they are
    assert form.apply(text) == f"### Instruction:\n{text}\n\n### Response:\n"
    assert encode_prompt(smollm2_tokenizer, text, form) == smollm2_tokenizer(form.apply(text)).input_ids


def test_a_formatted_run_is_a_cell_of_its_own_checked_against_its_own_ar(tmp_path):
    prompts = toy_prompts(1)
    raw = run(tmp_path, prompts, "pld", chat=False)
    formatted = run(tmp_path, prompts, "pld", chat=QA)
    assert len(read_rows(tmp_path / "r.jsonl")) == 4  # AR + PLD of each form: nothing resumed across forms
    assert {(r["chat_template"], r["prompt_format"], r["chat_template_sha"]) for r in formatted} == {
        (False, "9 {prompt} 8", None)
    }
    assert {r["prompt_format"] for r in raw} == {None}
    by = {(r["method"], r["prompt_format"]): r for r in formatted + raw}
    assert by[("ar", QA.template)]["prompt_tokens"] == by[("ar", None)]["prompt_tokens"] + 2
    assert by[("pld", QA.template)]["lossless"] is True  # against the AR row of the formatted prompt
    assert cell_key(by[("pld", QA.template)]) != cell_key(by[("pld", None)])
    assert run(tmp_path, prompts, "pld", chat=QA) == formatted  # resumed from its own rows


@pytest.mark.needs_shared(SHARED_DATA / "spec_bench" / "question.jsonl")
def test_bench_chat_template_auto_puts_gemmas_spec_bench_prompts_in_its_format():
    """`experiments.bench --chat-template auto` on the base Gemma-3-270M: Spec-Bench's prompts in its
    model.base_prompt_format, tokenized raw (its tokenizer has no chat template); raw under false."""
    from experiments.bench.load import load_prompts

    tok = offline_tokenizer("gemma3-270m")
    auto = load_prompts(tok, "gemma3-270m", ["spec_bench"], 2, str(SHARED_DATA), "auto")
    raw = load_prompts(tok, "gemma3-270m", ["spec_bench"], 2, str(SHARED_DATA), "false")
    form = base_prompt_form(model_spec("gemma3-270m")["base_prompt_format"])
    assert [p.chat_template for p in auto] == [form, form] and [p.chat_template for p in raw] == [
        False,
        False,
    ]
    for a, r in zip(auto, raw, strict=True):
        assert a.ids == tok(form.apply(a.prompt.text)).input_ids and r.ids == tok(a.prompt.text).input_ids
