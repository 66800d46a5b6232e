"""Reading results/ the same way for every figure and table (no torch).

`load_rows` turns every JSONL row under a results directory into one DataFrame row: failed rows are
dropped (counted in `df.attrs`), a re-run of the same cell key keeps its first row, the per-source
counts are flattened (`offered_spine`, `accepted_branch`, ...), and every row gets a readable
`label` (the method's name, plus the hyperparameters that differ from the method's reference
config, e.g. "Goose B=80"). `cells` aggregates per cell with `goose.records.metrics.cell_summary`:
τ as a ratio of sums, tokens/s, speedup over AR on the prompts both completed, p_s, p_t, their
ratio, the lossless share.

A cell is (model, bench, method, config_hash, max_new_tokens, dtype, chat_template, prompt_format):
max_new_tokens, dtype, chat_template (prompts in the chat template, goose.harness.chat; rows
without the field are raw) and prompt_format (a base model's plain instruction format; rows without it
had none) are part of a row's identity (`goose.records.results.CELL_FIELDS`), so runs of different
lengths or prompt forms never pool. Comparisons (speedup, τ of several methods) happen inside a
*setting* (model, bench, max_new_tokens, dtype, chat_template, prompt_format). Every row also gets the
`degenerate` flags of goose.records.degenerate (computed from `output_ids` where an older row lacks them,
before that column is dropped).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.names import MODEL_NAMES, SYMBOLS, format_value, method_name, model_name, order_key
from goose.method.config import GooseConfig
from goose.records.degenerate import degenerate_fields
from goose.records.metrics import cell_summary, per_prompt_speedups
from goose.records.results import CELL_FIELDS, cell_key, config_hash, read_rows

SAMPLING_KEYS = ["temperature", "top_p", "top_k"]
CELL_KEYS = [
    "model",
    "bench",
    "method",
    "config_hash",
    "max_new_tokens",
    "dtype",
    "chat_template",
    "prompt_format",
    *SAMPLING_KEYS,
    "verifier",  # sampling.verifier: not a setting key (AR, the reference of every verifier, runs as auto)
]
SETTING_KEYS = ["model", "bench", "max_new_tokens", "dtype", "chat_template", "prompt_format", *SAMPLING_KEYS]

# Columns of a row that analysis never needs (large lists) and are not kept in memory.
_DROP = ("output_ids", "traceback", "step_tree_size")


def _canonical(v: Any) -> Any:
    return json.dumps(v, sort_keys=True, default=str)


def _read(results: str | Path | Iterable[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(usable rows, failed rows whose cell key has no ok row); see `load_rows`."""
    raw = read_rows(results)
    ok: dict[tuple, dict[str, Any]] = {}
    failed: dict[tuple, dict[str, Any]] = {}
    n_dup = n_failed = 0
    for r in raw:
        key = cell_key(r)
        if r.get("status", "ok") != "ok":
            n_failed += 1
            failed.setdefault(key, r)
            continue
        if key in ok:
            n_dup += 1
            continue
        flags = degenerate_fields(r) if "degenerate" not in r else {}  # rows written before the fields
        ok[key] = {**flags, **{k: v for k, v in r.items() if k not in _DROP}}
    records = []
    for r in ok.values():
        for kind in ("offered", "accepted"):
            counts = r.get(kind) or {}
            r[kind] = {s: int(counts.get(s, 0)) for s in ("spine", "branch")}
            for s in ("spine", "branch"):
                r[f"{kind}_{s}"] = r[kind][s]
        r.setdefault("experiment", None)
        r.setdefault("method_config", {})
        hw = r.get("hardware") or {}
        r["device"] = hw.get("gpu") or (
            f"CPU ({hw.get('cpu', '?')}, {hw.get('cpu_count', '?')} cores)" if hw else "?"
        )
        records.append(r)
    columns = CELL_KEYS + [
        "prompt_id",
        "generated_tokens",
        "forward_calls",
        "wall_time_s",
        "experiment",
        "device",
    ]
    df = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=columns)
    for c in columns:
        if c not in df.columns:
            df[c] = None
    _label(df)
    df.attrs.update({"n_failed_rows": n_failed, "n_duplicates": n_dup})
    fail_df = pd.DataFrame.from_records(
        [
            {**{f: r.get(f) for f in CELL_FIELDS}, "error": r.get("error")}
            for k, r in failed.items()
            if k not in ok
        ],
        columns=list(CELL_FIELDS) + ["error"],
    )
    return df, fail_df


def load_rows(results: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """All usable rows under `results` (a directory searched recursively for *.jsonl, a file, or
    a list of files), one DataFrame row each.

    Kept: rows with status "ok", the first row of each cell key (`goose.records.results.CELL_FIELDS`).
    `df.attrs` counts what was dropped: "n_failed_rows", "n_duplicates" (`load` also keeps the
    failed rows themselves). Added columns: offered_/accepted_ spine/branch, `device`, `label`,
    `is_reference` (the row uses its method's reference config), `varied` (dict of the
    hyperparameters that differ from that reference).
    """
    return _read(results)[0]


def reference_config(df: pd.DataFrame, method: str) -> dict[str, Any] | None:
    """The config a method's rows are compared against: for Goose the paper's defaults
    (`GooseConfig()`) when some rows use them, else the config with the most rows."""
    sub = df[df["method"] == method]
    if sub.empty:
        return None
    if method == "goose":
        default = GooseConfig().as_dict()
        if (sub["config_hash"] == config_hash(default)).any():
            return default
    counts = Counter(sub["config_hash"])
    best = max(counts, key=lambda h: (counts[h], -list(sub["config_hash"]).index(h)))
    return sub.loc[sub["config_hash"] == best, "method_config"].iloc[0]


def _label(df: pd.DataFrame) -> None:
    """Add `label`, `is_reference` and `varied` columns in place. A hyperparameter that only one
    of the two configs names (a field added or removed between code versions) is not counted as
    varied: the config hash still tells the two cells apart."""
    if df.empty:
        for c in ("label", "is_reference", "varied"):
            df[c] = pd.Series(dtype=object)
        return
    labels, refs, varied = [], [], []
    references = {m: reference_config(df, m) for m in df["method"].unique()}
    ref_hash = {m: config_hash(c) for m, c in references.items() if c is not None}
    chats = df["chat_template"] if "chat_template" in df else [False] * len(df)
    formats = df["prompt_format"] if "prompt_format" in df else [None] * len(df)
    for method, cfg, h, chat, form in zip(
        df["method"], df["method_config"], df["config_hash"], chats, formats, strict=True
    ):
        ref = references.get(method) or {}
        cfg = cfg or {}
        diff = {
            k: cfg.get(k) for k in sorted(set(cfg) & set(ref)) if _canonical(cfg[k]) != _canonical(ref[k])
        }
        # The paper's setting is raw prompts: chat-templated or formatted rows are never the reference cells.
        formatted = isinstance(form, str)
        is_ref = h == ref_hash.get(method) and not bool(chat) and not formatted
        name = method_name(method)
        if bool(chat) or formatted:
            name += " [chat]" if bool(chat) else " [base format]"
        elif not is_ref:
            parts = [f"{SYMBOLS.get(k, k)}={format_value(v)}" for k, v in diff.items()]
            name = f"{name} " + ", ".join(parts) if parts else f"{name} [{h}]"
        labels.append(name)
        refs.append(bool(is_ref))
        varied.append(diff)
    df["label"] = labels
    df["is_reference"] = refs
    df["varied"] = varied


def common_prompts(df: pd.DataFrame) -> pd.DataFrame:
    """`df` restricted, per setting (model, bench, max_new_tokens, dtype), to the prompts that
    every cell of that setting present in `df` completed (docs/paper.md: only prompts every compared
    method completed count). Filter `df` to the compared cells first."""
    if df.empty:
        return df
    keep = []
    for _, g in df.groupby(SETTING_KEYS, sort=False, dropna=False):
        sets = [set(c["prompt_id"]) for _, c in g.groupby(["method", "config_hash"], sort=False)]
        shared = set.intersection(*sets)
        keep.append(g[g["prompt_id"].isin(shared)])
    return pd.concat(keep)


def _group_key(key: tuple) -> tuple:
    """A groupby key with its missing values (NaN, e.g. a row's prompt_format None) as None, so that the
    keys of two groupbys compare equal (NaN != NaN)."""
    return tuple(None if isinstance(v, float) and v != v else v for v in key)


def _ar_rows(df: pd.DataFrame) -> dict[tuple, list[dict[str, Any]]]:
    """AR rows per setting (first per prompt)."""
    ar = df[df["method"] == "ar"]
    out: dict[tuple, list[dict[str, Any]]] = {}
    for key, g in ar.groupby(SETTING_KEYS, sort=False, dropna=False):
        out[_group_key(key)] = list(g.drop_duplicates(["prompt_id", "sample_seed"]).to_dict("records"))
    return out


def _same_session(rows: list[dict[str, Any]], ar_rows: list[dict[str, Any]] | None) -> float:
    ar = {r["prompt_id"]: r.get("session_id") for r in ar_rows or []}
    shared = [r for r in rows if r["prompt_id"] in ar]
    if not shared:
        return float("nan")
    return sum(r.get("session_id") == ar[r["prompt_id"]] for r in shared) / len(shared)


def cells(df: pd.DataFrame, ar_source: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell with `goose.records.metrics.cell_summary`'s fields plus label, config and the
    per-prompt speedup quartiles (speedup_q25, speedup_median, speedup_q75) and
    `ar_same_session`: the share of the prompts compared with AR whose AR row was timed in the
    same run (docs/paper.md: same machine, same run; a share below 1 means a resumed run).

    The speedup uses the AR rows of `ar_source` (default: `df`) of the same setting, restricted
    to the prompts both completed. Pass `common_prompts(...)` of the compared cells as `df` to
    compare several methods on the same prompts.
    """
    ar_source = df if ar_source is None else ar_source
    ar = _ar_rows(ar_source)
    out = []
    if df.empty:
        return pd.DataFrame(columns=CELL_KEYS + ["label", "tau", "speedup", "prompts"])
    for key, g in df.groupby(CELL_KEYS, sort=False, dropna=False):
        rows = g.to_dict("records")
        setting = _group_key(tuple(key[CELL_KEYS.index(k)] for k in SETTING_KEYS))
        ar_rows = ar.get(setting)
        s = cell_summary(rows, ar_rows)
        sp = pd.Series(per_prompt_speedups(rows, ar_rows) if ar_rows else [], dtype=float)
        first = rows[0]
        out.append(
            {
                **dict(zip(CELL_KEYS, key, strict=True)),
                "label": first["label"],
                "is_reference": first["is_reference"],
                "varied": first["varied"],
                "method_config": first["method_config"],
                "experiment": ",".join(sorted({str(r.get("experiment")) for r in rows})),
                "device": ",".join(sorted({str(r.get("device")) for r in rows})),
                "sessions": len({r.get("session_id") for r in rows}),
                "speedup_q25": sp.quantile(0.25) if len(sp) else float("nan"),
                "speedup_median": sp.median() if len(sp) else float("nan"),
                "speedup_q75": sp.quantile(0.75) if len(sp) else float("nan"),
                "ar_same_session": _same_session(rows, ar_rows),
                **s,
            }
        )
    return pd.DataFrame(out)


@dataclass
class Results:
    """Everything the scripts read: the usable rows and the directory they came from."""

    rows: pd.DataFrame
    failed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(CELL_FIELDS) + ["error"]))
    source: str = ""
    chat_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # prompts in the chat template
    # prompts in a base model's plain instruction format (prompt_format; goose.harness.chat)
    formatted_rows: pd.DataFrame = field(default_factory=pd.DataFrame)
    sampled_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # temperature > 0 (raw prompts)
    # The results root beside the rows (results/): the raw records of the measurement scripts live
    # under it (bench/, forward_speed/, cost_curve/); by default the parent of `source`.
    records: Path | None = None

    def records_dir(self) -> Path:
        """Where the raw measurement records are: `records`, else the parent of `source`."""
        return Path(self.records) if self.records is not None else Path(self.source or ".").parent

    def reference(self, methods: Iterable[str] | None = None) -> pd.DataFrame:
        """Rows of the methods' reference configs (the main-grid cells), optionally only `methods`."""
        df = self.rows
        if df.empty:
            return df
        df = df[df["is_reference"].astype(bool)]
        if methods is not None:
            df = df[df["method"].isin(list(methods))]
        return df

    def scope(self) -> str:
        """What our runs are, in words (models, device, prompts, lengths), for captions."""
        df = self.rows
        if df.empty:
            return "No usable result rows"
        models = ", ".join(model_name(m) for m in order_key(df["model"], list(MODEL_NAMES)))
        devices = ", ".join(sorted(set(df["device"].astype(str))))
        dtypes = ", ".join(sorted(set(df["dtype"].astype(str))))
        n_prompts = df.groupby(["model", "bench"])["prompt_id"].nunique()
        lengths = ", ".join(str(x) for x in sorted(set(df["max_new_tokens"].dropna().astype(int))))
        return (
            f"Our runs: {models} on {devices}, {dtypes}; up to {n_prompts.max()} prompts per bench, "
            f"max_new_tokens {lengths}"
        )


def load(results: str | Path, records: str | Path | None = None) -> Results:
    """The usable rows, the failed ones and the source directory, for the scripts.

    `rows` holds the paper's setting, greedy decoding of raw prompts (chat_template false, no
    prompt_format, temperature 0); rows whose prompts were put in a chat template are kept apart in
    `chat_rows`, those in a base model's plain instruction format in `formatted_rows`, and sampled raw
    rows (temperature > 0) in `sampled_rows`, so that no figure mixes prompt forms or decoding modes
    (analysis/chat_template.py and analysis/sampling.py compare them)."""
    rows, failed = _read(results)
    if rows.empty:
        return Results(rows=rows, failed=failed, source=str(results), records=records)
    chat = rows["chat_template"].astype(bool)
    formatted = rows["prompt_format"].notna()
    sampled = rows["temperature"].astype(float) > 0.0
    return Results(
        rows=rows[~chat & ~formatted & ~sampled].reset_index(drop=True),
        failed=failed,
        source=str(results),
        chat_rows=rows[chat].reset_index(drop=True),
        formatted_rows=rows[formatted & ~chat].reset_index(drop=True),
        sampled_rows=rows[sampled & ~chat & ~formatted].reset_index(drop=True),
        records=records,
    )
