"""W&B logging of one run: config, summary metrics (τ, tokens/s, speedup, p_s, p_t, lossless
share) and a per-prompt table, grouped by experiment. Offline mode needs no network; sync later
with `wandb sync <dir>/wandb/offline-run-*`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

TABLE_COLUMNS = (
    "prompt_id",
    "method",
    "generated_tokens",
    "forward_calls",
    "tau",
    "tokens_per_s",
    "wall_time_s",
    "lossless",
    "first_diff",
    "status",
)


def log_run(
    mode: str,
    config: dict[str, Any],
    summary: dict[str, Any],
    rows: list[dict[str, Any]],
    group: str,
    name: str,
    directory: Path,
    project: str = "goose-bench",
) -> str | None:
    """Log one run; returns the run directory (None when W&B is unavailable)."""
    try:
        import wandb
    except ImportError:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=project,
        group=group,
        name=name,
        mode=mode,
        config=config,
        dir=str(directory),
        reinit="finish_previous",
    )
    clean = {k: v for k, v in summary.items() if not (isinstance(v, float) and math.isnan(v))}
    run.summary.update(clean)
    run.log(clean)
    table = wandb.Table(columns=list(TABLE_COLUMNS))
    for r in rows:
        table.add_data(*[r.get(c) for c in TABLE_COLUMNS])
    run.log({"prompts": table})
    run_dir = run.dir
    run.finish(quiet=True)
    return run_dir
