"""The `sidebyside` stage of `make gpu-check`: real SmolLM2-135M weights on the device, every contender side
by side in wall clock through `experiments.bench` (interleaved repeats, each contender's position rotated,
budget=auto's cost curve measured on the device, every output checked against engine AR's), once per
dtype, with the steps replayed from CUDA graphs where the profile says so (`side_graphs`; CUDA only,
captures recorded apart from the timed steps in each row's graph_captures / graph_capture_s).

Each dtype runs in its own subprocess into <work>/sidebyside/<dtype>/ (one model on the device at a time;
the same command resumes a cut run); the stage records per dtype the command, its seconds and exit code
and, from the rows, the bench's summary: tokens/s over engine AR per contender and benchmark (median
[min, max] over repeats), the outputs identical to AR's, τ and drafting milliseconds per step.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiments.gpu.profile import REAL_MODEL, ROOT, Profile, relative
from experiments.gpu.record import save_record
from goose.records.bench_run import record_from_rows, summary_lines
from goose.records.results import read_rows


def bench_argv(profile: Profile, dtype: str, data_dir: str, out: Path) -> list[str]:
    """The `python -m experiments.bench` arguments of one dtype's run."""
    argv = ["--model", REAL_MODEL, "--device", profile.device, "--dtype", dtype]
    argv += ["--benches", ",".join(profile.side_benches), "--limit", str(profile.side_limit)]
    argv += ["--max-new-tokens", str(profile.side_tokens), "--repeats", str(profile.side_repeats)]
    argv += ["--methods", profile.side_methods, "--hf", profile.side_hf, "--data-dir", data_dir]
    argv += ["--out", str(out)]
    return argv + (["--cuda-graphs"] if profile.side_graphs else [])


def per_step(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per contender (method, budget=auto marked), over its timed rows: τ (tokens per forward) and the
    drafting and update milliseconds per step."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == name]
        steps = sum(r.get("forward_calls") or 0 for r in mine)
        if not steps:
            continue
        out[name] = {
            "tau": sum(r["generated_tokens"] for r in mine) / steps,
            "draft_ms_per_step": 1e3 * sum(r.get("draft_s") or 0.0 for r in mine) / steps,
            "update_ms_per_step": 1e3 * sum(r.get("update_s") or 0.0 for r in mine) / steps,
        }
    return out


def summarise(run_dir: Path) -> dict[str, Any]:
    """What one dtype's rows say (nothing where none was written)."""
    rows = read_rows(run_dir) if run_dir.is_dir() else []
    timed = [r for r in rows if r.get("repeat") is not None]
    if not timed:
        return {"rows": 0}
    record = record_from_rows(timed, run_dir.name)
    first = timed[0]
    return {
        "rows": len(timed),
        "forward": first.get("forward"),
        "graph_captures": sum(r.get("graph_captures") or 0 for r in timed),
        "graph_capture_s": sum(r.get("graph_capture_s") or 0.0 for r in timed),
        "summary": summary_lines(record),
        "identical_to_engine_ar": record.get("summary", {}).get("identical_to_engine_ar"),
        "per_step": per_step(timed),
        "source": relative(run_dir),
    }


def header(profile: Profile) -> dict[str, Any]:
    """What the stage runs, beside each dtype's section."""
    return dict(
        model=REAL_MODEL,
        benches=list(profile.side_benches),
        limit=profile.side_limit,
        max_new_tokens=profile.side_tokens,
        repeats=profile.side_repeats,
        methods=profile.side_methods,
        hf=profile.side_hf,
        cuda_graphs=profile.side_graphs,
        random_weights=False,
    )


def stage_from_rows(profile: Profile, rows: Path, record: dict[str, Any]) -> dict[str, Any]:
    """The stage summarised from rows copied back from a GPU host (rows/<dtype>/, as
    sidebyside_rows.tar.gz unpacks), the record's earlier sections (their commands) kept."""
    out: dict[str, Any] = {**record["stages"].get("sidebyside", {}), **header(profile)}
    for run_dir in sorted(p for p in rows.iterdir() if p.is_dir()):
        out[run_dir.name] = {**(out.get(run_dir.name) or {}), **summarise(run_dir)}
    return out


def stage_side_by_side(
    profile: Profile, work: Path, data_dir: str, record: dict[str, Any], path: Path
) -> dict[str, Any]:
    """Every dtype of `profile.side_dtypes` in turn, each saved into the record as it finishes."""
    out: dict[str, Any] = record["stages"].setdefault("sidebyside", {})
    out.update(header(profile))
    for dtype in profile.side_dtypes:
        run_dir = work / "sidebyside" / dtype
        argv = bench_argv(profile, dtype, data_dir, run_dir)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "experiments.bench", *argv], cwd=ROOT, capture_output=True, text=True
        )
        out[dtype] = {
            "command": "python -m experiments.bench " + " ".join(argv),
            "returncode": proc.returncode,
            "seconds": time.perf_counter() - t0,
            **summarise(run_dir),
        }
        if proc.returncode:
            out[dtype]["output_tail"] = proc.stdout[-2000:] + proc.stderr[-3000:]
        save_record(record, path)
    return out
