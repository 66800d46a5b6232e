"""Shared fixtures: offline environment, the real SmolLM2 model (loaded once per session), and the
rule for tests that read ../shared: where it is missing they skip with the path as the reason, except
under GOOSE_REQUIRE_SHARED=1 (set by .ci/run), where they fail, so that a checkout without it cannot
pass them without running them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"
REQUIRE_SHARED_ENV = "GOOSE_REQUIRE_SHARED"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def shared_required() -> bool:
    """True where a missing ../shared must fail the tests that read it (GOOSE_REQUIRE_SHARED=1: CI)."""
    return os.environ.get(REQUIRE_SHARED_ENV, "").strip().lower() not in ("", "0", "false", "no")


def require_shared(path: Path, what: str = "") -> Path:
    """`path` (under ../shared) if it exists; else skip, or fail where `shared_required()`."""
    path = Path(path)
    if path.exists():
        return path
    message = f"{path} is missing{f' ({what})' if what else ''}"
    if shared_required():
        pytest.fail(
            f"{message}; {REQUIRE_SHARED_ENV}=1 (CI) needs ../shared beside the checkout", pytrace=False
        )
    pytest.skip(f"{message}; set {REQUIRE_SHARED_ENV}=1 to fail instead of skipping")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "needs_shared(*paths): the test reads these paths under ../shared; skipped where one is missing, "
        f"failed instead under {REQUIRE_SHARED_ENV}=1",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """`needs_shared` paths are checked before the test's fixtures load (they may load a model): a missing
    one skips the test, or fails its setup under GOOSE_REQUIRE_SHARED=1."""
    for marker in item.iter_markers("needs_shared"):
        for path in marker.args:
            require_shared(path)


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
    from goose.engine.forward.choose import verification_engine
    from goose.harness.models.load import load_model

    loaded = load_model(**model_spec("smollm2-135m"))
    return loaded, verification_engine(loaded.model, loaded.eos_token_ids, loaded.context_length)


def bench_prompts(name: str, limit: int):
    """The first `limit` prompts of conf/bench/<name>.yaml: from its package, else from ../shared/data."""
    from goose.harness.benchmarks.load import load_benchmark
    from goose.harness.benchmarks.sources import file_in_data_dir
    from goose.harness.benchmarks.spec import bench_spec

    spec = bench_spec(name)
    data_file = file_in_data_dir(spec, SHARED_DATA)
    if spec.package is None and data_file is None:
        require_shared(SHARED_DATA / (spec.data_dir_path or name), f"benchmark {name}")
    return load_benchmark(spec, limit, data_file, source="file" if data_file else "local")


def method_config(name: str):
    """conf/method/<name>.yaml as Hydra composes it (ablations and iso5 extend another file
    through their defaults list, so a plain YAML load would miss most fields)."""
    from goose.harness.compose import compose_config

    return compose_config([f"method={name}"], validate=False).method


@pytest.fixture(scope="session", autouse=True)
def structured_configs() -> None:
    """Hydra's structured configs (conf/method/*.yaml extend `drafter/<Class>`) registered once, as run.py's
    import of goose.harness.config_schema registers them, so that a test file composing conf/ directly
    passes on its own, not only after another file imported the schema."""
    import goose.harness.config_schema  # noqa: F401  (registers on import)
