"""`make delayed-grid` on SmolLM2: every (method, shape) runs beside AR sampling on calibration prompts past
the evaluation's, the fastest shape goes to chosen.json, a second run resumes without re-running, and the
bench runs the chosen shape (`--method-overrides`), refusing a bad one before loading the model."""

from __future__ import annotations

import json

import pytest

from experiments import delayed_grid
from experiments.bench import driver
from goose.records.results import read_rows

GRID = ["--benches", "humaneval", "--skip", "2", "--limit", "1", "--max-new-tokens", "10"]
GRID += ["--methods", "stand_delayed", "--k", "2", "--l1", "1", "--l2", "2,3", "--threads", "1"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    out = tmp_path_factory.mktemp("grid")
    chosen = delayed_grid.main([*GRID, "--out", str(out)])
    return out, chosen


def test_every_shape_runs_beside_ar_on_the_calibration_prompt(grid):
    out, chosen = grid
    rows = [json.loads(line) for line in (out / "grid.jsonl").read_text().splitlines()]
    assert sorted((r["method"], tuple(r["shape"])) for r in rows) == [
        ("ar", ()),
        ("stand_delayed", (2, 1, 2)),
        ("stand_delayed", (2, 1, 3)),
    ]
    assert {r["prompt_id"] for r in rows} == {
        "HumanEval/2"
    }  # the 3rd prompt: the first two are the evaluation's
    assert len({r["seed"] for r in rows}) == 1  # every shape with the prompt's seed
    speed = {tuple(r["shape"]): r["generated_tokens"] / r["wall_time_s"] for r in rows}
    best = max((s for s in speed if s), key=speed.get)
    assert chosen["stand_delayed"]["shape"] == list(best)
    assert json.loads((out / "chosen.json").read_text()) == json.loads(json.dumps(chosen))


def test_a_second_run_resumes_without_running_again(grid):
    out, _ = grid
    before = (out / "grid.jsonl").read_text()
    delayed_grid.main([*GRID, "--out", str(out)])
    assert (out / "grid.jsonl").read_text() == before


def test_the_bench_runs_the_chosen_shape(grid, tmp_path):
    out, chosen = grid
    args = ["--benches", "humaneval", "--limit", "1", "--max-new-tokens", "8", "--repeats", "1", "--hf", ""]
    args += ["--methods", "stand_delayed@traversal", "--temperature", "1.0", "--threads", "1"]
    driver.main([*args, "--method-overrides", str(out / "chosen.json"), "--out", str(tmp_path / "run")])
    (row,) = [r for r in read_rows(tmp_path / "run") if r["method"] == "stand_delayed"]
    config = row["method_config"]
    assert [config["num_paths"], config["trunk_len"], config["path_len"]] == chosen["stand_delayed"]["shape"]
    assert row["verifier"] == "traversal"


def test_a_bad_override_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(driver, "model_and_engine", lambda *a, **k: pytest.fail("loaded a model"))
    bad = tmp_path / "chosen.json"
    bad.write_text(json.dumps({"stand_delayed": {"overrides": ["method.drafter.num_paths=0"]}}))
    with pytest.raises(SystemExit):
        driver.main(
            ["--methods", "stand_delayed", "--temperature", "1.0", "--hf", "", "--method-overrides", str(bad)]
        )
    assert "num_paths = 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--methods", "stand_chain"], "stand_chain does not draft a delayed tree"),
        (["--temperature", "0"], "use T > 0"),
        (["--k", "0,2"], "--k = '0,2': integers >= 1"),
    ],
)
def test_the_grid_refuses_what_it_cannot_search(argv, says, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(delayed_grid, "model_and_engine", lambda *a, **k: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit):
        delayed_grid.main([*argv, "--out", str(tmp_path)])
    assert says in capsys.readouterr().err
