"""W&B logging of one run (one model × bench × method cell): the resolved config and `config_hash`, the
summary of `goose.records.metrics.cell_summary` (NaN as null), a per-prompt table, and the
cell's acceptance (histogram; per-position, depth and sibling-rank curves). Runs are grouped by
experiment, with job_type = method and tags model, bench, method. Offline by default (`wandb sync
<out_dir>/wandb/offline-run-*` later); a W&B failure does not fail the job.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

TABLE_KEY = "per_prompt"
PROMPT_COLUMNS = (
    "prompt_id",
    "method",
    "status",
    "prompt_tokens",
    "generated_tokens",
    "forward_calls",
    "tau",
    "tokens_per_s",
    "wall_time_s",
    "offered_spine",
    "accepted_spine",
    "offered_branch",
    "accepted_branch",
    "p_s",
    "p_t",
    "lossless",
    "first_diff",
    "near_tie",
    "diff_margin",
)


def _finite(value: Any) -> Any:
    """None for NaN / inf (W&B summaries and tables hold JSON)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def clean_summary(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if _finite(v) is not None}


def prompt_record(row: dict[str, Any]) -> list[Any]:
    offered, accepted = row.get("offered") or {}, row.get("accepted") or {}
    rec = {
        **row,
        "offered_spine": offered.get("spine", 0),
        "accepted_spine": accepted.get("spine", 0),
        "offered_branch": offered.get("branch", 0),
        "accepted_branch": accepted.get("branch", 0),
    }
    rec["p_s"] = rec["accepted_spine"] / rec["offered_spine"] if rec["offered_spine"] else None
    rec["p_t"] = rec["accepted_branch"] / rec["offered_branch"] if rec["offered_branch"] else None
    return [_finite(rec.get(c)) for c in PROMPT_COLUMNS]


def _line(wandb: Any, key: str, columns: list[str], data: list[list[Any]], y: str, title: str) -> dict:
    """A table and its line chart (x = the first column), under `key` and `key`_chart."""
    table = wandb.Table(columns=columns, data=data)
    return {key: table, f"{key}_chart": wandb.plot.line(table, columns[0], y, title=title)}


def acceptance_media(wandb: Any, acceptance: dict[str, Any]) -> dict[str, Any]:
    """What `log_run` logs of a cell's acceptance record: `acceptance/length_histogram` (a
    wandb.Histogram with one bin per acceptance length), `acceptance/by_position` (conditional and
    marginal rate per draft position), `acceptance/by_depth` and `acceptance/by_sibling_rank`
    (offered, accepted, rate), each a table with a line chart."""
    out: dict[str, Any] = {}
    hist = {int(n): int(c) for n, c in (acceptance.get("acceptance_histogram") or {}).items()}
    if hist:
        top = max(hist)
        counts = [hist.get(n, 0) for n in range(1, top + 1)]
        edges = [n + 0.5 for n in range(top + 1)]
        out["acceptance/length_histogram"] = wandb.Histogram(np_histogram=(counts, edges))
    marginal = acceptance.get("marginal_accept_rates") or []
    conditional = acceptance.get("conditional_accept_rates") or []
    if marginal:
        data = [
            [k + 1, _finite(c), _finite(m)]
            for k, (c, m) in enumerate(zip(conditional, marginal, strict=True))
        ]
        out |= _line(
            wandb,
            "acceptance/by_position",
            ["position", "conditional", "marginal"],
            data,
            "marginal",
            "Marginal acceptance by draft position",
        )
    for key, label, first in (("acceptance_by_depth", "depth", 1), ("acceptance_by_sibling_rank", "rank", 0)):
        rec = acceptance.get(key)
        if rec and rec.get("offered"):
            data = [
                [i + first, o, a, _finite(r)]
                for i, (o, a, r) in enumerate(zip(rec["offered"], rec["accepted"], rec["rate"], strict=True))
            ]
            name = "by_depth" if label == "depth" else "by_sibling_rank"
            out |= _line(
                wandb,
                f"acceptance/{name}",
                [label, "offered", "accepted", "rate"],
                data,
                "rate",
                f"Acceptance by {'tree depth' if label == 'depth' else 'sibling rank'}",
            )
    return out


def log_run(
    mode: str,
    config: dict[str, Any],
    summary: dict[str, Any],
    rows: list[dict[str, Any]],
    group: str,
    name: str,
    directory: Path,
    project: str = "goose-bench",
    verbose: bool = False,
    acceptance: dict[str, Any] | None = None,
) -> str | None:
    """Log one cell's run under `<directory>/wandb/`; returns its files directory (None without W&B). `name`
    is `<model>/<bench>/<method>`. Unless `verbose`, W&B runs silent so its console output does not bury
    the summary; one line says where the run went. `acceptance`: the cell's acceptance record.
    """
    try:
        import wandb
    except ImportError:
        print("goose-bench: wandb is not installed; skipping W&B logging", file=sys.stderr)
        return None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model, bench, method = (name.split("/") + ["", "", ""])[:3]
    hashes = sorted({r["config_hash"] for r in rows if r.get("config_hash")})
    try:
        run = wandb.init(
            project=project,
            group=group,
            job_type=method or None,
            name=name,
            tags=[t for t in (model, bench, method, group) if t],
            mode=mode,
            config={**config, "config_hash": hashes[0] if len(hashes) == 1 else hashes},
            dir=str(directory),
            reinit="finish_previous",
            settings=None if verbose else wandb.Settings(silent=True),
        )
        clean = clean_summary(summary)
        run.log(clean)
        table = wandb.Table(columns=list(PROMPT_COLUMNS), data=[prompt_record(r) for r in rows])
        run.log({TABLE_KEY: table})
        if acceptance:
            run.log(acceptance_media(wandb, acceptance))
        run.summary.update({k: _finite(v) for k, v in summary.items()})  # every key; NaN -> null
        run_dir = run.dir
        where = (
            f"saved offline in {run.settings.sync_dir} (upload: wandb sync {run.settings.sync_dir})"
            if run.offline
            else f"at {run.url}"
        )
        run.finish()
    except Exception as exc:  # W&B trouble must not fail a job whose rows are written
        print(
            f"goose-bench: W&B logging failed ({type(exc).__name__}: {exc}); rows are on disk",
            file=sys.stderr,
        )
        return None
    print(f"goose-bench: W&B run {name} {where}")
    return run_dir
