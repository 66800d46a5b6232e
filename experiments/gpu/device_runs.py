"""The stages of `make gpu-check` that run other commands on the device, each in a subprocess: the device
tests (pytest on tests/engine/test_devices.py and test_device_map.py) and the used-by command (`run.py`
with random weights of a paper model's shape and a stand-in tokenizer)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from experiments.gpu.profile import ROOT, Profile, relative
from goose.records.results import read_rows as read_result_rows
from goose.records.seal import copy_results_file, results_files


def stage_tests(profile: Profile, work: Path) -> dict[str, Any]:
    """The device tests through pytest in a subprocess; counts and failed test ids from its JUnit XML."""
    junit = work / "device_tests.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/engine/test_devices.py",
        "tests/engine/test_device_map.py",
        "--device",
        profile.device,
        f"--junitxml={junit}",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed: list[str] = []
    if junit.is_file():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, 0))
            for case in suite.iter("testcase"):
                bad = next((x for x in (case.find("failure"), case.find("error")) if x is not None), None)
                if bad is not None:
                    message = (bad.get("message") or "").splitlines()[:1]
                    failed.append(f"{case.get('name')}: {message[0] if message else ''}"[:300])
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {
        "device": profile.device,
        "command": " ".join(["python", *cmd[1:-1]]),
        "returncode": proc.returncode,
        "passed": passed,
        "failed": counts["failures"] + counts["errors"],
        "skipped": counts["skipped"],
        "failed_tests": failed,
        "output_tail": proc.stdout[-2000:] + proc.stderr[-1000:],
        "seconds": time.perf_counter() - t0,
    }


def stand_in_tokenizer(work: Path) -> Path:
    """SmolLM2's tokenizer saved as a folder: the tokenizer of the random-weight model (the paper
    models' tokenizers are on the Hub, which an offline host cannot reach)."""
    from experiments.gpu.carry import GGUF, write_tokenizer
    from goose.harness.models.gguf import locate_gguf

    folder = work / "tokenizer"
    if not (folder / "tokenizer.json").is_file():
        write_tokenizer(locate_gguf(*GGUF), folder)
    return folder


def stage_usedby(profile: Profile, work: Path, out: Path, data_dir: str, tokenizer: str | None) -> dict:
    """`python run.py -m model=<usedby_model> model.init=random bench=mtbench method=...` in a
    subprocess: Hydra, loading, the engine, rows and summary on the device, with random weights of
    the paper model's shape and a stand-in tokenizer (the rows say so). Its rows are copied to
    <out>/usedby_mtbench.jsonl."""
    from goose.records.metrics import cell_summary

    tok = tokenizer or str(stand_in_tokenizer(work))
    run_dir = work / "usedby"
    shutil.rmtree(run_dir, ignore_errors=True)
    args = [
        f"model={profile.usedby_model}",
        "model.init=random",
        f"model.tokenizer={tok}",
        *profile.usedby_overrides,
        "bench=mtbench",
        f"method={profile.usedby_methods}",
        f"bench.limit={profile.usedby_limit}",
        f"max_new_tokens={profile.usedby_tokens}",
        "quick=false",
        f"data_dir={data_dir}",
        f"out_dir={run_dir}",
        "wandb=disabled",
        f"hydra.sweep.dir={work / 'usedby_hydra'}",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "run.py", "-m", *args], cwd=ROOT, capture_output=True, text=True)
    result: dict[str, Any] = {
        "command": "python run.py -m " + " ".join(args),
        "returncode": proc.returncode,
        "seconds": time.perf_counter() - t0,
        "output_tail": (proc.stdout[-3000:] + proc.stderr[-2000:]),
    }
    files = results_files(run_dir, "*/mtbench.jsonl", recursive=False)
    if not files:
        return result
    copy_results_file(files[0], out / "usedby_mtbench.jsonl")
    rows = [r for r in read_result_rows(files[0].parent.parent) if r.get("bench") == "mtbench"]
    ar = [r for r in rows if r["method"] == "ar"]
    methods = sorted({r["method"] for r in rows})
    first = rows[0] if rows else {}
    result.update(
        rows=relative(out / "usedby_mtbench.jsonl"),
        model=first.get("model"),
        random_weights=first.get("random_weights"),
        weights=first.get("weights"),
        gpu=(first.get("hardware") or {}).get("gpu"),
        summary={m: cell_summary([r for r in rows if r["method"] == m], ar) for m in methods},
    )
    return result
