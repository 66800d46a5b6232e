"""Runs one cell at concurrency N > 1 (`run.py ... concurrency=N`): the cell's prompts served N at a time
through the batched engine (goose.engine.batch), and AR through the same engine at the same concurrency as
the reference. Rows go to <out_dir>/concurrency<N>/<model>/<bench>.jsonl, one per request, each with the
batch's throughput (`batch_tokens_per_s`, over the whole serve), its own TPOT and its losslessness against
AR's output. Each request gets a fresh drafter and sizer; with `batch_state` "shared" the method's requests
read and write one run-long drafter state (goose.engine.batch.serve), rows under
<out_dir>/concurrency<N>-shared/. A cell whose rows are all on disk is reported, not re-run; missing requests are
served together (rows record `batch_resumed`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from goose.engine.batch.engine import BatchEngine
from goose.engine.batch.serve import Request, Served, serve
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sizing import Speculator
from goose.engine.core.verifier import VerificationEngine
from goose.harness.cells import Cell, Draw, SamplingPlan, sequence_seed
from goose.harness.chat import encode_prompt
from goose.harness.resume import merge_new_rows
from goose.harness.rows import environment, generation_row
from goose.harness.verdicts import row_verdict
from goose.records.code_state import check_one_code_state
from goose.records.degenerate import degenerate_fields
from goose.records.provenance import chat_template_fields, prompt_fields, seed_fields
from goose.records.results import append_row, results_path


def batched_results_path(
    out_dir: str | Path, concurrency: int, model: str, bench: str, batch_state: str = "isolated"
) -> Path:
    """<out_dir>/concurrency<N>[-shared]/<model>/<bench>.jsonl: the batch state is not in a row's cell key, so
    the two states keep their rows apart."""
    folder = f"concurrency{concurrency}" + ("" if batch_state == "isolated" else f"-{batch_state}")
    return results_path(Path(out_dir) / folder, model, bench)


def _units(
    prompts: Sequence[Any], cell: Cell, plan: SamplingPlan, tokenizer: Any
) -> list[tuple[Any, Draw, list[int]]]:
    units = []
    for p in prompts:
        ids = encode_prompt(tokenizer, p.text, cell.chat_template)
        for idx, seed in plan.samples(cell.sampling):
            units.append(
                (p, Draw(cell.sampling, idx, seed, sequence_seed(seed, p.prompt_id), plan.seed), ids)
            )
    return units


def _serve_rows(
    engine: BatchEngine,
    single: VerificationEngine,
    cell: Cell,
    units: list[tuple[Any, Draw, list[int]]],
    make: Callable[[], Speculator],
    concurrency: int,
    env: dict[str, Any],
    references: dict[tuple, list[int]] | None,
    resumed: bool,
    stochastic: bool,
    batch_state: str,
) -> list[dict[str, Any]]:
    requests = [Request(tuple(ids), cell.max_new_tokens, draw.sequence_seed) for _, draw, ids in units]
    served: Served = serve(engine, make, requests, concurrency, cell.sampling, batch_state=batch_state)
    tpot = served.tpot_s()
    tpot_p50 = statistics.median(tpot) if tpot else None
    rows = []
    for i, ((prompt, draw, ids), gen) in enumerate(zip(units, served.generations, strict=True)):
        row = cell.row(prompt.prompt_id, draw.sample_idx, draw.sample_seed)
        row.prompt_tokens = len(ids)
        row.fill(prompt_fields(prompt.text, ids))
        row.fill(seed_fields(draw.run_seed, draw.sample_seed, draw.sequence_seed))
        row.fill(env, strict=False)
        row.timestamp = time.time()
        row.fill(generation_row(gen))
        row.fill(degenerate_fields(row))
        key = cell.key(prompt.prompt_id, draw.sample_seed)
        reference = None if references is None else references.get(key)
        row.fill(
            row_verdict(
                single,
                ids,
                gen.output_ids,
                reference,
                is_reference=references is None,
                stochastic=stochastic,
                sampling=draw.params,
                seed=draw.sequence_seed,
            )
        )
        row.status = "ok"
        row.fill(
            {
                "concurrency": concurrency,
                "batch_state": batch_state,
                "batch_requests": len(units),
                "batch_tokens_per_s": served.tokens_per_s,
                "batch_wall_time_s": served.wall_time_s,
                "batch_resumed": resumed,
                "request_first_token_s": served.first_token_s[i] - served.admitted_s[i],
                "request_tpot_s": served.request_tpot_s(i),
                "batch_tpot_p50_s": tpot_p50,
            },
            strict=False,
        )
        rows.append(row)
    return rows


def run_batched_cell(
    engine: VerificationEngine,
    tokenizer: Any,
    prompts: Sequence[Any],
    cell: Cell,
    make_speculator: Callable[[], Speculator],
    out_dir: str | Path,
    concurrency: int,
    extra: dict[str, Any] | None = None,
    plan: SamplingPlan | None = None,
    allow_mixed_code: bool = False,
    batch_state: str = "isolated",
) -> tuple[list[dict[str, Any]], Path]:
    """Serve the cell's prompts `concurrency` at a time, AR first (the reference) then the method (its run-long
    drafter state per `batch_state`); returns (the rows of both, in prompt order, as on disk) and the results
    file."""
    plan = plan or SamplingPlan()
    env = environment() | (extra or {}) | chat_template_fields(tokenizer, cell.chat_template)
    if allow_mixed_code:
        env["allow_mixed_code"] = True
    path = batched_results_path(out_dir, concurrency, cell.model, cell.bench, batch_state)
    existing: dict[tuple, dict[str, Any]] = {}
    merge_new_rows(existing, path, 0)
    check_one_code_state(existing.values(), env["code_state"], str(path), allow_mixed_code)
    units = _units(prompts, cell, plan, tokenizer)
    batch = BatchEngine(engine, concurrency)
    ar_cell = cell.ar_reference()
    out: dict[str, list[dict[str, Any]]] = {}
    for which, c, make in (
        ("ar", ar_cell, lambda: Speculator(ARDrafter())),
        ("method", cell, make_speculator),
    ):
        keys = [c.key(p.prompt_id, d.sample_seed) for p, d, _ in units]
        missing = [u for u, k in zip(units, keys, strict=True) if k not in existing]
        if missing and not (which == "method" and cell.method == "ar"):
            references = None
            if which == "method":
                references = {
                    cell.key(p.prompt_id, d.sample_seed): existing[
                        ar_cell.key(p.prompt_id, d.sample_seed)
                    ].get("output_ids")
                    for p, d, _ in units
                }
            # a drafter that samples its drafts matches AR in distribution only (as in the batch-1 runner)
            stochastic = which == "method" and not c.sampling.greedy and make().drafter.samples_drafts
            new = _serve_rows(
                batch,
                engine,
                c,
                missing,
                make,
                concurrency,
                env,
                references,
                len(missing) < len(units),
                stochastic,
                batch_state if which == "method" else "isolated",
            )
            for row in new:
                append_row(path, row)
            merge_new_rows(existing, path, 0)
        out[which] = [existing[k] for k in keys]
    rows = out["ar"] + ([] if cell.method == "ar" else out["method"])
    return rows, path
