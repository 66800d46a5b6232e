"""Chat templates (goose.harness.chat): the auto/true/false decision, the token ids on SmolLM2's real
tokenizer (no double BOS), the presets stay raw, and the flag in every row and in the row's key."""

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
from goose.harness.benchmarks import BenchmarkError, bench_spec
from goose.harness.chat import chat_text, decide_chat_template, encode_prompt
from goose.harness.compose import compose_config
from goose.harness.models import gguf_cache_dir, load_model, locate_gguf
from goose.harness.runner import Cell, run_cell
from goose.records.results import cell_key, read_rows
from tests.conftest import ROOT, model_spec
from tests.toy_harness import one_thread, tiny_engine, toy_prompts  # noqa: F401

TEXT = "Write a haiku about speculative decoding."


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    """SmolLM2-135M-Instruct's tokenizer, as `load_model` gives it: from the safetensors cache of
    the dequantised GGUF file when it is there (no weights loaded), else through load_model."""
    spec = model_spec("smollm2-135m")
    cached = gguf_cache_dir(spec["name"], locate_gguf(spec["gguf_package"], spec["gguf_file"]))
    if cached.is_dir():
        return AutoTokenizer.from_pretrained(cached)
    return load_model(**spec).tokenizer


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


def decision_for(overrides: list[str], tokenizer) -> bool:
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
    )[0]


def test_decision_on_the_shipped_configs(smollm2_tokenizer, no_template):
    assert decision_for(["model=smollm2-135m", "bench=mtbench"], smollm2_tokenizer) is True
    assert decision_for(["model=smollm2-135m", "bench=alpaca"], smollm2_tokenizer) is True
    assert decision_for(["model=smollm2-135m", "bench=humaneval"], smollm2_tokenizer) is False
    assert decision_for(["model=smollm2-135m", "bench=gsm8k"], smollm2_tokenizer) is False
    assert decision_for(["model=gemma3-270m", "bench=mtbench"], smollm2_tokenizer) is False  # base model
    assert decision_for(["model=vicuna-7b", "bench=mtbench"], no_template) is False  # no template
    assert decision_for(["bench=mtbench", "bench.chat_template=false"], smollm2_tokenizer) is False
    assert decision_for(["bench=humaneval", "bench.chat_template=true"], smollm2_tokenizer) is True
    with pytest.raises(BenchmarkError, match="model=vicuna-7b has no chat template"):
        decision_for(["model=vicuna-7b", "bench=mtbench", "bench.chat_template=true"], no_template)


def test_instruct_flags_of_the_models():
    from goose.harness.models import ModelConfig

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


def run(tmp_path: Path, prompts, method: str, chat: bool) -> list[dict]:
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
