"""One Hydra job: resolve the config, load model and benchmark (cached across the jobs of a
multirun in one process), run the cell, print the summary, log to W&B.

This is the only module besides run.py that knows about Hydra/OmegaConf; the engine, decode loop
and drafters receive plain Python values.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from goose.engine.verifier import VerificationEngine
from goose.harness.benchmarks import BenchmarkError, file_in_data_dir, load_benchmark, resolve_source
from goose.harness.config_schema import validate_config  # also registers the schema conf/config.yaml uses
from goose.harness.models import LoadedModel, ModelUnavailableError, load_model
from goose.harness.runner import Cell, run_cell, warm_up
from goose.records.metrics import cell_summary, format_table
from goose.records.results import results_path


class UserError(Exception):
    """An error the user can fix from the command line; printed as one paragraph."""


_MODELS: dict[str, tuple[LoadedModel, VerificationEngine]] = {}


def _model(cfg: DictConfig) -> tuple[LoadedModel, VerificationEngine]:
    """Load (once per process) the model and its engine, warmed up."""
    key = OmegaConf.to_yaml(cfg.model)
    if key not in _MODELS:
        _MODELS.clear()  # one model in memory at a time
        spec = OmegaConf.to_container(cfg.model, resolve=True)
        try:
            loaded = load_model(**spec)
        except (ModelUnavailableError, ValueError) as exc:
            raise UserError(str(exc)) from None
        engine = VerificationEngine(loaded.model, loaded.eos_token_ids, loaded.context_length)
        warm_up(engine, loaded.tokenizer("Warm-up: the quick brown fox jumps over the lazy dog.").input_ids)
        _MODELS[key] = (loaded, engine)
    return _MODELS[key]


def effective_sizes(cfg: DictConfig) -> tuple[int | None, int]:
    """(prompt limit, max_new_tokens) after applying the quick defaults of CPU-sized models."""
    quick = cfg.get("quick", "auto")
    limit, max_new = cfg.bench.get("limit"), cfg.get("max_new_tokens")
    has_quick = cfg.model.get("quick_limit") is not None
    if quick is True or (quick == "auto" and has_quick):
        if limit is None:
            limit = cfg.model.get("quick_limit")
        if max_new is None:
            max_new = cfg.model.get("quick_max_new_tokens")
    if max_new is None:
        max_new = int(cfg.bench.max_new_tokens)
    return (None if limit is None else int(limit)), int(max_new)


def make_drafter_factory(cfg: DictConfig):
    """A zero-argument factory of the configured drafter; validates the config once, up front."""

    def make():
        try:
            return instantiate(cfg.method.drafter, _convert_="all")
        except InstantiationException as exc:
            cause = exc.__cause__ or exc
            raise UserError(f"method={cfg.method.name}: invalid configuration: {cause}") from None

    make()  # fail before any model loads
    return make


def _auto_budget(make_drafter, engine: VerificationEngine):
    """budget=auto: calibrate the engine's cost curve once per process, wrap every drafter."""
    from goose.engine.auto_budget import auto_budget_factory
    from goose.engine.cost_model import engine_latency

    table = engine_latency(engine)
    curve = ", ".join(f"{n}: {1e3 * s:.1f}" for n, s in zip(table.sizes, table.seconds, strict=True))
    print(f"goose-bench: budget=auto, verification latency (nodes: ms) {curve}")
    return auto_budget_factory(make_drafter, engine, latency=table)


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """Run one (model, bench, method) cell and return its summary."""
    try:
        validate_config(cfg)  # unknown keys, types, ranges, drafter keys: before anything loads
    except ValueError as exc:
        raise UserError(f"invalid configuration: {exc}") from None
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    limit, max_new = effective_sizes(cfg)
    make_drafter = make_drafter_factory(cfg)
    bench = cfg.bench
    try:
        data_file = bench.get("data_file") or file_in_data_dir(bench.name, cfg.get("data_dir"))
        source = resolve_source(bench.name, data_file, bench.get("source", "auto"))
        prompts = load_benchmark(bench.name, limit, data_file, source=source)
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None
    loaded, engine = _model(cfg)
    method = cfg.method.name
    if cfg.get("budget", "fixed") == "auto" and method != "ar":
        make_drafter, method = _auto_budget(make_drafter, engine), f"{method}_auto"
    drafter_config = make_drafter().config()
    cell = Cell(
        cfg.model.name, bench.name, method, drafter_config, max_new, str(loaded.dtype).replace("torch.", "")
    )
    out_file = results_path(cfg.out_dir, cfg.model.name, bench.name)
    print(
        f"goose-bench: model={cell.model} bench={cell.bench} ({len(prompts)} prompts from {source}) "
        f"method={method} max_new_tokens={max_new} dtype={cell.dtype} -> {out_file}"
    )
    t0 = time.perf_counter()
    rows = run_cell(
        engine,
        loaded.tokenizer,
        prompts,
        cell,
        make_drafter,
        out_file,
        extra={"bench_source": source, "experiment": cfg.get("experiment")},
    )
    ar_rows = [r for r in rows if r["method"] == "ar"]
    method_rows = [r for r in rows if r["method"] == method]
    summaries = {"ar": cell_summary(ar_rows, ar_rows)}
    if method != "ar":
        summaries[method] = cell_summary(method_rows, ar_rows)
    print_summary(summaries, time.perf_counter() - t0)
    _log_wandb(cfg, summaries.get(method, summaries["ar"]), method_rows, cell)
    return summaries[method]


def print_summary(summaries: dict[str, dict[str, Any]], elapsed: float) -> None:
    header = ["method", "prompts", "failed", "tau", "tok/s", "speedup", "lossless", "p_s", "p_t", "p_s/p_t"]
    rows = [
        [
            name,
            s["prompts"],
            s["failed"],
            s["tau"],
            s["tokens_per_s"],
            s["speedup"],
            s["lossless_share"],
            s["p_s"],
            s["p_t"],
            s["p_ratio"],
        ]
        for name, s in summaries.items()
    ]
    print()
    print(format_table(header, rows))
    mismatches = {n: (s["near_tie_mismatches"], s["real_mismatches"]) for n, s in summaries.items()}
    for name, (near, real) in mismatches.items():
        if near or real:
            print(
                f"{name}: {near} mismatch(es) at near-ties, {real} real mismatch(es) (see rows' first_diff)"
            )
    print(f"({elapsed:.1f} s)")


def _log_wandb(cfg: DictConfig, summary: dict[str, Any], rows: list[dict[str, Any]], cell: Cell) -> None:
    mode = str(cfg.get("wandb", "offline"))
    if mode == "disabled":
        return
    from goose.harness.tracking import log_run

    log_run(
        mode=mode,
        config=OmegaConf.to_container(cfg, resolve=True),
        summary=summary,
        rows=rows,
        group=str(cfg.get("experiment", "adhoc")),
        name=f"{cell.model}/{cell.bench}/{cell.method}",
        directory=Path(cfg.out_dir),
    )
