"""`make bench` cut short resumes at its last finished repeat (experiments/bench_checkpoint.py) and
drafts exactly what an uninterrupted run drafts; a checkpoint of other settings is refused."""

from __future__ import annotations

import pickle

import pytest

from experiments import bench
from experiments.bench_checkpoint import BenchCheckpoint, CheckpointMismatch, measuring_code_digest
from goose.engine.budget.cost_model import LatencyTable

VERSIONS = {"torch": "2.13.0", "transformers": "4.0"}

# Token Recycling at budget=auto: both its table and auto's acceptance rates outlive a prompt, so
# a resumed repeat that started from a fresh drafter would draft other trees.
ARGS = ["--benches", "humaneval", "--limit", "2", "--max-new-tokens", "16", "--repeats", "2"]
ARGS += ["--methods", "tr:auto", "--hf", "", "--threads", "1"]
CONTENDERS = 2  # engine:ar, engine:tr:auto
PROMPTS = 2


def drafted(record: dict) -> list[tuple]:
    """What each contender did on each prompt in each repeat, timings left out."""
    return [
        (p["prompt_id"], r, name, run["tokens"], run["steps"], run["tree_nodes"])
        for p in record["per_prompt"]
        for r, runs in enumerate(p["runs"])
        for name, run in sorted(runs.items())
    ]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The bench's arguments (budget=auto from a fixed latency profile) and its record when
    nothing interrupts it."""
    tmp = tmp_path_factory.mktemp("bench")
    profile = tmp / "profile.json"
    LatencyTable(sizes=[1, 2, 8, 32], seconds=[0.02, 0.021, 0.024, 0.04]).save(profile)
    args = [*ARGS, "--latency", str(profile)]
    whole = bench.main([*args, "--out", str(tmp / "whole.json")])
    assert not BenchCheckpoint.path_for(tmp / "whole.json").exists()
    return args, whole


@pytest.mark.parametrize(
    ("stop_at_seed", "finished_repeats", "finished_prompts"),
    [
        (4, 0, 1),  # in repeat 1, at prompt 2: prompt 1 is kept
        (6, 1, 0),  # at the first prompt of repeat 2: repeat 1 is kept
        (8, 1, 1),  # in repeat 2, at prompt 2
    ],
)
def test_an_interrupted_bench_resumes_with_the_same_drafts(
    uninterrupted, tmp_path, monkeypatch, stop_at_seed, finished_repeats, finished_prompts
):
    args, whole = uninterrupted

    out = tmp_path / "cut.json"
    partial = BenchCheckpoint.path_for(out)
    seeds_drawn = 0
    derive_seed = bench.derive_seed

    def interrupt(*a):  # one seed per contender and prompt, in the order they run
        nonlocal seeds_drawn
        seeds_drawn += 1
        if seeds_drawn == stop_at_seed:
            raise KeyboardInterrupt
        return derive_seed(*a)

    monkeypatch.setattr(bench, "derive_seed", interrupt)
    with pytest.raises(KeyboardInterrupt):
        bench.main([*args, "--out", str(out)])
    assert not out.exists() and partial.is_file()
    with partial.open("rb") as fh:
        saved = pickle.load(fh)
    assert len(saved["runs"]) == finished_repeats and len(saved["current"]) == finished_prompts
    assert set(saved["drafter_states"]) == {"engine:tr:auto"}

    monkeypatch.setattr(bench, "derive_seed", derive_seed)
    if finished_repeats:
        with monkeypatch.context() as m:  # --show-partial loads no model and runs nothing
            m.setattr(bench, "model_and_engine", None)
            shown = bench.main([*args, "--out", str(out), "--show-partial"])
        assert partial.is_file() and not out.exists()
        assert [len(v) for v in shown["tokens_per_s_per_repeat"].values()] == [1] * CONTENDERS
        for name in ("engine:ar", "engine:tr:auto"):
            assert (
                shown["overhead"][name]["steps_repeat1"]
                == whole["summary"]["overhead"][name]["steps_repeat1"]
            )
    else:
        with pytest.raises(SystemExit, match="no finished repeat yet; repeat 1: 1 of 2 prompts done"):
            bench.main([*args, "--out", str(out), "--show-partial"])

    resumed = bench.main([*args, "--out", str(out)])
    assert not partial.exists() and out.is_file()
    assert drafted(resumed) == drafted(whole)
    segments = [[s["first_prompt"] for s in rep] for rep in resumed["repeat_environments"]]
    cut = finished_prompts if finished_prompts else None
    expected = [[0], [0]]
    expected[finished_repeats] = [0, cut] if cut else [0]
    assert segments == expected
    identical = resumed["summary"]["identical_to_engine_ar"]["engine:tr:auto"]
    assert identical["identical"] == PROMPTS


def test_a_checkpoint_of_other_settings_is_refused_and_kept(tmp_path):
    class Args:
        pass

    a = Args()
    for k, v in dict(model="smollm2-135m", dtype=None, benches="humaneval", data_dir="d", limit=2).items():
        setattr(a, k, v)
    for k in ("chat_template", "methods", "hf", "threads", "latency", "calibration_repeats"):
        setattr(a, k, None)
    a.prepack, a.compile = "auto", False
    for k, v in dict(max_new_tokens=16, temperature=0.0, top_p=1.0, top_k=0, seed=0).items():
        setattr(a, k, v)
    prompts = [("humaneval", "HumanEval/0"), ("humaneval", "HumanEval/1")]
    path = BenchCheckpoint.path_for(tmp_path / "b.json")
    BenchCheckpoint(BenchCheckpoint.fingerprint_of(a, prompts, "abc", VERSIONS)).save(path)

    assert BenchCheckpoint.load(path, BenchCheckpoint.fingerprint_of(a, prompts, "abc", VERSIONS)).runs == []
    a.limit, a.prepack = 3, "false"
    with pytest.raises(CheckpointMismatch) as err:
        BenchCheckpoint.load(path, BenchCheckpoint.fingerprint_of(a, prompts, "def", VERSIONS))
    message = str(err.value)
    assert (
        "limit: checkpoint 2 vs now 3" in message
        and "code: checkpoint 'abc' vs now 'def'" in message
        and "--fresh" in message
    )
    assert "prepack: checkpoint 'auto' vs now 'false'" in message
    assert path.is_file()


def test_the_measuring_code_digest_follows_the_code_and_nothing_else(tmp_path):
    (tmp_path / "goose" / "engine").mkdir(parents=True)
    (tmp_path / "conf").mkdir()
    engine = tmp_path / "goose" / "engine" / "step.py"
    engine.write_text("x = 1\n")
    (tmp_path / "conf" / "method.yaml").write_text("b: 4\n")
    before = measuring_code_digest(tmp_path)

    (tmp_path / "README.md").write_text("a figure\n")
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "plot.py").write_text("print(1)\n")
    assert measuring_code_digest(tmp_path) == before

    engine.write_text("x = 2\n")
    assert measuring_code_digest(tmp_path) != before
    engine.write_text("x = 1\n")
    (tmp_path / "conf" / "method.yaml").write_text("b: 8\n")
    assert measuring_code_digest(tmp_path) != before


def test_show_partial_without_a_checkpoint_says_so(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--out", str(tmp_path / "none.json"), "--show-partial"])
    assert "no finished repeats to show" in str(err.value) and "none.json.partial" in str(err.value)
    with pytest.raises(SystemExit):
        bench.parse_args(["--show-partial"])
    assert "give --out" in capsys.readouterr().err


def test_an_unknown_transformers_contender_is_refused_before_loading_anything(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--hf", "greedy,beam"])
    assert "unknown --hf contender 'beam'; choose from greedy, pld" in capsys.readouterr().err
