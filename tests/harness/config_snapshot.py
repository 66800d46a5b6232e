"""What every shipped method and experiment preset resolves to: the drafter's logged config and its
config_hash, and the bench / model specs. `python tests/harness/config_snapshot.py OUT.json` writes it;
tests/harness/test_config_identity.py compares the tree's values with the stored snapshot (taken
before the configs were moved to their dataclasses), so that moving a default changes no cell.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import instantiate
from omegaconf import OmegaConf

from goose.harness.benchmarks.spec import BenchmarkSpec
from goose.harness.compose import CONF_DIR, effective_sizes
from goose.records.results import config_hash

TOP_LEVEL = ("quick", "max_new_tokens", "budget", "experiment", "out_dir", "sampling")


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose("config", overrides=overrides, return_hydra_config=True)


def _drafter(cfg) -> dict[str, Any]:
    config = instantiate(cfg.method.drafter, _convert_="all").config()
    return {"method": cfg.method.name, "config": config, "config_hash": config_hash(config)}


def _plain(node) -> Any:
    return json.loads(json.dumps(OmegaConf.to_container(node, resolve=True), default=str))


def _job(cfg) -> dict[str, Any]:
    bench = BenchmarkSpec.from_config(OmegaConf.to_container(cfg.bench, resolve=True))
    return {
        **_drafter(cfg),
        "bench": json.loads(json.dumps(dataclasses.asdict(bench), default=str)),
        "model": _plain(cfg.model),
        "sizes": list(effective_sizes(cfg)),
        "top": {k: _plain(cfg[k]) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in TOP_LEVEL},
    }


def _digest(job: dict[str, Any]) -> dict[str, Any]:
    """A preset's job: the drafter by its config_hash, the bench, model and top-level settings as one digest."""
    del job["config"]  # config_hash identifies it
    specs = {k: job.pop(k) for k in ("bench", "model", "top")}
    blob = json.dumps(specs, sort_keys=True).encode()
    return {**job, "specs": hashlib.sha256(blob).hexdigest()[:16]}


def sweep_values(cfg) -> dict[str, list[str]]:
    """The values of each key a preset sweeps (`hydra.sweeper.params`), as the sweeper expands them."""
    parser = OverridesParser.create()
    out = {}
    for key, value in cfg.hydra.sweeper.params.items():
        override = parser.parse_overrides([f"{key}={value}"])[0]
        out[key] = list(override.sweep_string_iterator()) if override.is_sweep_override() else [str(value)]
    return out


def preset_jobs(
    name: str, combos: Callable[[dict[str, list[str]]], list[dict[str, str]]]
) -> Iterator[tuple[str, dict[str, str], Any]]:
    """The jobs of experiment preset `name`: each combination `combos(sweep)` gives, over the first value
    of every swept key, once, as (its override string, its swept values, the composed config)."""
    sweep = sweep_values(_compose([f"+experiment={name}"]))
    first = {k: v[0] for k, v in sweep.items()}
    seen: set[str] = set()
    for combo in combos(sweep):
        job = {**first, **combo}
        key = " ".join(f"{k}={v}" for k, v in job.items())
        if key not in seen:
            seen.add(key)
            yield key, job, _compose([f"+experiment={name}"] + [f"{k}={v}" for k, v in job.items()])


def _snapshot_combos(sweep: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every method x every other swept setting at the first model and bench, then every model and every
    bench at the first values of the rest."""
    rest = {k: v for k, v in sweep.items() if k not in ("model", "bench")}
    combos = [dict(zip(rest, values, strict=True)) for values in itertools.product(*rest.values())]
    return (
        combos
        + [{"model": m} for m in sweep.get("model", [])]
        + [{"bench": b} for b in sweep.get("bench", [])]
    )


def snapshot() -> dict[str, Any]:
    out: dict[str, Any] = {"method": {}, "bench": {}, "model": {}, "experiment": {}}
    for group in ("method", "bench", "model"):
        for path in sorted((CONF_DIR / group).glob("*.yaml")):
            out[group][path.stem] = _job(_compose([f"{group}={path.stem}"]))
    for path in sorted((CONF_DIR / "experiment").glob("*.yaml")):
        out["experiment"][path.stem] = {
            key: _digest(_job(cfg)) for key, _, cfg in preset_jobs(path.stem, _snapshot_combos)
        }
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "w") as fh:
        json.dump(snapshot(), fh, indent=1, sort_keys=True)
        fh.write("\n")
