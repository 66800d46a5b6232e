"""Shared fixtures: offline environment, the real SmolLM2 model (loaded once per session)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def model_spec(name: str) -> dict:
    return yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())


@pytest.fixture(scope="session")
def smollm2():
    """(LoadedModel, VerificationEngine) for the real SmolLM2-135M-Instruct, fp32, CPU."""
    from goose.engine.verifier import VerificationEngine
    from goose.harness.models import load_model

    loaded = load_model(**model_spec("smollm2-135m"))
    return loaded, VerificationEngine(loaded.model, loaded.eos_token_ids, loaded.context_length)


def bench_prompts(name: str, limit: int):
    from goose.harness.benchmarks import load_benchmark

    data_file = None
    if name == "mbpp":
        data_file = SHARED_DATA / "mbpp" / "mbpp.jsonl"
    elif name == "classeval":
        data_file = SHARED_DATA / "classeval" / "ClassEval_data.json"
    if data_file is not None and not data_file.exists():
        pytest.skip(f"{data_file} not present")
    return load_benchmark(name, limit, data_file, source="file" if data_file else "local")
