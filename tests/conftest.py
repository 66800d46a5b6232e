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


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default="cpu",
        help="torch device of the device tests (tests/engine/test_devices.py, test_device_map.py); "
        "`make gpu-check` runs them with --device cuda",
    )


@pytest.fixture(scope="session")
def test_device(request) -> str:
    """The device named by --device; a device this machine lacks fails the run (it was asked for)."""
    import torch

    device = request.config.getoption("--device")
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        pytest.fail(f"--device {device}: torch sees no CUDA device on this machine")
    return device


def model_spec(name: str) -> dict:
    return yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())


@pytest.fixture(scope="session")
def smollm2():
    """(LoadedModel, VerificationEngine) for the real SmolLM2-135M-Instruct, fp32, CPU."""
    from goose.engine.core.verifier import VerificationEngine
    from goose.harness.models import load_model

    loaded = load_model(**model_spec("smollm2-135m"))
    return loaded, VerificationEngine(loaded.model, loaded.eos_token_ids, loaded.context_length)


def bench_prompts(name: str, limit: int):
    """The first `limit` prompts of conf/bench/<name>.yaml: from its package, else from ../shared/data."""
    from goose.harness.benchmarks import bench_spec, file_in_data_dir, load_benchmark

    spec = bench_spec(name)
    data_file = file_in_data_dir(spec, SHARED_DATA)
    if spec.package is None and data_file is None:
        pytest.skip(f"{SHARED_DATA / (spec.data_dir_path or name)} not present")
    return load_benchmark(spec, limit, data_file, source="file" if data_file else "local")


def method_config(name: str):
    """conf/method/<name>.yaml as Hydra composes it (ablations and iso5 extend another file
    through their defaults list, so a plain YAML load would miss most fields)."""
    from goose.harness.compose import compose_config

    return compose_config([f"method={name}"], validate=False).method
