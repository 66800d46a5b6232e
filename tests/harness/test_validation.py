"""Bad configuration fails before any model loads, naming the field, the value and what is allowed.

Three layers (goose.harness.config_schema): Hydra's structured-config schema at composition (unknown keys,
wrong types of the model/bench/top-level fields), `validate_config` in the job (ranges, keys
appended with `+`, the drafter's keys) and every drafter's constructor (goose.validation).
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

import goose.harness.job as job
from baselines.eagle2 import Eagle2Drafter
from baselines.iso_budget import IsotropicGooseBudgetDrafter
from baselines.isotropic import IsotropicDrafter
from baselines.pld import PromptLookupDrafter
from baselines.token_recycling import TokenRecyclingDrafter
from goose.harness import compose as harness_compose
from goose.harness.config_schema import GooseBenchConfig, validate_config
from goose.method.config import GooseConfig
from goose.method.drafter import GooseDrafter
from goose.validation import (
    check_bool,
    check_choice,
    check_float,
    check_float_list,
    check_hyperparameters,
    check_int,
    check_int_list,
)
from tests.conftest import ROOT


def compose_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return compose(config_name="config", overrides=["wandb=disabled", *overrides])


# ------------------------------------------------------------------ the helpers
def test_helpers_name_field_value_and_range():
    with pytest.raises(ValueError, match=r"^X.b = 1: must be an integer >= 2 \(why\)$"):
        check_int("X.b", 1, low=2, why="why")
    with pytest.raises(ValueError, match=r"X.b = True: must be an integer in \[0, 3\]"):
        check_int("X.b", True, 0, 3)  # a bool is not an integer
    with pytest.raises(ValueError, match=r"X.r = 1.5: must be a number in \[0.0, 1.0\]"):
        check_float("X.r", 1.5, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"X.m = 1.0: must be a number in \[0.0, 1.0\)"):
        check_float("X.m", 1.0, 0.0, 1.0, high_open=True)
    with pytest.raises(ValueError, match="must be a number"):
        check_float("X.r", float("nan"), 0.0, 1.0)
    with pytest.raises(ValueError, match="X.f = 'yes': must be true or false"):
        check_bool("X.f", "yes")
    with pytest.raises(ValueError, match="X.c = 'x': must be one of a, b"):
        check_choice("X.c", "x", ("a", "b"))
    with pytest.raises(ValueError, match="X.q = 1: must be one of auto, true, false"):
        check_choice("X.q", 1, ("auto", True, False))  # 1 == True, but not a bool
    with pytest.raises(
        ValueError, match="X.n = \\[3, 4\\]: must be a non-empty list of integers >= 1, distinct, longest"
    ):
        check_int_list("X.n", [3, 4], descending=True)
    with pytest.raises(ValueError, match="must be a list of integers"):
        check_int_list("X.n", "345")
    with pytest.raises(ValueError, match=r"must be 2 numbers in \[0.0, 1.0\], in nondecreasing order"):
        check_float_list("X.t", (0.4, 0.2), 0.0, 1.0, length=2, nondecreasing=True)
    assert check_int_list("X.n", [5, 4, 3], descending=True) == (5, 4, 3)
    with pytest.raises(KeyError):
        check_hyperparameters("X", nosuch=1)  # a typo in a constructor is a bug, not a user error


# ------------------------------------------------------------------ every drafter's constructor
@pytest.mark.parametrize(
    "make, field, value, allowed",
    [
        (PromptLookupDrafter, "num_draft", 0, ">= 1"),
        (PromptLookupDrafter, "num_draft", "10", ">= 1"),
        (PromptLookupDrafter, "ngram_sizes", [3, 0], "integers >= 1"),
        (PromptLookupDrafter, "ngram_sizes", [], "non-empty"),
        (TokenRecyclingDrafter, "k", 0, ">= 1"),
        (TokenRecyclingDrafter, "k", 4, "> 7, the largest rank the template uses"),
        (partial(IsotropicDrafter, branching=3), "budget", 1, ">= 2"),
        (partial(IsotropicDrafter, branching=3), "max_depth", 0, ">= 1"),
        (partial(IsotropicDrafter, branching=3), "k", 0, ">= 1"),
        (partial(IsotropicDrafter, branching=3), "min_score", 1.0, "[0.0, 1.0)"),
        (partial(IsotropicDrafter, branching=3), "use_bigram", "no", "true or false"),
        (IsotropicDrafter, "branching", 0, ">= 1"),
        (partial(IsotropicGooseBudgetDrafter, branching=5), "max_extended_chain", 10, ">= 20"),
        (partial(IsotropicGooseBudgetDrafter, branching=5), "long_match", 0, ">= 1"),
        (partial(IsotropicGooseBudgetDrafter, branching=5), "ngram_lengths", [3, 4], "longest first"),
        (Eagle2Drafter, "budget", 1, ">= 2"),
        (Eagle2Drafter, "budget", "abc", ">= 2"),
        (Eagle2Drafter, "topk", 0, ">= 1"),
        (Eagle2Drafter, "max_depth", -1, ">= 1"),
        (Eagle2Drafter, "min_score", -0.1, "[0.0, 1.0)"),
        (GooseDrafter, "budget", 1, ">= 2"),
        (GooseDrafter, "max_depth", 0, ">= 1"),
        (GooseDrafter, "k", 0, ">= 1"),
        (GooseDrafter, "rho", 1.5, "[0.0, 1.0]"),
        (GooseDrafter, "rho", -0.5, "[0.0, 1.0]"),
        (GooseDrafter, "budget", "abc", ">= 2"),
        (GooseDrafter, "max_extended_chain", 5, ">= 20"),
    ],
)
def test_constructor_rejects_out_of_range(make, field, value, allowed):
    with pytest.raises(ValueError) as err:
        make(**{field: value})
    msg = str(err.value)
    assert f".{field} = {value!r}" in msg and allowed in msg, msg


def test_goose_config_keeps_its_checks_and_types():
    cfg = GooseConfig(ngram_lengths=[4, 3], spine_ratio_tiers=[0.1, 0.2, 0.3])
    assert cfg.ngram_lengths == (4, 3) and cfg.spine_ratio_tiers == (0.1, 0.2, 0.3)
    hash(cfg)  # tuples, so still hashable


def test_drafter_configs_are_unchanged_by_validation():
    """Validation must not change what a drafter logs (config_hash identifies result cells)."""
    assert PromptLookupDrafter().config() == {"ngram_sizes": [3, 2, 1], "num_draft": 10}
    assert TokenRecyclingDrafter().config()["k"] == 8
    assert (
        Eagle2Drafter().config()["budget"] == 60 and IsotropicDrafter(branching=5).config()["branching"] == 5
    )


# ------------------------------------------------------------------ the job's hook, in process
@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["method.drafter.rho=1.5"], ["GooseConfig.rho = 1.5", "[0.0, 1.0]"]),
        (
            ["+method.drafter.nosuch=1"],
            ["method.drafter.nosuch = 1", "not a hyperparameter of GooseDrafter", "rho"],
        ),
        (["method=eagle2", "+method.drafter.rho=0.5"], ["method.drafter.rho", "Eagle2Drafter", "topk"]),
        (["method.drafter.budget=abc"], ["GooseConfig.budget = 'abc'", "integer >= 2"]),
        (["method=eagle2", "method.drafter.budget=1"], ["Eagle2Drafter.budget = 1", ">= 2"]),
        (["method=iso3", "method.drafter.max_depth=0"], ["IsotropicDrafter.max_depth = 0", ">= 1"]),
        (["method=tr", "method.drafter.k=0"], ["TokenRecyclingDrafter.k = 0", ">= 1"]),
        (["method=pld", "method.drafter.num_draft=0"], ["PromptLookupDrafter.num_draft = 0", ">= 1"]),
        (["method=pld", "method.drafter.ngram_sizes=[3,0]"], ["PromptLookupDrafter.ngram_sizes", ">= 1"]),
        (["method.drafter.k=0"], ["GooseConfig.k = 0", ">= 1"]),
        (["method.drafter.max_depth=0"], ["GooseConfig.max_depth = 0", ">= 1"]),
        (["bench.limit=-1"], ["bench.limit = -1", ">= 1"]),
        (["max_new_tokens=-5"], ["max_new_tokens = -5", ">= 0"]),
        (["bench.max_new_tokens=-1"], ["bench.max_new_tokens = -1", ">= 0"]),
        (["threads=0"], ["threads = 0", ">= 1"]),
        (["quick=maybe"], ["quick = 'maybe'", "auto, true, false"]),
        (["prepack=maybe"], ["prepack = 'maybe'", "auto, true, false"]),
        (["compile=maybe"], ["compile = 'maybe'", "true or false"]),
        (["cuda_graphs=maybe"], ["cuda_graphs = 'maybe'", "true or false"]),
        (["budget_in_run_cost=maybe"], ["budget_in_run_cost = 'maybe'", "true or false"]),
        (["wandb=sometimes"], ["wandb = 'sometimes'", "online, offline, disabled"]),
        (["budget=sometimes"], ["budget = 'sometimes'", "fixed, auto"]),
        (["batch_state=global", "concurrency=2"], ["batch_state = 'global'", "isolated, shared"]),
        (["batch_state=shared"], ["batch_state = 'shared' needs concurrency > 1"]),
        (["method=hw_tree", "batch_state=shared", "concurrency=2"], ["hw_tree", "cannot share"]),
        (["model.dtype=float64"], ["model.dtype = 'float64'", "float32, float16, bfloat16"]),
        (["model.init=zeros"], ["model.init = 'zeros'", "pretrained, random"]),
        (["model.attn_implementation=flash_attention_2"], ["model.attn_implementation", "sdpa, eager"]),
        (["bench.source=web"], ["bench.source = 'web'", "auto, hub, local, file"]),
        (["sampling.temperature=-0.5"], ["sampling.temperature = -0.5", ">= 0.0"]),
        (["sampling.temperature=0.7", "sampling.top_p=0"], ["sampling.top_p = 0", "(0, 1]"]),
        (["sampling.top_p=1.5"], ["sampling.top_p = 1.5", "[0.0, 1.0]"]),
        (["sampling.top_k=-1"], ["sampling.top_k = -1", ">= 0"]),
        (["sampling.num_samples=0"], ["sampling.num_samples = 0", ">= 1"]),
        (["+sampling.temprature=1"], ["sampling.temprature = 1", "unknown key", "temperature"]),
        (["+bench.nosuch=1"], ["bench.nosuch = 1", "unknown key", "limit"]),
        (["+nosuch=1"], ["nosuch = 1", "unknown key", "max_new_tokens"]),
        (
            ["method.drafter._target_=nosuch.Nope"],
            ["method.drafter._target_ = 'nosuch.Nope'", "cannot be imported"],
        ),
    ],
)
def test_run_job_refuses_before_loading_anything(monkeypatch, overrides, expected):
    def must_not_load(*args, **kwargs):
        raise AssertionError("a model or benchmark was loaded for an invalid config")

    monkeypatch.setattr(job, "engine_for", must_not_load)
    monkeypatch.setattr(harness_compose, "load_model", must_not_load)
    monkeypatch.setattr(harness_compose, "load_benchmark", must_not_load)
    cfg = compose_cfg(*overrides)
    with pytest.raises(harness_compose.UserError) as err:
        job.run_job(cfg)
    msg = str(err.value)
    for part in expected:
        assert part in msg, msg


@pytest.mark.parametrize(
    "override, expected",
    [
        ("bench.limit=abc", ["'abc'", "bench.limit", "Integer"]),
        ("max_new_tokens=1.5", ["1.5", "max_new_tokens"]),
        ("bench.nosuch=1", ["nosuch", "BenchSchema"]),
        ("model.nosuch=1", ["nosuch", "ModelSchema"]),
        ("model.quick_limit=ten", ["'ten'", "model.quick_limit"]),
        ("sampling.temperature=hot", ["'hot'", "sampling.temperature"]),
        ("sampling.temprature=1", ["temprature", "SamplingSchema"]),
    ],
)
def test_schema_refuses_at_composition(override, expected):
    with pytest.raises((HydraException, OmegaConfBaseException)) as err:
        compose_cfg(override)
    msg = str(err.value) + str(err.value.__cause__ or "")
    for part in expected:
        assert part in msg, msg


def test_every_shipped_config_is_valid():
    for group in ("model", "bench", "method"):
        for path in sorted((ROOT / "conf" / group).glob("*.yaml")):
            validate_config(compose_cfg(f"{group}={path.stem}"))


def test_validate_config_without_the_compose_time_schema():
    """A config composed without the schema (e.g. an older process) is still checked in the job."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(compose_cfg(), resolve=True)
    cfg["bench"]["limit"] = "abc"
    with pytest.raises(ValueError, match=r"bench.limit = 'abc': must be an integer >= 1"):
        validate_config(cfg)
    cfg["bench"]["limit"] = None
    del cfg["model"]["name"]
    with pytest.raises(ValueError, match="model.name is missing"):
        validate_config(cfg)
    assert "quick" in GooseBenchConfig.__dataclass_fields__


def test_bench_settings_are_checked_in_one_place():
    """The bench node's schema carries types only; its values are checked by BenchmarkSpec.from_config."""
    import dataclasses

    from goose.harness.config_schema import BenchSchema

    assert not any("check" in f.metadata for f in dataclasses.fields(BenchSchema))
    assert "check" in GooseBenchConfig.__dataclass_fields__["bench"].metadata


# ------------------------------------------------------------------ run.py, end to end
CLI_CASES = [
    # (args, exit status, substrings of stderr); test_cli.py covers rho=1.5 and bench.limit=-1
    (["+method.drafter.nosuch=1"], 2, ["method.drafter.nosuch = 1", "not a hyperparameter"]),
    (["method.drafter.budget=abc"], 2, ["GooseConfig.budget = 'abc'", "integer >= 2"]),
    (["+bench.nosuch=1"], 2, ["bench.nosuch = 1", "unknown key"]),
    # refused by Hydra at composition: Hydra's own exit status (1) and message
    (["bench.limit=abc"], 1, ["bench.limit", "'abc'"]),
]


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """Run every CLI case at once (they are independent processes)."""

    tmp = tmp_path_factory.mktemp("cli")

    def run(args):
        t0 = time.perf_counter()
        run_dir = tmp / str(abs(hash(tuple(args))))
        proc = subprocess.run(
            [sys.executable, "run.py", "wandb=disabled", f"hydra.run.dir={run_dir}", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return proc, time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(
            zip([tuple(a) for a, _, _ in CLI_CASES], pool.map(run, [a for a, _, _ in CLI_CASES]), strict=True)
        )


@pytest.mark.parametrize("args, status, expected", CLI_CASES, ids=[" ".join(a) for a, _, _ in CLI_CASES])
def test_run_py_exits_with_a_paragraph(cli_results, args, status, expected):
    proc, elapsed = cli_results[tuple(args)]
    assert proc.returncode == status, proc.stderr[-2000:]
    for part in expected:
        assert part in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "goose-bench: model=" not in proc.stdout  # printed once the model is loaded
    assert elapsed < 90, f"took {elapsed:.0f} s: did it load a model?"
