"""The result row: one JSON line per generation (a prompt, or one sample of it, of one cell), typed.

`ResultRow` names every field a row can hold, with its type, its group and its meaning; docs/records.md
is generated from it (`python -m goose.records.schema_doc`). Rows are written by
`goose.records.results.append_row` (which stamps `schema_version`, and checks a typed row with
`ResultRow.check`) and read by `goose.records.results.read_appended` / `read_rows` (which migrate older rows
with `migrate_row`), and nowhere else. The runner builds each row as a `ResultRow`; readers keep plain dicts
(analysis turns them into DataFrames); `ResultRow.from_dict` gives the typed view.

Versions:
- 0: rows without `schema_version`. Those written before prompts could be put in a chat template lack
  `chat_template` (they were raw); those written before sampling lack `temperature`, `top_p`, `top_k`,
  `sample_seed` (they were greedy).
- 1: every row carries `schema_version` and every cell-key field (`CELL_FIELDS`) of its time.
- 2: `verifier` (sampling.verifier: how drafts that carry their proposal q were verified) joins the cell key;
  rows before it were verified as `auto` does. Later in version 2, `prompt_format` (a base model's plain
  instruction format, goose.harness.chat) joins the cell key; rows without it had none (None): a version-2
  row that lacks it keys as None, the value every row had before, so no rewrite is needed.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 2

# What identifies a row: a re-run of the same cell, prompt and sample has the same values here.
CELL_FIELDS = (
    "model",
    "bench",
    "method",
    "config_hash",
    "prompt_id",
    "max_new_tokens",
    "dtype",
    "chat_template",
    "prompt_format",
    "temperature",
    "top_p",
    "top_k",
    "verifier",
    "sample_seed",
)

# Versions 0 and 1 -> 2: the values the fields added since the first rows take in rows that lack them.
V0_DEFAULTS: dict[str, Any] = {
    "chat_template": False,
    "prompt_format": None,
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "sample_seed": None,
    "verifier": "auto",
}

GROUPS = {
    "identity": "What the row is (the cell key: `CELL_FIELDS`, plus the config itself)",
    "prompt": "The prompt and the provenance of its generation",
    "environment": "Where and with what it ran",
    "measured": "What the generation measured",
    "acceptance": "Acceptance by tree depth and sibling rank (goose.records.acceptance)",
    "verdict": "Losslessness: the output against the AR reference of the same prompt and sample",
    "run_state": "State a drafter carries across the prompts of a cell (goose.harness.run_state)",
    "status": "Whether the generation succeeded",
}


class _Absent:
    """The value of a field the row does not have (most fields exist only in some rows)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


# Which rows must have a field (`ResultRow.check`): every row, the ok ones, the failed ones; "" none.
NEEDS = ("every", "ok", "failed")


class RowError(ValueError):
    """A row that is not what its type says: a field of the wrong type, or a needed field missing."""


def _f(group: str, doc: str, key: bool = False, need: str = "") -> Any:
    """A documented field; a cell-key field is needed in every row."""
    need = need or ("every" if key else "")
    return field(default=ABSENT, metadata={"group": group, "doc": doc, "key": key, "need": need})


@dataclass(kw_only=True)
class ResultRow:
    """One result row. Every field is optional in the type (failed rows have no measurements, AR rows no
    divergence); which fields a row has follows from its group's rules in docs/records.md, and `check` holds a
    row to its fields' types and needs. Fields are declared in the order a row is written (its JSON keys), so
    the groups interleave. Mutable: the runner fills a row in as its generation goes."""

    schema_version: int = _f("identity", "Version of this schema the row follows (absent: 0).", need="every")
    model: str = _f(
        "identity", "Model label (conf/model/<name>.yaml; `<name>-random` for random weights).", True
    )
    bench: str = _f("identity", "Benchmark name (conf/bench/<name>.yaml).", True)
    method: str = _f(
        "identity", "Method name; `<name>_auto` under budget=auto; `ar` for the AR reference.", True
    )
    method_config: dict = _f(
        "identity", "The drafter's full config (`Drafter.config()`), as logged.", need="every"
    )
    config_hash: str = _f("identity", "sha256 (12 hex digits) of the sorted JSON of `method_config`.", True)
    max_new_tokens: int = _f("identity", "Generation length limit.", True)
    dtype: str = _f("identity", "The model's dtype (float32, bfloat16, ...).", True)
    chat_template: bool = _f("identity", "The prompt was put in the tokenizer's chat template.", True)
    prompt_format: str | None = _f(
        "identity",
        "A base model's plain instruction format the prompt was put in (its template; model.base_prompt_format"
        " under bench.chat_template=auto on a chat benchmark), else None.",
        True,
    )
    temperature: float = _f("identity", "Sampling temperature (0: greedy).", True)
    top_p: float = _f("identity", "Nucleus sampling mass (1: off).", True)
    top_k: int = _f("identity", "Top-k sampling (0: off).", True)
    verifier: str = _f(
        "identity", "sampling.verifier: auto, rrs, rrs_iid, traversal, block or gbv (drafts with q).", True
    )
    prompt_id: str = _f("identity", "The benchmark's id of the prompt.", True)
    sample_idx: int | None = _f("identity", "Which sample of the prompt (None when greedy).", need="every")
    sample_seed: int | None = _f("identity", "The sample's seed (None when greedy).", True)

    prompt_tokens: int = _f("prompt", "Prompt length in tokens (after the chat template, if any).")
    prompt_hash: str | None = _f("prompt", "sha256 of the prompt text as the benchmark gave it.")
    prompt_ids_hash: str = _f("prompt", "sha256 of the token ids the model was fed.")
    seeds: dict = _f("prompt", "{run, sample, sequence}: the seeds this generation used.")

    hardware: dict = _f("environment", "cpu, cpu_count, cpu_capability, onednn_bf16, torch_threads, gpu.")
    versions: dict = _f("environment", "python, torch, transformers.")
    git_commit: str = _f("environment", "Commit of the code (`-dirty` with local changes).")
    code_state: str = _f(
        "environment", "The commit, with a digest of local changes (goose.records.code_state): one per file."
    )
    session_id: str = _f("environment", "Id of the process that wrote the row.")
    bench_source: str = _f("environment", "Where the prompts came from: hub, local or file.")
    experiment: str | None = _f("environment", "The experiment preset (`adhoc` for none).")
    forward: str = _f("environment", "The engine's forward backend (e.g. lean+prepack).")
    budget_latency: dict = _f(
        "environment",
        "budget=auto: the latency table used {source, sizes, seconds; kv_len, kv_seconds at more KV lengths}; "
        "source: cache (loaded from `cache`), calibrated (measured at start-up; saved to `cache` unless "
        "null) or a budget_profile path; `fingerprint` (goose.engine.budget.latency_cache) and, where a cache "
        "file was not used or not written, `cache_rejected` / `cache_not_saved`.",
    )
    repeat: int | None = _f(
        "environment", "`make bench`: which repeat of its interleaved protocol (None: the reference pass)."
    )
    bench_protocol: dict = _f("environment", "`make bench`: its protocol (repeats, order, threads, ...).")
    reference_pass: bool = _f(
        "environment", "`make bench`: engine AR's untimed reference run of the prompt (repeat None)."
    )
    random_weights: bool = _f(
        "environment", "The model has random weights (model.init=random: timing only, no acceptance)."
    )
    weights: dict = _f("environment", "Random weights: how they were made (init, shape, tokenizer, sizes).")
    chat_template_sha: str | None = _f(
        "prompt", "sha256 of the chat template the prompt was put in, else None."
    )
    allow_mixed_code: bool = _f(
        "environment", "Written under allow_mixed_code: its results file may hold rows of other code."
    )
    run_state_prompts: int = _f("run_state", "Prompts whose runs shaped the drafter's state before this one.")
    run_state_restored: bool = _f("run_state", "That state was restored from a checkpoint (a resumed cell).")
    timestamp: float = _f("environment", "Unix time the generation started.")

    generated_tokens: int = _f("measured", "Tokens generated.", need="ok")
    forward_calls: int = _f("measured", "Target forward passes, the prefill counted as one.")
    tau: float = _f("measured", "τ: tokens per verification step (generated_tokens / forward_calls).")
    wall_time_s: float = _f("measured", "Wall time of the generation, prefill included.", need="ok")
    tokens_per_s: float = _f("measured", "generated_tokens / wall_time_s.", need="ok")
    prefill_s: float = _f("measured", "Seconds in the prefill.")
    draft_s: float = _f("measured", "Seconds drafting (the drafter's `propose`).")
    verify_s: float = _f("measured", "Seconds verifying (= forward_s + walk_s).")
    update_s: float = _f("measured", "Seconds updating the drafter and the cache after verification.")
    forward_s: float = _f("measured", "Seconds in the verification forwards.")
    walk_s: float = _f("measured", "Seconds walking the tree for the accepted path.")
    offered: dict = _f("measured", "Draft tokens offered per source (spine, branch, ...), summed over steps.")
    accepted: dict = _f("measured", "Draft tokens accepted per source, summed over steps.")
    routes: dict = _f("measured", "Steps per drafting route.")
    step_accepted: list = _f("measured", "Draft tokens accepted at each step.")
    step_tree_size: list = _f("measured", "Tree size (nodes) verified at each step.")
    depth_offered: list = _f("acceptance", "Draft nodes offered at each depth (1, 2, ...).")
    depth_accepted: list = _f("acceptance", "Draft nodes accepted at each depth.")
    rank_offered: list = _f("acceptance", "Draft nodes offered at each sibling rank (0: the first child).")
    rank_accepted: list = _f("acceptance", "Draft nodes accepted at each sibling rank.")
    drafter_stats: dict = _f("measured", "The drafter's own counters.")
    stop: str = _f("measured", "Why generation stopped (eos, max_new_tokens, context).")
    graph_captures: int = _f("measured", "CUDA graphs captured during the generation.")
    graph_capture_s: float = _f("measured", "Seconds spent capturing them.")
    output_ids: list = _f("measured", "The generated token ids.", need="ok")
    repeated_4gram_share: float = _f(
        "measured", "Share of the output's 4-grams that occurred earlier in it (goose.records.degenerate)."
    )
    hit_max_new_tokens: bool = _f("measured", "The generation ran to max_new_tokens.")
    degenerate: bool = _f(
        "measured", "hit_max_new_tokens and repeated_4gram_share > 0.5: a loop (goose.records.degenerate)."
    )
    sample_tree: dict | None = _f(
        "measured", "The largest of the first trees: tokens, parents, sources, depths, accepted."
    )
    exact_steps: int = _f(
        "acceptance",
        "Steps whose draft carried q (sampled drafts): those the exact_* fields are summed over.",
    )
    exact_accepted: dict = _f(
        "acceptance",
        "Per verifier exact on each such step's tree, Σ over those steps of its exact E[accepted] on that very "
        "tree (goose.engine.core.verify.expected): verifiers compared on identical drafts, without sampling "
        "noise.",
    )
    exact_reach: dict = _f(
        "acceptance",
        "Per verifier, Σ over those steps of P(accepted ≥ d) for d = 1, 2, ...: efficiency by depth.",
    )

    lossless: bool | None = _f(
        "verdict", "Output equals the AR reference (None: not checkable, see below).", need="ok"
    )
    first_diff: int | None = _f("verdict", "Index of the first differing token.")
    diff_tokens: list = _f("verdict", "[AR's token, this row's token] at first_diff.")
    diff_margin: float | None = _f("verdict", "Top-2 margin of a teacher-forced forward at first_diff.")
    diff_top2: list = _f("verdict", "The top-2 tokens there.")
    near_tie: bool | None = _f("verdict", "The margin is within near_tie_threshold (a near-tie, not a bug).")
    near_tie_threshold: float = _f(
        "verdict", "2 ulps of the top logit in the dtype, ≥ 1e-4 (÷ T when sampling)."
    )
    lossless_check: str = _f(
        "verdict", "`distribution` for drafters that sample their drafts (lossless None)."
    )
    same_as_ar: bool | None = _f("verdict", "Such a drafter's output happened to equal AR's.")
    lossless_error: str = _f("verdict", "Why lossless is None (the AR run of this prompt failed).")

    status: str = _f("status", "ok or failed.", need="every")
    error: str = _f("status", "A failed row: the exception.", need="failed")
    traceback: str = _f("status", "A failed row: its traceback.")

    extra: dict = field(default_factory=dict, metadata={"group": "", "doc": "", "key": False})

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> ResultRow:
        """The typed view of a row (migrated first); fields the schema does not name go to `extra`."""
        row = migrate_row(row)
        names = field_names()
        return cls(
            **{k: v for k, v in row.items() if k in names},
            extra={k: v for k, v in row.items() if k not in names},
        )

    def to_dict(self) -> dict[str, Any]:
        """The row as written: the fields it has, then `extra`."""
        out = {f.name: getattr(self, f.name) for f in schema() if getattr(self, f.name) is not ABSENT}
        return {**out, **self.extra}

    def fill(self, fields: Mapping[str, Any], strict: bool = True) -> None:
        """Set the named fields, in order (a later value wins, as in a dict update). A name the schema does not
        know raises RowError, or goes to `extra` when `strict` is False (fields a caller adds to every row)."""
        names = field_names()
        for name, value in fields.items():
            if name in names:
                setattr(self, name, value)
            elif strict:
                raise RowError(f"result row: no field {name!r} in the schema (goose.records.row.ResultRow)")
            else:
                self.extra[name] = value

    def get(self, name: str, default: Any = None) -> Any:
        """A field's value (or an `extra` one) like `dict.get`, so that readers of dict rows read this one too."""
        value = getattr(self, name, ABSENT) if name in field_names() else self.extra.get(name, ABSENT)
        return default if value is ABSENT else value

    def check(self) -> None:
        """Raise RowError, naming the field, unless every field the row has is of its type (an int passes for
        a float, a bool for neither) and it has the fields its status needs (`NEEDS`: every row, an ok one, a
        failed one). `append_row` checks a typed row before writing it."""
        hints = _hints()
        for f in schema():
            value, need = getattr(self, f.name), f.metadata["need"]
            if value is ABSENT:
                if need == "every" or (need and need == self.status):
                    which = "every row" if need == "every" else f"a row of status {need!r}"
                    raise RowError(f"result row: field {f.name!r} is missing ({which} has it)")
            elif not _matches(value, hints[f.name]):
                shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
                raise RowError(
                    f"result row: field {f.name!r} = {shown} ({type(value).__name__}) is not {_type_name(hints[f.name])}"
                )


@functools.cache
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(ResultRow)


def _matches(value: Any, hint: Any) -> bool:
    """`value` is of the field type `hint` (int, float, str, bool, dict, list, or a union of them with None)."""
    if typing.get_args(hint):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, (int, float))
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    args = typing.get_args(hint) or (hint,)
    return " | ".join("None" if a is type(None) else a.__name__ for a in args)


@functools.cache
def schema() -> tuple[dataclasses.Field, ...]:
    """The row's documented fields, in order (not `extra`)."""
    return tuple(f for f in dataclasses.fields(ResultRow) if f.name != "extra")


@functools.cache
def field_names() -> frozenset[str]:
    return frozenset(f.name for f in schema())


def migrate_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row in the current schema (`SCHEMA_VERSION`): a row without `schema_version` is version 0; an
    older row gets the fields `V0_DEFAULTS` names that it lacks. Idempotent; a current row is returned as is, an
    older one as a new dict with `schema_version` first and the other fields in their order."""
    version = row.get("schema_version", 0)
    if version == SCHEMA_VERSION:
        return row
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(
            f"a result row of schema_version {version!r}: this code reads versions up to {SCHEMA_VERSION} "
            "(written by a newer goose-bench?)"
        )
    out = {"schema_version": SCHEMA_VERSION, **{k: v for k, v in row.items() if k != "schema_version"}}
    for name, value in V0_DEFAULTS.items():
        out.setdefault(name, value)
    return out


def unknown_fields(row: dict[str, Any]) -> list[str]:
    """Fields of `row` that the schema does not document."""
    names = field_names()
    return [k for k in row if k not in names]
