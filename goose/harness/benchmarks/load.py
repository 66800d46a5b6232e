"""A benchmark's prompts: `load_benchmark` reads its spec (goose.harness.benchmarks.spec), fetches its
records from ``source`` (goose.harness.benchmarks.sources: the Hub, a data file inside an installed PyPI
package, or a local file; ``resolve_source`` picks one for "auto" and reports it) and turns them into prompts
with ``prompt_template`` or ``prompt_field`` after ``filter`` (goose.harness.benchmarks.prompts). The paper's
five benchmarks give exactly the prompts of Goose §5 (docs/paper.md; tests/harness/test_benchmarks.py pins
their hash). MT-Bench has no Hub entry: the Hub mirror renames its fields and ids. No torch or ``datasets``
at import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from goose.harness.benchmarks.prompts import render_prompts
from goose.harness.benchmarks.sources import load_records, resolve_source
from goose.harness.benchmarks.spec import FIELD_CHECKS, BenchmarkError, BenchmarkSpec, Prompt, bench_spec


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
