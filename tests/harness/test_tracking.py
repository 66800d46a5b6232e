"""W&B logging (goose.harness.tracking): offline runs hold the config, the summary metrics and the
per-prompt table, grouped by experiment; `wandb=disabled` writes nothing.

Offline runs of wandb >= 0.2x keep everything in the run's `.wandb` file (a LevelDB-style log of
protobuf records); `wandb_records` reads it with wandb's own protobuf classes.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from goose.harness.tracking import PROMPT_COLUMNS, TABLE_KEY, clean_summary, log_run, prompt_record
from tests.conftest import ROOT

SUMMARY_KEYS = {
    "tau",
    "tokens_per_s",
    "speedup",
    "p_s",
    "p_t",
    "p_ratio",
    "lossless_share",
    "prompts",
    "failed",
}


def _chunks(path: Path):
    """Payloads of a W&B LevelDB-style log: 7-byte file header, 32 KiB blocks, 7-byte chunk
    headers (crc32, little-endian length, type: 1 full, 2 first, 3 middle, 4 last)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # block trailer
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            yield buf + chunk
        else:
            return


def _records(run_dir: Path, timeout: float = 60.0) -> list:
    """The records of an offline run, once its `exit` record is on disk (wandb's service process
    writes the file asynchronously: `run.finish()` can return before it is flushed)."""
    from wandb.proto import wandb_internal_pb2 as pb

    deadline = time.monotonic() + timeout
    while True:
        records = []
        for log in run_dir.glob("run-*.wandb"):
            for payload in _chunks(log):
                rec = pb.Record()
                rec.ParseFromString(payload)
                records.append(rec)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def wandb_records(run_dir: Path) -> dict:
    """The run record, config, final summary and history keys of an offline run directory."""
    out: dict = {"run": None, "config": {}, "summary": {}, "history": set()}
    for rec in _records(run_dir):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["run"] = rec.run
            for item in rec.run.config.update:
                out["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                out["config"][item.key] = json.loads(item.value_json)
        elif kind == "summary":
            for item in rec.summary.update:
                out["summary"][item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "history":
            out["history"] |= {item.key or "/".join(item.nested_key) for item in rec.history.item}
    return out


def _table(run_dir: Path) -> dict:
    (path,) = run_dir.glob(f"files/media/table/{TABLE_KEY}_*.table.json")
    return json.loads(path.read_text())


def test_prompt_record_and_clean_summary():
    row = {
        "prompt_id": "p0",
        "method": "goose",
        "status": "ok",
        "tau": 2.5,
        "offered": {"spine": 10, "branch": 40},
        "accepted": {"spine": 6, "branch": 4},
        "lossless": True,
    }
    rec = dict(zip(PROMPT_COLUMNS, prompt_record(row), strict=True))
    assert rec["p_s"] == 0.6 and rec["p_t"] == 0.1 and rec["offered_branch"] == 40
    assert rec["tau"] == 2.5 and rec["first_diff"] is None
    chain = dict(zip(PROMPT_COLUMNS, prompt_record({**row, "offered": {"spine": 3}}), strict=True))
    assert chain["p_t"] is None and chain["offered_branch"] == 0  # no branch drafts: no p_t
    assert clean_summary({"tau": 1.5, "p_t": math.nan, "speedup": math.inf}) == {"tau": 1.5}


def test_log_run_offline_holds_config_summary_and_table(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    rows = [
        {
            "prompt_id": f"p{i}",
            "method": "goose",
            "config_hash": "abc123",
            "status": "ok",
            "generated_tokens": 10,
            "forward_calls": 4,
            "tau": 2.5,
            "offered": {"spine": 8, "branch": 20},
            "accepted": {"spine": 4, "branch": 2},
            "lossless": True,
        }
        for i in range(3)
    ]
    summary = {"prompts": 3, "failed": 0, "tau": 2.5, "tokens_per_s": 11.0, "speedup": 1.7, "p_s": 0.5}
    summary |= {"p_t": 0.1, "p_ratio": 5.0, "lossless_share": 1.0, "bogus": math.nan}
    config = {
        "model": {"name": "m"},
        "method": {"name": "goose", "drafter": {"budget": 60}},
        "experiment": "exp1",
    }
    run_dir = log_run("offline", config, summary, rows, "exp1", "m/b/goose", tmp_path)
    assert run_dir is not None
    (offline,) = (tmp_path / "wandb").glob("offline-run-*")
    got = wandb_records(offline)
    assert got["run"].run_group == "exp1" and got["run"].job_type == "goose"
    assert got["run"].display_name == "m/b/goose" and set(got["run"].tags) >= {"m", "b", "goose", "exp1"}
    assert got["config"]["method"]["drafter"]["budget"] == 60 and got["config"]["config_hash"] == "abc123"
    expected = {k: (None if k == "bogus" else v) for k, v in summary.items()}  # NaN is null
    assert {k: got["summary"][k] for k in summary} == expected
    assert "bogus" not in got["history"] and {"tau", "speedup", "p_s"} <= got["history"]
    assert TABLE_KEY in {k.split("/")[0] for k in got["summary"]}
    table = _table(offline)
    assert table["columns"] == list(PROMPT_COLUMNS) and len(table["data"]) == 3


def _run(out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "run.py",
        "-m",
        "+experiment=cpu_ablations",
        "method=goose",
        "bench=humaneval",
        "bench.limit=1",
        "max_new_tokens=8",
        f"out_dir={out}",
        f"hydra.sweep.dir={out}/multirun",
        *args,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_real_run_logs_offline(tmp_path):
    """A real tiny run of a preset (`wandb=offline`): an offline run directory under out_dir,
    grouped by the preset's experiment, with the cell's summary metrics and per-prompt table."""
    out = tmp_path / "out"
    proc = _run(out, "wandb=offline")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "W&B logging failed" not in proc.stderr
    (offline,) = (out / "wandb").glob("offline-run-*")
    # W&B's banner and run summary stay off the console; one line says where the run went
    assert "Tracking run with wandb" not in proc.stdout + proc.stderr
    assert "Run summary" not in proc.stdout + proc.stderr
    saved = f"goose-bench: W&B run smollm2-135m/humaneval/goose saved offline in {offline}"
    assert proc.stdout.splitlines()[-1].startswith(saved), proc.stdout[-1000:]
    got = wandb_records(offline)
    assert (
        got["run"].run_group == "cpu_ablations" and got["run"].display_name == "smollm2-135m/humaneval/goose"
    )
    assert (
        got["config"]["experiment"] == "cpu_ablations" and got["config"]["method"]["drafter"]["budget"] == 60
    )
    assert got["config"]["bench"]["limit"] == 1 and got["config"]["max_new_tokens"] == 8
    summary = got["summary"]
    assert SUMMARY_KEYS <= set(summary), sorted(summary)
    assert summary["prompts"] == 1 and summary["lossless_share"] == 1.0 and summary["tau"] >= 1.0
    assert {"tau", "tokens_per_s", "lossless_share", "prompts"} <= got["history"]
    table = _table(offline)
    assert [row[0] for row in table["data"]] == ["HumanEval/0"] and table["columns"] == list(PROMPT_COLUMNS)
    print("summary keys:", sorted(k for k in summary if not k.startswith("_")))


@pytest.mark.parametrize("mode,calls", [("disabled", 0), ("offline", 1)])
def test_job_logs_unless_disabled(tmp_path, monkeypatch, mode, calls):
    """`wandb=disabled` never reaches goose.harness.tracking; otherwise the run is grouped by experiment."""
    import goose.harness.tracking
    from goose.harness.compose import RunSettings, compose_config
    from goose.harness.job import _log_wandb
    from goose.harness.runner import Cell

    seen = []
    monkeypatch.setattr(goose.harness.tracking, "log_run", lambda **kw: seen.append(kw))
    cfg = compose_config([f"wandb={mode}", f"out_dir={tmp_path}"])
    cfg.experiment = "exp1"  # the key a preset of conf/experiment/ sets
    tracking = RunSettings.from_config(cfg).tracking
    _log_wandb(tracking, {"tau": 1.0}, [], Cell("m", "b", "goose", {}, 8, "float32"))
    assert len(seen) == calls
    if calls:
        assert seen[0]["group"] == "exp1" and seen[0]["name"] == "m/b/goose" and seen[0]["mode"] == mode
