"""Model loading: fast offline failure for Hub models, the two offline GGUF models, the safetensors cache."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
import torch
from huggingface_hub import try_to_load_from_cache
from omegaconf import OmegaConf

from goose.harness.models import hub as model_hub
from goose.harness.models.devices import ModelUnavailableError, parse_dtype, resolve_device
from goose.harness.models.gguf import gguf_cache_dir, locate_gguf
from goose.harness.models.load import ModelConfig, load_model

CONF = Path(__file__).resolve().parents[2] / "conf" / "model"


def model_cfg(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))


def test_every_model_config_has_the_fields() -> None:
    for path in CONF.glob("*.yaml"):
        cfg = ModelConfig(**model_cfg(path.stem))
        assert cfg.name == path.stem
        parse_dtype(cfg.dtype)


def test_unknown_dtype_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="float16.*bfloat16"):
        parse_dtype("fp8")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        resolve_device("cuda", "vicuna-7b")


@pytest.mark.parametrize("how", ["env", "no_network"])
def test_hub_model_offline_fails_fast(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = model_cfg("vicuna-7b")
    if isinstance(try_to_load_from_cache(cfg["hf_id"], "config.json"), str):
        pytest.skip("vicuna-7b is in the local HF cache")
    if how == "env":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setattr(model_hub.hf_constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(model_hub, "hub_reachable", lambda *a, **k: False)
    start = time.perf_counter()
    with pytest.raises(ModelUnavailableError) as info:
        load_model(**cfg)
    assert time.perf_counter() - start < 10
    msg = str(info.value)
    assert "lmsys/vicuna-7b-v1.3" in msg and "model=smollm2-135m" in msg and "model=gemma3-270m" in msg


def test_hub_reachable_times_out_quickly() -> None:
    start = time.perf_counter()
    assert not model_hub.hub_reachable("https://10.255.255.1", timeout=0.5)  # not the Hub (or no route)
    assert time.perf_counter() - start < 5


def test_smollm2_loads() -> None:
    cfg = model_cfg("smollm2-135m")
    lm = load_model(**cfg)  # ~15 s the first time, < 1 s from the cache
    assert lm.tokenizer.eos_token_id is not None and lm.tokenizer.eos_token_id == lm.eos_token_ids[0]
    assert lm.model.config.vocab_size == 49152 and len(lm.tokenizer) == 49152
    assert lm.dtype == torch.float32 and lm.device == torch.device("cpu")
    assert lm.context_length == 8192
    assert not lm.model.training and not any(p.requires_grad for p in lm.model.parameters())
    assert gguf_cache_dir(cfg["name"], locate_gguf(cfg["gguf_package"], cfg["gguf_file"])).is_dir()


@pytest.mark.slow
def test_gemma3_loads_with_sliding_window() -> None:
    lm = load_model(**model_cfg("gemma3-270m"))  # ~45 s the first time, ~3 s from the cache
    config = lm.model.config
    assert config.sliding_window == 512
    assert set(config.layer_types) == {"sliding_attention", "full_attention"}
    assert lm.eos_token_ids[0] == lm.tokenizer.eos_token_id == 1
    assert lm.context_length == 32768


@pytest.mark.slow
def test_cached_load_matches_gguf_load() -> None:
    cfg = model_cfg("smollm2-135m")
    fresh, cached = load_model(**cfg, cache=False), load_model(**cfg)
    ids = fresh.tokenizer("The capital of France is", return_tensors="pt").input_ids
    assert torch.equal(ids, cached.tokenizer("The capital of France is", return_tensors="pt").input_ids)
    with torch.no_grad():
        assert torch.equal(fresh.model(ids).logits, cached.model(ids).logits)


def test_goose_gguf_dir_is_looked_at_first_and_ignored_when_it_lacks_the_file(tmp_path, monkeypatch):
    """An offline box without the asset packages points GOOSE_GGUF_DIR at a folder of GGUF files."""
    (tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("GOOSE_GGUF_DIR", str(tmp_path))
    assert locate_gguf("no_such_package", "SmolLM2-135M-Instruct.Q4_1.gguf") == (
        tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    with pytest.raises(ModelUnavailableError, match="'no_such_package' is not installed"):
        locate_gguf("no_such_package", "other.gguf")


def test_every_model_file_lists_only_what_differs_from_model_config() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    for path in sorted(CONF.glob("*.yaml")):
        raw = OmegaConf.to_container(OmegaConf.load(path))
        assert set(raw) <= set(defaults), path.name
        assert not [k for k, v in raw.items() if v == defaults[k]], path.name  # no default restated
