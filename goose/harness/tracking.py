"""W&B logging of one run (one model × bench × method cell): the resolved config and `config_hash`, the
summary of `goose.records.metrics.cell_summary` (NaN as null), and a per-prompt table. Runs are grouped by
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
) -> str | None:
    """Log one cell's run under `<directory>/wandb/`; returns its files directory (None without W&B). `name`
    is `<model>/<bench>/<method>`. Unless `verbose`, W&B runs silent so its console output does not bury
    the summary; one line says where the run went.
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
