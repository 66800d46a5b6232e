"""`budget_cache` in a run: a bad value is refused before anything loads (field, value, what is allowed); the
job's curve comes from the machine's cache when it can, and every row records where it came from."""

from __future__ import annotations

import json

import pytest

import goose.harness.job as job
from goose.harness import compose as harness_compose
from goose.harness.compose import RunSettings, UserError, compose_config
from tests.engine.scripted_engine import ScriptedEngine, scripted_clock  # noqa: F401 (a fixture)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("true", "budget_cache = True: must be auto (the user cache), off (false: calibrate every run) or a"),
        ("3", "budget_cache = 3: must be auto"),
        ("FILE", "that path is a file, not a directory"),
    ],
)
def test_a_bad_budget_cache_is_refused_before_anything_loads(tmp_path, monkeypatch, value, expected):
    def must_not_load(*args, **kwargs):
        raise AssertionError("a model or benchmark was loaded for an invalid config")

    monkeypatch.setattr(job, "engine_for", must_not_load)
    monkeypatch.setattr(harness_compose, "load_model", must_not_load)
    monkeypatch.setattr(harness_compose, "load_benchmark", must_not_load)
    if value == "FILE":
        value = str(tmp_path / "a_file")
        (tmp_path / "a_file").write_text("")
    with pytest.raises(UserError) as err:
        job.run_job(compose_config([f"budget_cache={value}"], validate=False))
    assert expected in str(err.value)


def test_run_settings_read_budget_cache(tmp_path):
    assert RunSettings.from_config(compose_config([])).budget_cache == "auto"
    assert RunSettings.from_config(compose_config(["budget_cache=off"])).budget_cache == "off"
    assert RunSettings.from_config(compose_config(["budget_cache=false"])).budget_cache is False
    assert RunSettings.from_config(compose_config([f"budget_cache={tmp_path}"])).budget_cache == str(tmp_path)


@pytest.mark.usefixtures("scripted_clock")
def test_rows_record_where_the_curve_came_from(tmp_path, capsys):
    table, record = job.latency_table(ScriptedEngine(), None, (), tmp_path)
    path = tmp_path / f"{record['fingerprint']}.json"
    assert record["source"] == "calibrated" and record["cache"] == str(path) and path.is_file()
    assert record["sizes"] == table.sizes and record["seconds"] == table.seconds
    assert f"calibrated at start-up in 0.0 s, saved to {path}; nodes: ms) 1: " in capsys.readouterr().out
    again, hit = job.latency_table(ScriptedEngine(), None, (), tmp_path)
    assert hit == {**record, "source": "cache"} and again == table
    assert f"(from the cache {path}; nodes: ms)" in capsys.readouterr().out
    path.write_text(path.read_text()[:100])  # an interrupted write
    _, redone = job.latency_table(ScriptedEngine(), None, (), tmp_path)
    assert redone["source"] == "calibrated" and "not valid JSON" in redone["cache_rejected"]
    out = capsys.readouterr().out
    assert f"the cached curve {path} was not used: not valid JSON" in out
    json.loads(path.read_text())  # rewritten whole
    _, off = job.latency_table(ScriptedEngine(), None, (), "off")
    assert (
        off["source"] == "calibrated" and off["cache"] is None and off["fingerprint"] == record["fingerprint"]
    )


@pytest.mark.usefixtures("scripted_clock")
def test_a_sampled_run_gets_its_own_sampled_curve(tmp_path):
    """The job's curve for a sampled run is calibrated with its sampling (the record says so) and cached
    apart from the greedy one; a greedy `sampling` shares the greedy curve."""
    from goose.engine.core.sampling import SamplingParams

    _, greedy = job.latency_table(ScriptedEngine(), None, (), tmp_path)
    table, sampled = job.latency_table(ScriptedEngine(), None, (), tmp_path, SamplingParams(temperature=1.0))
    assert sampled["fingerprint"] != greedy["fingerprint"] and sampled["source"] == "calibrated"
    assert table.meta["calibration"]["sampling"] == {"temperature": 1.0, "top_p": 1.0, "top_k": 0}
    _, again = job.latency_table(ScriptedEngine(), None, (), tmp_path, SamplingParams())
    assert again["fingerprint"] == greedy["fingerprint"] and again["source"] == "cache"
