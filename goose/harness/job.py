"""One Hydra job: resolve the config, load model and benchmark (cached across the jobs of a
multirun in one process), run the cell, print the summary, log to W&B.

The config is checked, then read once into `RunSettings` (goose.harness.compose); from there on the job,
the engine, decode loop and drafters receive plain Python values.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from goose.engine.budget.auto_budget import AutoBudgetSettings
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.sizing import Speculator
from goose.engine.core.verifier import VerificationEngine
from goose.harness.batched import batched_results_path, run_batched_cell
from goose.harness.chat import encode_prompt
from goose.harness.compose import (
    RunSettings,
    Tracking,
    UserError,
    check_config,
    engine_for,
    load_prompts,
    new_drafter,
    prompt_form,
)
from goose.harness.runner import Cell, SamplingPlan, run_cell
from goose.records.acceptance import acceptance_summary
from goose.records.code_state import MixedCodeError
from goose.records.metrics import cell_summary, format_table
from goose.records.results import results_path


def latency_table(
    engine: VerificationEngine,
    profile: str | None,
    more_kv_lens: Sequence[int] = (),
    cache: str | Path | bool | None = "auto",
    sampling: SamplingParams | None = None,
) -> tuple[Any, dict[str, Any]]:
    """budget=auto: the engine's cost curve from `budget_profile` (a saved table), else from this machine's
    cache of curves (`budget_cache`: auto, off or a directory; goose.engine.budget.latency_cache), else
    calibrated now (once per process; also at `more_kv_lens`, `budget_kv_lens`, for t(n, kv); with the run's
    `sampling` when it samples, whose steps also pay the warp over the vocabulary) and saved there. Returns
    (the `LatencyTable`, the table as recorded in each row: where it came from, the fingerprint and cache
    file, the curve)."""
    from goose.engine.budget.cost_model import LatencyTable
    from goose.engine.budget.latency_cache import cached_latency

    if profile:
        dtype = str(engine.dtype).replace("torch.", "")
        try:
            table = LatencyTable.load(profile, dtype=dtype)
        except (OSError, ValueError, KeyError) as exc:
            raise UserError(
                f"budget_profile = {profile!r}: cannot read a latency table for dtype {dtype} ({exc}). "
                "Write one with `make cost-curve` (results/cost_curve/cost_curve.json) or leave budget_profile "
                "unset to calibrate at start-up."
            ) from None
        source, provenance = str(profile), {}
    else:
        kwargs: dict[str, Any] = {"more_kv_lens": list(more_kv_lens)} if more_kv_lens else {}
        if sampling is not None:  # CalibrationSettings takes a greedy one as none
            kwargs["sampling"] = sampling
        table, origin = cached_latency(engine, cache, **kwargs)
        provenance = origin.record()
        if origin.rejected:
            print(
                f"goose-bench: budget=auto: the cached curve {origin.cache} was not used: {origin.rejected}"
            )
        if origin.not_saved:
            print(f"goose-bench: budget=auto: the curve was not cached: {origin.not_saved}")
        if origin.source == "cache":
            source = f"from the cache {origin.cache}"
        else:
            spent = table.meta.get("calibration_s")
            took = f" in {spent:.1f} s" if spent is not None else ""
            saved = f", saved to {origin.cache}" if origin.cache else ""
            source = f"calibrated at start-up{took}{saved}"
    curves = [(table.kv_len, table.seconds), *sorted(table.kv_seconds.items())]
    for kv, seconds in curves:
        curve = ", ".join(f"{n}: {1e3 * s:.1f}" for n, s in zip(table.sizes, seconds, strict=True))
        at = f", KV {kv}" if table.kv_seconds else ""
        print(f"goose-bench: budget=auto, verification latency ({source}{at}; nodes: ms) {curve}")
    record = {**provenance, "source": provenance.get("source", source)}
    record |= {"sizes": list(table.sizes), "seconds": list(table.seconds)}
    if table.kv_seconds:
        record |= {"kv_len": table.kv_len, "kv_seconds": {str(k): v for k, v in table.kv_seconds.items()}}
    return table, record


def auto_budget(
    make_drafter,
    engine: VerificationEngine,
    profile: str | None,
    more_kv_lens: Sequence[int] = (),
    settings: AutoBudgetSettings | None = None,
    cache: str | Path | bool | None = "auto",
    sampling: SamplingParams | None = None,
):
    """budget=auto for a drafter factory: each call gives a fresh drafter with a fresh `AutoBudget` sizer
    (a `Speculator`) on the curve of `latency_table` (`cache`: budget_cache; `sampling`: the run's), with
    `settings` (None: the defaults). Returns
    (factory, the table as recorded in each row). Used by `make bench` (experiments/bench/); `run_job`
    sizes its one drafter."""
    from goose.engine.budget.auto_budget import auto_budget_factory

    table, record = latency_table(engine, profile, more_kv_lens, cache, sampling)
    return auto_budget_factory(make_drafter, engine, latency=table, settings=settings), record


def describe_sampling(params: SamplingParams, plan: SamplingPlan) -> str:
    if params.greedy:
        return "sampling=greedy"
    return (
        f"sampling=T{params.temperature:g}/top_p{params.top_p:g}/top_k{params.top_k} "
        f"verifier={params.verifier} seed={plan.seed} samples={plan.num_samples}"
    )


def _parallel_launcher() -> bool:
    """Whether this job runs beside others that share the terminal (Hydra's joblib launcher): then
    each job logs plain lines, since several progress bars would overwrite one another."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    return "joblib" in str(HydraConfig.get().launcher.get("_target_", "")).lower()


def warm_up_paths(
    engine: VerificationEngine,
    drafters: Sequence[Callable[[], Drafter | Speculator]],
    prompts: Sequence[Any],
    tokenizer: Any,
    chat: bool,
    sampling: SamplingParams,
) -> None:
    """An untimed, unrecorded 16-token generation of each code path the cell times (AR and the method,
    each with a throw-away drafter) on the head of the first prompt, so that the first timed prompt
    pays no lazy start-up (allocator, kernels, CUDA graph captures of the tree sizes it drafts) and the
    summary's speed-up compares warm runs, as `experiments.bench` does. A prompt that cannot be
    tokenized warms nothing (its row records the failure)."""
    try:
        ids = encode_prompt(tokenizer, prompts[0].text, chat)[:64] if prompts else []
    except Exception:  # the runner records the bad prompt as a failed row
        return
    for make in drafters if ids else ():
        warm_generation(engine, make(), ids, sampling)


def warm_generation(
    engine: VerificationEngine, made: Drafter | Speculator, ids: list[int], sampling: SamplingParams
) -> None:
    """An untimed, unrecorded 16-token generation on `ids` by a throw-away drafter (with its sizer, if
    `made` is a `Speculator`)."""
    speculator = Speculator.of(made)
    generate(engine, speculator.drafter, ids, 16, sampling=sampling, sizer=speculator.sizer)


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """Run one (model, bench, method) cell and return its summary."""
    check_config(cfg)  # unknown keys, types, ranges, drafter keys: before anything loads
    run = RunSettings.from_config(cfg)  # the config's one reading: from here on, plain values
    if run.threads:
        torch.set_num_threads(run.threads)
    max_new, sampling, plan = run.max_new_tokens, run.sampling, run.plan

    def build() -> Drafter:
        return new_drafter(run.method, run.drafter, sampling.verifier, sampling.temperature)

    drafter = build()  # the job's one drafter: its config is the cell's, it runs every prompt
    if run.batch_state == "shared":  # before anything loads: can its run-long state be shared?
        try:
            drafter.check_shareable()
        except ValueError as exc:
            raise UserError(str(exc)) from None
    spec, prompts, source = load_prompts(run.bench, run.data_dir, run.limit)
    profile = run.budget_profile
    if profile and not Path(profile).is_file():
        raise UserError(
            f"budget_profile = {profile!r}: no such file. Write one with `make cost-curve` "
            "(results/cost_curve/cost_curve.json) or leave budget_profile unset to calibrate at start-up."
        )
    loaded, engine = engine_for(run.model, run.engine)
    chat, chat_why = prompt_form(spec, loaded.tokenizer, run.model)
    method = run.method
    latency_record = None
    if run.budget == "auto" and method != "ar":
        from goose.engine.budget.auto_budget import with_auto_budget

        table, latency_record = latency_table(
            engine, run.budget_profile, run.budget_kv_lens, run.budget_cache, run.sampling
        )
        settings = run.auto_budget

        def sized(d: Drafter) -> Speculator:
            return with_auto_budget(d, engine, latency=table, settings=settings)

        method = f"{method}_auto"
    else:

        def sized(d: Drafter) -> Speculator:
            return Speculator(d)

    speculator = sized(drafter)  # the drafter and the sizer of its trees (budget=fixed: none)
    cell = Cell(
        loaded.label,
        run.bench["name"],
        method,
        speculator.config(),
        max_new,
        str(loaded.dtype).replace("torch.", ""),
        chat_template=chat,
        sampling=sampling,
    )
    out_file = results_path(run.out_dir, loaded.label, run.bench["name"])
    if run.concurrency > 1:
        out_file = batched_results_path(
            run.out_dir, run.concurrency, loaded.label, run.bench["name"], run.batch_state
        )
    print(
        f"goose-bench: model={cell.model} bench={cell.bench} ({len(prompts)} prompts from {source}) "
        f"chat_template={str(chat).lower()} ({chat_why}) "
        f"method={method} max_new_tokens={max_new} dtype={cell.dtype} forward={engine.forward_name} "
        f"{describe_sampling(sampling, plan)} "
        f"-> {out_file}"
    )
    throwaway = lambda: sized(build())  # noqa: E731
    warm_up_paths(engine, [throwaway, ARDrafter], prompts, loaded.tokenizer, chat, sampling)
    t0 = time.perf_counter()
    extra = (
        {"bench_source": source, "experiment": run.experiment, "forward": engine.forward_name}
        | ({"budget_latency": latency_record} if latency_record else {})
        | loaded.provenance
    )
    if run.concurrency > 1:
        return _run_batched(run, engine, loaded.tokenizer, prompts, cell, throwaway, extra, plan, t0)
    try:
        rows = run_cell(
            engine,
            loaded.tokenizer,
            prompts,
            cell,
            speculator,
            out_file,
            extra=extra,
            progress=False if _parallel_launcher() else None,
            plan=plan,
            allow_mixed_code=run.allow_mixed_code,
        )
    except MixedCodeError as exc:  # refused before any prompt ran: the file holds rows of other code
        raise UserError(str(exc)) from None
    ar_rows = [r for r in rows if r["method"] == "ar"]
    method_rows = [r for r in rows if r["method"] == method]
    summaries = {"ar": cell_summary(ar_rows, ar_rows)}
    if method != "ar":
        summaries[method] = cell_summary(method_rows, ar_rows)
    for name, cell_rows in (("ar", ar_rows), (method, method_rows)):  # histogram, per-position rates
        summaries[name]["speculation"] = acceptance_summary(cell_rows)
    print_summary(summaries, time.perf_counter() - t0)
    _log_wandb(run.tracking, summaries.get(method, summaries["ar"]), method_rows, cell)
    return summaries[method]


def _run_batched(
    run: RunSettings,
    engine: Any,
    tokenizer: Any,
    prompts: list[Any],
    cell: Cell,
    make: Any,
    extra: dict[str, Any],
    plan: SamplingPlan,
    t0: float,
) -> dict[str, Any]:
    """`concurrency` > 1: the cell served through the batched engine (goose.harness.batched), AR at the same
    concurrency its reference; the summary adds the batch's output tokens/s of both."""
    try:
        rows, path = run_batched_cell(
            engine,
            tokenizer,
            prompts,
            cell,
            make,
            run.out_dir,
            run.concurrency,
            extra=extra,
            plan=plan,
            allow_mixed_code=run.allow_mixed_code,
            batch_state=run.batch_state,
        )
    except MixedCodeError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a model or drafter the batched engine does not take, said plainly
        raise UserError(str(exc)) from None
    ar_rows = [r for r in rows if r["method"] == "ar"]
    method_rows = [r for r in rows if r["method"] == cell.method] or ar_rows
    summaries = {"ar": cell_summary(ar_rows, ar_rows)}
    if cell.method != "ar":
        summaries[cell.method] = cell_summary(method_rows, ar_rows)
    for name, cell_rows in (("ar", ar_rows), (cell.method, method_rows)):
        throughput = cell_rows[0].get("batch_tokens_per_s") if cell_rows else None
        summaries[name]["batch_tokens_per_s"] = throughput
    print_summary(summaries, time.perf_counter() - t0)
    ar_tps, m_tps = summaries["ar"]["batch_tokens_per_s"], summaries[cell.method]["batch_tokens_per_s"]
    print(
        f"concurrency {run.concurrency}: batch output tokens/s: ar {ar_tps:.1f}, {cell.method} {m_tps:.1f} "
        f"({m_tps / ar_tps:.2f}x AR at the same concurrency); rows in {path}"
    )
    _log_wandb(run.tracking, summaries[cell.method], method_rows, cell)
    return summaries[cell.method]


def print_summary(summaries: dict[str, dict[str, Any]], elapsed: float) -> None:
    header = ["method", "prompts", "failed", "tau", "tok/s", "speedup", "lossless", "p_s", "p_t", "p_s/p_t"]
    header += ["AL/step", "AL/req"]  # mean acceptance length per step and per request
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
            s.get("mean_accept_length", float("nan")),
            s.get("mean_accept_length_per_request", float("nan")),
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


def _log_wandb(tracking: Tracking, summary: dict[str, Any], rows: list[dict[str, Any]], cell: Cell) -> None:
    if tracking.mode == "disabled":
        return
    from goose.harness.tracking import log_run

    log_run(
        mode=tracking.mode,
        config=tracking.config,
        summary={k: v for k, v in summary.items() if k != "speculation"},
        acceptance=summary.get("speculation"),  # histogram and per-position curves
        rows=rows,
        group=tracking.group,
        name=f"{cell.model}/{cell.bench}/{cell.method}",
        directory=tracking.directory,
        verbose=tracking.verbose,
    )
