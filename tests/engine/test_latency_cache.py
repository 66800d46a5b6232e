"""budget=auto's cached curve per machine: the fingerprint moves with everything the curve depends on; a hit
returns the saved table without timing a step; a mismatched, corrupt, interrupted or foreign file is
rejected with its reason, recalibrated and rewritten atomically; `budget_cache`'s values are checked."""

from __future__ import annotations

import json
import os
import threading

import pytest
import torch

from goose.engine.budget import latency_cache
from goose.engine.budget.calibration import calibration_settings
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.budget.latency_cache import (
    CACHE_FORMAT,
    CacheRejected,
    cache_dir,
    cached_latency,
    check_cache_setting,
    fingerprint,
    read_cached,
    weights_digest,
    write_cached,
)
from goose.engine.budget.settle import SettleRule
from tests.engine.scripted_engine import ScriptedEngine, scripted_clock  # noqa: F401 (a fixture)
from tests.tiny_models import tiny_model

pytestmark = pytest.mark.usefixtures("scripted_clock")
SMALL = {"sizes": (1, 2, 4), "kv_len": 8, "repeats": 3, "update_topk": None}


def key_of(engine: ScriptedEngine, **settings) -> str:
    return fingerprint(engine, calibration_settings(**{**SMALL, **settings}))[0]


def _threads(monkeypatch):
    monkeypatch.setattr(latency_cache.torch, "get_num_threads", lambda: 977)


def _weights(engine):
    with torch.no_grad():
        next(engine.model.parameters()).view(-1)[0] += 1.0


def _name(engine):
    engine.model.config._name_or_path = "another/checkpoint"


CHANGES = {
    "cpu": lambda e, mp: mp.setattr(latency_cache, "cpu_model", lambda: "Another CPU 9000"),
    "cpu_capability": lambda e, mp: mp.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "NOPE"),
    "host": lambda e, mp: mp.setattr(latency_cache.platform, "node", lambda: "another-host"),
    "threads": lambda e, mp: _threads(mp),
    "torch": lambda e, mp: mp.setattr(torch, "__version__", "0.0.1"),
    "device": lambda e, mp: setattr(e, "device", torch.device("meta")),
    "dtype": lambda e, mp: setattr(e, "dtype", torch.bfloat16),
    "model name": lambda e, mp: _name(e),
    "weights": lambda e, mp: _weights(e),
    "forward: lean": lambda e, mp: setattr(e, "forward_name", "lean"),
    "forward: compile": lambda e, mp: setattr(e, "forward_name", "lean+prepack+compile"),
    "forward: cuda graphs": lambda e, mp: setattr(e, "forward_name", "lean+graphs"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_fingerprint_moves_with_each_thing_the_curve_depends_on(change, monkeypatch):
    engine = ScriptedEngine(model=tiny_model("llama"))
    before = key_of(engine)
    assert key_of(engine) == before  # the same process, the same engine: the same key
    CHANGES[change](engine, monkeypatch)
    assert key_of(engine) != before


@pytest.mark.parametrize(
    "settings",
    [
        {"kv_len": 16},
        {"more_kv_lens": (1024,)},
        {"sizes": (1, 2, 8)},
        {"repeats": 5},
        {"rule": None},
        {"rule": SettleRule(target=0.01)},
    ],
)
def test_the_fingerprint_moves_with_the_calibration_settings(settings):
    engine = ScriptedEngine()
    assert key_of(engine, **settings) != key_of(engine)


def test_the_fingerprint_moves_with_the_gpu_name(monkeypatch):
    engine = ScriptedEngine(device="cuda")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    h200 = key_of(engine)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100")
    assert key_of(engine) != h200
    assert fingerprint(engine, calibration_settings(**SMALL))[1]["machine"]["gpu"]["name"] == "NVIDIA A100"


def test_the_same_weights_in_another_process_give_the_same_digest():
    torch.manual_seed(0)
    a = tiny_model("llama")
    torch.manual_seed(0)
    b = tiny_model("llama")
    assert weights_digest(a) == weights_digest(b)
    assert weights_digest(a) != weights_digest(tiny_model("qwen3"))


def test_a_miss_calibrates_and_saves_a_hit_loads_the_same_table(tmp_path):
    engine = ScriptedEngine()
    table, origin = cached_latency(engine, tmp_path, **SMALL)
    path = tmp_path / f"{origin.fingerprint}.json"
    assert origin.source == "calibrated" and origin.cache == str(path) and path.is_file()
    assert origin.record() == {"source": "calibrated", "fingerprint": origin.fingerprint, "cache": str(path)}
    steps = sum(engine.steps.values())
    again = ScriptedEngine()  # another process: the same machine, model and settings
    hit, hit_origin = cached_latency(again, tmp_path, **SMALL)
    assert hit == table and hit_origin.source == "cache" and hit_origin.cache == str(path)
    assert sum(again.steps.values()) == 0 and sum(engine.steps.values()) == steps  # no step timed
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == [path.name]
    assert not list(tmp_path.glob("*.tmp"))  # the atomic write left nothing behind


def test_another_fingerprint_calibrates_its_own_curve(tmp_path):
    _, first = cached_latency(ScriptedEngine(), tmp_path, **SMALL)
    other = ScriptedEngine(forward_name="lean")
    _, second = cached_latency(other, tmp_path, **SMALL)
    assert second.source == "calibrated" and second.fingerprint != first.fingerprint
    assert sum(other.steps.values()) > 0
    _, more_kv = cached_latency(ScriptedEngine(), tmp_path, **SMALL, more_kv_lens=(32,))
    assert more_kv.source == "calibrated" and more_kv.fingerprint != first.fingerprint
    assert len(list(tmp_path.glob("*.json"))) == 3


def _rewritten(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "damage,reason",
    [
        (lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]), "not valid JSON"),
        (lambda p: p.write_text(""), "interrupted write or a corrupt file"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), "unreadable"),
        (lambda p: _rewritten(p, lambda d: d.update(format=CACHE_FORMAT + 1)), "cache format 2"),
        (lambda p: _rewritten(p, lambda d: d.update(fingerprint="0" * 20)), "holds fingerprint '00000"),
        (
            lambda p: _rewritten(p, lambda d: d["components"]["machine"].update(cpu="Other")),
            "written for another machine.cpu",
        ),
        (
            lambda p: _rewritten(p, lambda d: d["components"].update(forward="lean")),
            "written for another forward",
        ),
        (lambda p: _rewritten(p, lambda d: d["table"].update(seconds=[0.1])), "its table does not parse"),
        (
            lambda p: _rewritten(p, lambda d: d["table"].update(sizes=[1, 2, 8])),
            "its table has sizes [1, 2, 8]",
        ),
        (
            lambda p: _rewritten(p, lambda d: d["table"].update(seconds=[0.1, -0.2, 0.3])),
            "not a positive number",
        ),
    ],
)
def test_a_bad_cache_file_is_rejected_with_its_reason_and_recalibrated(tmp_path, damage, reason):
    table, origin = cached_latency(ScriptedEngine(), tmp_path, **SMALL)
    path = tmp_path / f"{origin.fingerprint}.json"
    damage(path)
    engine = ScriptedEngine()
    again, redo = cached_latency(engine, tmp_path, **SMALL)
    assert redo.source == "calibrated" and reason in redo.rejected, redo.rejected
    assert redo.record()["cache_rejected"] == redo.rejected
    assert sum(engine.steps.values()) > 0 and again.sizes == [1, 2, 4]
    _, fixed = cached_latency(ScriptedEngine(), tmp_path, **SMALL)  # rewritten: the next process hits
    assert fixed.source == "cache" and fixed.rejected is None


def test_read_cached_names_the_mismatch(tmp_path):
    engine = ScriptedEngine()
    table, origin = cached_latency(engine, tmp_path, **SMALL)
    path = tmp_path / f"{origin.fingerprint}.json"
    key, components = fingerprint(engine, calibration_settings(**SMALL))
    assert read_cached(path, key, components) == table
    components["calibration"]["repeats"] = 4
    with pytest.raises(CacheRejected, match=r"written for another calibration\.repeats"):
        read_cached(path, key, components)


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    table, origin = cached_latency(ScriptedEngine(), tmp_path, **SMALL)
    path = tmp_path / f"{origin.fingerprint}.json"
    before = path.read_text()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(latency_cache.json, "dump", crash)
    key, components = fingerprint(ScriptedEngine(), calibration_settings(**SMALL))
    with pytest.raises(KeyboardInterrupt):
        write_cached(path, table, key, components)
    assert path.read_text() == before
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_cache_off_neither_reads_nor_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path))
    for off in ("off", False, None):
        table, origin = cached_latency(ScriptedEngine(), off, **SMALL)
        assert origin.source == "calibrated" and origin.cache is None and origin.fingerprint
    assert not list(tmp_path.rglob("*"))


def test_auto_is_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "c"))
    assert cache_dir("auto") == tmp_path / "c" / "latency"
    assert cache_dir(str(tmp_path / "mine")) == tmp_path / "mine"
    _, origin = cached_latency(ScriptedEngine(), "auto", **SMALL)
    assert origin.cache == str(tmp_path / "c" / "latency" / f"{origin.fingerprint}.json")


def test_an_unwritable_cache_keeps_the_curve_and_says_why(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    table, origin = cached_latency(ScriptedEngine(), blocker / "latency", **SMALL)
    assert origin.source == "calibrated" and origin.cache is None
    assert f"cannot write {blocker}" in origin.not_saved and table.sizes == [1, 2, 4]


def test_a_curve_that_did_not_settle_serves_its_run_but_is_not_cached(tmp_path):
    def broad(n: int, k: int) -> float:
        return (n + k % 5) / 1024 if n > 1 else n / 1024  # 2 of 3 sizes never settle

    table, origin = cached_latency(ScriptedEngine(broad), tmp_path, **SMALL)
    assert origin.source == "calibrated" and origin.cache is None and not list(tmp_path.glob("*.json"))
    assert origin.not_saved.startswith("2 of 3 sizes did not settle at KV 8")
    assert origin.record()["cache_not_saved"] == origin.not_saved
    _, settled = cached_latency(ScriptedEngine(), tmp_path, **SMALL)  # steady timings: cached
    assert settled.cache is not None


def test_budget_cache_values_are_checked(tmp_path):
    for ok in ("auto", "off", False, str(tmp_path), str(tmp_path / "not yet")):
        assert check_cache_setting("budget_cache", ok) == ok
    a_file = tmp_path / "f.json"
    a_file.write_text("{}")
    for bad, why in [
        (True, "must be auto (the user cache), off (false: calibrate every run) or a directory path"),
        (3, "budget_cache = 3: must be auto"),
        ("", "budget_cache = '': must be auto"),
        (str(a_file), "that path is a file, not a directory"),
    ]:
        with pytest.raises(ValueError, match="budget_cache") as exc:
            check_cache_setting("budget_cache", bad)
        assert why in str(exc.value)


def test_a_cached_curve_serves_as_a_budget_profile(tmp_path):
    table, origin = cached_latency(ScriptedEngine(), tmp_path, **SMALL)
    assert LatencyTable.load(origin.cache) == table


def test_processes_that_start_together_calibrate_once(tmp_path):
    """While one process holds the lock (calibrating), another waits, then loads what the first wrote."""
    engine = ScriptedEngine()
    key, components = fingerprint(engine, calibration_settings(**SMALL))
    table, _ = cached_latency(ScriptedEngine(), "off", **SMALL)
    done = {}
    with latency_cache._locked(tmp_path / f".{key}.lock"):
        waiter = threading.Thread(target=lambda: done.update(r=cached_latency(engine, tmp_path, **SMALL)))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive()  # waiting for the lock
        write_cached(tmp_path / f"{key}.json", table, key, components)
    waiter.join(10)
    assert done["r"][1].source == "cache" and done["r"][0] == table
    assert sum(engine.steps.values()) == 0
