"""End to end on the real SmolLM2-135M (fp32): every method's output is token-identical to AR.

The non-slow tests are CI's real-model smoke test; the slow ones cover more prompts and methods.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sampling import SamplingParams
from tests.conftest import ROOT, bench_prompts

TREE_METHODS = ("tr", "iso3", "iso5", "eagle2", "goose")


def drafter(method: str):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=[f"method={method}"])
    return instantiate(cfg.method.drafter, _convert_="all")


def assert_lossless(
    smollm2, method: str, bench: str, limit: int, max_new: int, sampling: SamplingParams | None = None
) -> list[float]:
    """Every prompt's output equals AR's (at temperature > 0: AR's sample with the same seed)."""
    loaded, engine = smollm2
    taus = []
    d = drafter(method)  # one drafter across prompts, as in a run (TR's table persists)
    for i, p in enumerate(bench_prompts(bench, limit)):
        ids = loaded.tokenizer(p.text).input_ids
        ref = generate(engine, ARDrafter(), ids, max_new, sampling=sampling, seed=i)
        got = generate(engine, d, ids, max_new, sampling=sampling, seed=i)
        assert got.output_ids == ref.output_ids, f"{method} differs from AR on {bench} {p.prompt_id}"
        assert got.forward_calls <= ref.forward_calls
        taus.append(got.tau)
    return taus


@pytest.mark.parametrize("bench", ["humaneval", "gsm8k", "mtbench"])
def test_pld_identical_to_ar_smoke(smollm2, bench):
    taus = assert_lossless(smollm2, "pld", bench, limit=2, max_new=32)
    assert all(t >= 1.0 for t in taus)


def test_goose_identical_to_ar_smoke(smollm2):
    taus = assert_lossless(smollm2, "goose", "humaneval", limit=2, max_new=48)
    assert max(taus) > 1.0  # the drafts are accepted at least sometimes


def test_goose_sampling_identical_to_ar_sampling_smoke(smollm2):
    """T = 0.7: sample-and-match commits AR's sample with the same seed, in fp32 token for token."""
    taus = assert_lossless(smollm2, "goose", "humaneval", limit=2, max_new=48, sampling=SamplingParams(0.7))
    assert max(taus) > 1.0


@pytest.mark.slow
@pytest.mark.parametrize("method", ("pld", *TREE_METHODS))
@pytest.mark.parametrize("bench", ["humaneval", "gsm8k", "mtbench", "mbpp"])
def test_methods_identical_to_ar(smollm2, method, bench):
    assert_lossless(smollm2, method, bench, limit=4, max_new=96)


@pytest.mark.slow
@pytest.mark.parametrize("method", ("pld", *TREE_METHODS))
@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_methods_identical_to_ar_sampling(smollm2, method, temperature):
    """Deterministic drafts at T > 0: AR's sample token for token. (STAND samples its drafts: it
    is exact in distribution, tests/engine/test_sampling_exactness.py, and identical at T = 0.)"""
    assert_lossless(smollm2, method, "humaneval", limit=3, max_new=64, sampling=SamplingParams(temperature))


@pytest.mark.slow
def test_stand_greedy_identical_to_ar(smollm2):
    assert_lossless(smollm2, "stand", "gsm8k", limit=3, max_new=96)


def test_run_py_writes_rows_with_every_field(tmp_path):
    cmd = [
        sys.executable,
        "run.py",
        "method=pld",
        "bench=humaneval",
        "bench.limit=2",
        "max_new_tokens=16",
        f"out_dir={tmp_path}",
        "wandb=disabled",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "speedup" in proc.stdout and "lossless" in proc.stdout
    rows = [json.loads(x) for x in (tmp_path / "smollm2-135m" / "humaneval.jsonl").read_text().splitlines()]
    assert sorted(r["method"] for r in rows) == [
        "ar",
        "ar",
        "pld_auto",
        "pld_auto",
    ]  # budget=auto: the default
    required = (
        "model bench method method_config prompt_id generated_tokens forward_calls tau wall_time_s "
        "tokens_per_s offered accepted lossless hardware dtype versions git_commit output_ids"
    ).split()
    for r in rows:
        missing = [k for k in required if k not in r]
        assert not missing, missing
        assert r["lossless"] is True and r["tau"] == r["generated_tokens"] / r["forward_calls"]
    # resume: the same command again runs nothing new
    proc2 = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc2.returncode == 0
    assert len((tmp_path / "smollm2-135m" / "humaneval.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow
def test_bench_samples_side_by_side_and_reports_the_floor(tmp_path):
    """`make bench` at T = 0.7: engine contenders sample with per-prompt seeds, a deterministic
    drafter reproduces engine:ar's sample, and each step is reported against its hardware floor."""
    from experiments.bench import driver

    record = driver.main(
        ["--benches", "humaneval", "--limit", "1", "--max-new-tokens", "24", "--repeats", "1"]
        + ["--methods", "pld", "--hf", "greedy", "--temperature", "0.7", "--threads", "1"]
        + ["--out", str(tmp_path / "bench")]
    )
    summary = record["summary"]
    assert summary["identical_to_engine_ar"]["engine:pld"]["identical"] == 1
    assert "hf:sample" in summary["tokens_per_s"]
    floor = summary["hardware_floor"]
    assert floor["floor"]["bandwidth_gb_s"] > 0
    assert floor["contenders"]["engine:ar"]["times_floor"] > 0.5


SHIPPED = ROOT / "results" / "reference" / "smollm2-135m"
GREEDY_METHODS = ("ar", "pld", "tr", "iso3", "iso5", "eagle2", "goose", "opt_tree", "suffix", "sam")


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["humaneval", "gsm8k"])
def test_greedy_runs_reproduce_the_shipped_rows(smollm2, bench):
    """Temperature 0 is the original code path: today's code gives the shipped reference rows'
    outputs and forward calls (raw prompts, fp32, 128 tokens, fixed B; the first prompt, which
    every run starts from an empty run-long table)."""
    from goose.records.results import config_hash, read_rows

    loaded, engine = smollm2
    shipped = {}
    for r in read_rows(SHIPPED / f"{bench}.jsonl"):
        plain = not r.get("chat_template") and not r.get("temperature") and r.get("status") == "ok"
        if plain and r["max_new_tokens"] == 128 and r["method"] in GREEDY_METHODS:
            shipped.setdefault((r["method"], r["config_hash"], r["prompt_id"]), r)
    for method in GREEDY_METHODS:
        d = drafter(method)
        h = config_hash(d.config())
        for p in bench_prompts(bench, 1):
            row = shipped.get((method, h, p.prompt_id))
            if row is None:
                pytest.fail(f"no shipped {method} row for {bench} {p.prompt_id} (config {h})")
            got = generate(engine, d, loaded.tokenizer(p.text).input_ids, 128)
            assert got.output_ids == row["output_ids"], (method, p.prompt_id)
            assert got.forward_calls == row["forward_calls"], (method, p.prompt_id)
