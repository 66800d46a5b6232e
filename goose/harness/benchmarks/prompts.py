"""A benchmark's records as prompts: the filter, the id and the text of each record as its
`BenchmarkSpec` says (``filter``, ``id_field``, ``prompt_field`` or ``prompt_template``), with errors
that name the setting, the record and the fields it has. No torch or ``datasets`` at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goose.harness.benchmarks.spec import BenchmarkError, BenchmarkSpec, Prompt


def render_prompts(spec: BenchmarkSpec, records: list[Any], where: str) -> list[Prompt]:
    """The prompts of `records` (read from `where`, named in errors), in order, after the filter."""
    if spec.prompt_template is None and spec.prompt_field is None:
        have = ", ".join(map(str, records[0])) if records and isinstance(records[0], Mapping) else "?"
        raise BenchmarkError(
            f"Benchmark {spec.name!r} does not say how a record becomes a prompt: set "
            "bench.prompt_field=<field> (the whole prompt is that field) or "
            f"bench.prompt_template='... {{field}} ...'. The records of {where} have the fields: {have}."
        )
    prompts, first_index = [], {}
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise BenchmarkError(
                f"Benchmark {spec.name!r}: record {index} of {where} is a {type(record).__name__}, not "
                f"a record with fields; expected a file of records{spec.origin_note}."
            )
        if spec.filter is not None and not _keeps(spec, index, record, where):
            continue
        prompt = _prompt(spec, index, record, where)
        if prompt.prompt_id in first_index:
            raise BenchmarkError(
                f"Benchmark {spec.name!r}: bench.id_field = {spec.id_field!r} gives the id "
                f"{prompt.prompt_id!r} to records {first_index[prompt.prompt_id]} and {index} of "
                f"{where}; ids key the result rows, so they must be unique. Set bench.id_field to a "
                "field with unique values, or to null (the record's index)."
            )
        first_index[prompt.prompt_id] = index
        prompts.append(prompt)
    if not prompts:
        why = (
            f"the filter bench.filter = {spec.filter.describe()} keeps none of its {len(records)} records"
            if records and spec.filter is not None
            else "it holds no records"
        )
        raise BenchmarkError(
            f"No {spec.name!r} prompts in {where}: {why}; expected a file like {spec.example}{spec.origin_note}."
        )
    return prompts


def _missing(
    spec: BenchmarkSpec, setting: str, value: Any, field: str, index: int, record: Mapping, where: str
) -> BenchmarkError:
    have = ", ".join(map(str, record)) or "none"
    return BenchmarkError(
        f"Benchmark {spec.name!r}: {setting} = {value!r} reads the field {field!r}, but record {index} "
        f"of {where} has no such field; the records have the fields: {have}. Name one of these in "
        f"{setting} (e.g. bench.prompt_field=<field>, or bench.prompt_template='... {{<field>}} ...'), "
        f"or pass a file in this benchmark's format{spec.origin_note}."
    )


def _keeps(spec: BenchmarkSpec, index: int, record: Mapping, where: str) -> bool:
    f = spec.filter
    assert f is not None
    if f.field not in record:
        raise _missing(spec, "bench.filter.field", f.field, f.field, index, record, where)
    value = record[f.field]
    if f.values is not None and str(value) not in {str(v) for v in f.values}:
        return False
    if f.min is None and f.max is None:
        return True
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BenchmarkError(
            f"Benchmark {spec.name!r}: bench.filter = {f.describe()} compares {f.field!r} with numbers, "
            f"but record {index} of {where} has {f.field} = {value!r}."
        ) from None
    return (f.min is None or number >= f.min) and (f.max is None or number <= f.max)


def _prompt(spec: BenchmarkSpec, index: int, record: Mapping, where: str) -> Prompt:
    if spec.id_field is None:
        prompt_id = str(index)
    elif spec.id_field in record:
        prompt_id = str(record[spec.id_field])
    else:
        raise _missing(spec, "bench.id_field", spec.id_field, spec.id_field, index, record, where)
    if spec.prompt_field is not None:
        if spec.prompt_field not in record:
            raise _missing(
                spec, "bench.prompt_field", spec.prompt_field, spec.prompt_field, index, record, where
            )
        return Prompt(prompt_id, record[spec.prompt_field])
    try:
        return Prompt(prompt_id, spec.prompt_template.format_map(record))  # type: ignore[union-attr]
    except KeyError as exc:
        raise _missing(
            spec, "bench.prompt_template", spec.prompt_template, exc.args[0], index, record, where
        ) from None
    except (IndexError, TypeError, AttributeError, ValueError) as exc:
        raise BenchmarkError(
            f"Benchmark {spec.name!r}: bench.prompt_template = {spec.prompt_template!r} cannot be filled "
            f"from record {index} of {where} ({type(exc).__name__}: {exc}); its fields are: "
            f"{', '.join(map(str, record))}."
        ) from None
