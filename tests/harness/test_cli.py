"""User errors from the command line: one clear paragraph, non-zero exit, no traceback wall."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture
def run(tmp_path):
    """`run.py` with the given overrides, its Hydra run directory (and, unless given, `out_dir`)
    under tmp_path, so that no test writes into the checkout."""

    def call(*args: str) -> subprocess.CompletedProcess:
        defaults = [f"hydra.run.dir={tmp_path / 'hydra'}"]
        if not any(a.startswith("out_dir=") for a in args):
            defaults.append(f"out_dir={tmp_path / 'results'}")
        return subprocess.run(
            [sys.executable, "run.py", "wandb=disabled", *defaults, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return call


@pytest.mark.parametrize(
    "arg,group,some_valid",
    [
        ("method=nosuch", "method", ["goose", "pld", "tr", "eagle2"]),
        ("bench=nosuch", "bench", ["mtbench", "gsm8k"]),
    ],
)
def test_unknown_name_lists_valid_ones(arg, group, some_valid, run):
    proc = run(arg)
    assert proc.returncode != 0
    err = proc.stderr + proc.stdout
    assert f"Could not find '{group}/nosuch'" in err
    for name in some_valid:
        assert name in err
    assert "Traceback" not in err


def test_unreachable_hub_model_fails_fast_with_a_paragraph(run):
    proc = run("model=vicuna-7b", "bench=mtbench", "method=ar")
    assert proc.returncode == 2
    assert "lmsys/vicuna-7b-v1.3" in proc.stderr and "model=smollm2-135m" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_hyperparameter_is_named(run):
    proc = run("method=goose", "method.drafter.rho=1.5")
    assert proc.returncode == 2
    assert "rho" in proc.stderr and "1.5" in proc.stderr and "Traceback" not in proc.stderr


def test_negative_limit_rejected(run):
    proc = run("bench.limit=-1")
    assert proc.returncode == 2 and "bench.limit" in proc.stderr


def _lacks(device: str) -> bool:
    """True if this machine has no `device` (what the device check below needs)."""
    import torch

    if device == "mps":
        return not torch.backends.mps.is_available()
    index = int(device.partition(":")[2] or 0)
    return not torch.cuda.is_available() or torch.cuda.device_count() <= index


@pytest.mark.parametrize("device", ["cuda", "cuda:7", "mps"])
def test_missing_device_is_named_before_the_model_loads(device, run):
    """model.device naming hardware this machine lacks: one paragraph naming the field, the value,
    the devices here and the fix, exit 2, and no model loaded."""
    if not _lacks(device):
        pytest.skip(f"this machine has {device}")
    proc = run(f"model.device={device}", "method=ar", "bench.limit=1", "max_new_tokens=4")
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr
    assert f"model.device = '{device}'" in err and "the devices here are: cpu" in err
    assert "model.device=cpu" in err and "Traceback" not in err
    assert "loaded model" not in proc.stdout + err  # failed before the weights were read


def test_device_that_is_no_torch_device(run):
    proc = run("model.device=gpu", "method=ar", "bench.limit=1")
    assert proc.returncode == 2
    assert "model.device = 'gpu'" in proc.stderr and "not a torch device" in proc.stderr
    assert "model.device=cpu" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_budget_profile_fails_before_the_model_loads(run):
    proc = run("budget=auto", "budget_profile=/nonexistent/cost_curve.json", "bench.limit=1")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "budget_profile = '/nonexistent/cost_curve.json': no such file" in proc.stderr
    assert "make cost-curve" in proc.stderr and "Traceback" not in proc.stderr
    assert "loaded model" not in proc.stdout + proc.stderr


def test_budget_profile_makes_auto_runs_reproducible(tmp_path, run):
    """Two budget=auto runs with one saved latency table draft the same trees (same tokens,
    forward calls and tree sizes), and every auto row records the table it used: with the gate and the
    bookkeeping price off, which act on measured seconds (docs/performance.md)."""
    import json

    from goose.engine.budget.cost_model import LatencyTable

    profile = tmp_path / "profile.json"
    LatencyTable(sizes=[1, 2, 8, 32, 128], seconds=[0.02, 0.03, 0.032, 0.045, 0.12]).save(profile)
    rows = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        proc = run(
            "method=goose",
            "budget=auto",
            f"budget_profile={profile}",
            "budget_gate=false",
            "budget_price_bookkeeping=false",
            "bench.limit=2",
            "max_new_tokens=24",
            f"out_dir={out}",
            "threads=1",
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = (out / "smollm2-135m" / "humaneval.jsonl").read_text().splitlines()
        rows.append([json.loads(x) for x in lines if json.loads(x)["method"] == "goose_auto"])
    first, second = rows
    assert len(first) == 2
    assert [(r["output_ids"], r["forward_calls"], r["step_tree_size"]) for r in first] == [
        (r["output_ids"], r["forward_calls"], r["step_tree_size"]) for r in second
    ]
    assert first[0]["budget_latency"] == {
        "source": str(profile),
        "sizes": [1, 2, 8, 32, 128],
        "seconds": [0.02, 0.03, 0.032, 0.045, 0.12],
    }


def test_a_results_file_of_other_code_is_refused_with_a_paragraph_and_left_as_it_was(tmp_path, run):
    """run.py on a results file that another code state wrote: exit 2, the runner's MixedCodeError as one
    paragraph, no traceback, no row added."""
    from goose.records.results import append_row, read_rows

    rows = tmp_path / "results" / "smollm2-135m" / "humaneval.jsonl"
    append_row(rows, {"method": "ar", "prompt_id": "x", "status": "ok", "code_state": "0123456789ab"})
    proc = run("method=pld", "budget=fixed", "bench.limit=1", "max_new_tokens=4")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "holds rows of another code state: 0123456789ab (1 rows)" in proc.stderr
    assert "allow_mixed_code=true" in proc.stderr and "Traceback" not in proc.stderr
    assert len(read_rows(rows)) == 1
