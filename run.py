"""goose-bench entry point (Hydra): compose config -> model, benchmark, method -> run -> results.

    python run.py                                   # quick CPU default: SmolLM2-135M, offline
    python run.py model=vicuna-7b bench=mtbench method=goose
    python run.py -m model=smollm2-135m bench=mtbench,humaneval method=ar,pld,goose

Errors a user can fix (unknown or unreachable model, missing benchmark file, bad hyperparameter)
print one paragraph and exit with status 2, no traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import hydra
from omegaconf import DictConfig

from goose.harness.compose import UserError
from goose.harness.job import run_job


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> Any:
    try:
        return run_job(cfg)
    except UserError as exc:
        print(f"\nerror: {exc}\n", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
