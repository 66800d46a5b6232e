"""Runs one cell (model x bench x method x config) prompt by prompt and writes result rows.

For every prompt the greedy AR reference is looked up in the results on disk (rows of method
`ar` with the same model, bench, max_new_tokens, dtype and chat template setting) and, when missing, generated first and
written as an AR row: so every method row carries a losslessness verdict, and AR timings of the
same run sit beside the method's. Cells already in the results are skipped (resume).

Sampling (temperature > 0, `SamplingPlan`): each prompt runs `num_samples` times, sample i with
the seed derive_seed(sampling.seed, i) (rows carry `sample_idx` and `sample_seed`); its AR
reference is AR sampling with the same settings and seed. With deterministic drafts the engine's
output then equals AR's token for token (goose.engine.core.sampling), which the row's `lossless`
checks; a drafter that samples its drafts (STAND) is exact in distribution only, so its rows get
`lossless` None and `lossless_check` "distribution" (the distribution tests cover it).

Parallel jobs of one (model, bench) (Hydra's joblib or submitit launcher) share one results file
and one AR reference per prompt: it is generated under an exclusive lock on `<file>.lock`
(`filelock`), after reading the rows other jobs appended meanwhile, so it is written once. Should a file still hold
two rows of one cell, the first one wins (as in `analysis.load`).
"""

from __future__ import annotations

import gc
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.sizing import Speculator
from goose.engine.core.tree import DraftTree
from goose.engine.core.verifier import VerificationEngine
from goose.harness.cells import Cell, Draw, SamplingPlan, sequence_seed
from goose.harness.chat import encode_prompt
from goose.harness.progress import CellProgress, _terminal_width, logger
from goose.harness.resume import merge_new_rows, reference_lock, restore_run_state, warn_if_cut
from goose.harness.rows import SESSION_ID, TreeSampler, environment, exact_fields, generation_row, sample_tree
from goose.harness.run_state import RunStateStore
from goose.harness.verdicts import divergence_verdict, lossless_fields, near_tie_threshold, row_verdict
from goose.records.code_state import check_one_code_state
from goose.records.degenerate import degenerate_fields
from goose.records.provenance import chat_template_fields, prompt_fields, seed_fields
from goose.records.results import append_row
from goose.records.row import ResultRow

__all__ = [  # the runner's names, some defined in the modules it is split into, for existing callers
    "SESSION_ID",
    "Cell",
    "CellProgress",
    "Draw",
    "SamplingPlan",
    "divergence_verdict",
    "environment",
    "generation_row",
    "lossless_fields",
    "near_tie_threshold",
    "run_cell",
    "sequence_seed",
    "warm_up",
]


def warm_up(engine: VerificationEngine, token_ids: Sequence[int]) -> None:
    """One untimed prefill and one small tree verification, so that the first timed prompt does
    not pay for lazy initialisation (allocator, kernels, thread pools), and with `cuda_graphs`
    the graphs captured (`VerificationEngine.capture_graphs`)."""
    ids = list(token_ids)[:32] or [0]
    logits = engine.prefill(ids)
    anchor = int(logits[-1].argmax())
    tree = DraftTree.chain(anchor, [anchor] * 3)
    tree.add(anchor + 1 if anchor + 1 < logits.shape[-1] else 0, 0, tree.sources[1])
    engine.verify(tree, budget=4)
    engine.capture_graphs()


def run_cell(
    engine: VerificationEngine,
    tokenizer: Any,
    prompts: Sequence[Any],
    cell: Cell,
    make_drafter: Drafter | Speculator | Callable[[], Drafter | Speculator],
    results_file: Path,
    extra: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool | None = None,
    plan: SamplingPlan | None = None,
    references: dict[tuple, dict[str, Any]] | None = None,
    allow_mixed_code: bool = False,
) -> list[dict[str, Any]]:
    """Run (or resume) a cell; returns the rows of this cell and of the AR reference, in prompt
    order (then sample order), as they are on disk after the run. `plan`: the seed and samples per
    prompt when `cell.sampling` samples. make_drafter: the cell's drafter, or its `Speculator` (the drafter
    and the sizer of its trees; built once per job), or a zero-argument factory called once here; the one
    instance runs every prompt of the cell, so state it carries across prompts (`Drafter.carries_run_state`,
    `TreeSizer.carries_run_state`) flows from one prompt to the next.

    Progress (`CellProgress`): a tqdm bar when `progress` is True, one plain line per prompt when
    it is False; None (the default) draws the bar where stderr is a terminal with a size and no
    `log` callback is given. Lines and messages go to `log` if given, else to the logger
    `goose.harness.runner` (under Hydra: the console and the job's log file).

    references: AR rows by cell key from elsewhere (`experiments.bench`'s untimed reference pass) that
    this cell's outputs are checked against where its own results file has none yet, so that engine
    AR's timed run need not come first. The results file must hold rows of this code state only
    (`goose.records.code_state`): rows of other code refuse (MixedCodeError) unless
    `allow_mixed_code`, which every row written then records."""
    env = environment()  # the fields every row of the cell carries, later ones winning
    env.update(extra or {})
    env.update(chat_template_fields(tokenizer, cell.chat_template))
    if allow_mixed_code:
        env["allow_mixed_code"] = True
    ar_cell = cell.ar_reference()  # the AR reference of the same prompt form (raw or in the chat template)
    plan = plan or SamplingPlan()
    units = [(p, idx, seed) for p in prompts for idx, seed in plan.samples(cell.sampling)]
    keys = [(cell.key(p.prompt_id, seed), ar_cell.key(p.prompt_id, seed)) for p, _, seed in units]
    existing: dict[tuple, dict[str, Any]] = {}
    warn_if_cut(results_file)
    offset = merge_new_rows(existing, results_file, 0)
    check_one_code_state(existing.values(), env["code_state"], str(results_file), allow_mixed_code)
    references = references or {}
    made = make_drafter if isinstance(make_drafter, (Drafter, Speculator)) else make_drafter()
    speculator = Speculator.of(made)
    ar_drafter = Speculator(ARDrafter())
    out_rows: list[dict[str, Any]] = []
    resumed = [key in existing for key, _ in keys]
    if any(resumed):
        message = (
            f"{sum(resumed)} of {len(units)} prompts of this cell are already in {results_file}: their "
            "rows are reported, not re-run (resume; out_dir=<another folder> runs them afresh)"
        )
        if log is not None:
            log(message)
        else:
            logger.info(message)
    if progress is None:
        progress = log is None and _terminal_width(sys.stderr) > 0
    written: set[tuple] = set()  # keys of the rows this call generated
    # Drafters with state across prompts: checkpoint it with the rows, restore it on resume.
    store = RunStateStore(results_file, cell.row_base()) if speculator.carries_run_state else None
    seen: list[str] = []  # ids of the prompts whose runs shaped the drafter's state, in order
    restored, state_checked = False, False
    stochastic = speculator.drafter.samples_drafts and not cell.sampling.greedy
    unit_ids = [p.prompt_id if idx is None else f"{p.prompt_id}#{idx}" for p, idx, _ in units]
    with CellProgress(cell, len(units), sum(resumed), progress, log) as report:
        for i, (prompt, sample_idx, sample_seed) in enumerate(units):
            prompt_ids, bad_prompt = _tokenize(tokenizer, prompt, cell.chat_template)
            key, ar_key = keys[i]
            draw = Draw(
                cell.sampling,
                sample_idx,
                sample_seed,
                sequence_seed(sample_seed, prompt.prompt_id),
                plan.seed,
            )
            borrowed = cell.method != "ar" and ar_key not in existing and ar_key in references
            if ar_key not in existing and not borrowed:
                with reference_lock(results_file):  # another job may be writing this very reference
                    offset = merge_new_rows(existing, results_file, offset)
                    if ar_key not in existing:
                        ar_run = PromptRun(prompt, prompt_ids, ar_cell, draw, bad_prompt=bad_prompt)
                        existing[ar_key] = _run_one(engine, ar_drafter, ar_run, env, results_file)
                        written.add(ar_key)
                        if existing[ar_key].get("status") != "ok" and cell.method != "ar":
                            error = existing[ar_key].get("error")
                            report.warn(f"[{i + 1}/{len(prompts)}] ar {prompt.prompt_id}: FAILED: {error}")
            ar_row = references[ar_key] if borrowed else existing[ar_key]
            reference = ar_row.get("output_ids") if ar_row.get("status", "ok") == "ok" else None
            if key not in existing:
                run_state, before_append = None, None
                if store is not None:
                    if not state_checked:  # the first prompt this process runs: restore the state
                        state_checked = True
                        restored = restore_run_state(store, speculator, unit_ids[:i], report)
                        seen = unit_ids[:i] if restored else []
                    run_state = (len(seen), restored)
                    ids_after = [*seen, unit_ids[i]]
                    before_append = lambda ids=ids_after: store.save(ids, speculator.run_state())  # noqa: E731
                run = PromptRun(
                    prompt,
                    prompt_ids,
                    cell,
                    draw,
                    reference=reference,
                    bad_prompt=bad_prompt,
                    run_state=run_state,
                    before_append=before_append,
                    stochastic=stochastic,
                )
                existing[key] = _run_one(engine, speculator, run, env, results_file)
                written.add(key)
                if store is not None:
                    seen.append(unit_ids[i])
                    store.prune(len(seen))
            report.prompt(i, unit_ids[i], existing[key], ran=key in written, resumed=resumed[i])
            out_rows.append(existing[key])
            if cell.method != "ar" and not borrowed:
                out_rows.append(existing[ar_key])
    return out_rows


def _tokenize(tokenizer: Any, prompt: Any, chat_template: bool = False) -> tuple[list[int], str | None]:
    """(token ids, None), raw or in the chat template (goose.harness.chat.encode_prompt), or
    ([], the reason) when the prompt cannot be tokenized (the prompt is then recorded as failed,
    and the sweep goes on)."""
    try:
        return encode_prompt(tokenizer, prompt.text, chat_template), None
    except Exception as exc:  # a malformed record (text None, not a string, ...)
        return [], f"the prompt cannot be tokenized: {type(exc).__name__}: {exc}"


def _free_memory() -> None:
    """After an out-of-memory failure: drop garbage and the CUDA caching allocator's free blocks,
    so that the next prompt starts from a clean allocator."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass
class PromptRun:
    """One generation of a cell, as `_run_one` runs it.

    draw: the sample this row is (greedy: none); reference: the AR output for this prompt, None for the
    AR row itself (cell.method == "ar") or when the AR run of this prompt failed (the row then has
    lossless = None); bad_prompt: why the prompt cannot be tokenized (the row is failed); run_state:
    (run_state_prompts, run_state_restored) of a drafter that carries state across prompts;
    before_append(): runs just before the row is written (e.g. to checkpoint the drafter's run state);
    stochastic: the drafter samples its drafts, so the output is compared with AR's in distribution only
    (lossless None, see the module docstring)."""

    prompt: Any
    prompt_ids: list[int]
    cell: Cell
    draw: Draw = field(default_factory=Draw)
    reference: list[int] | None = None
    bad_prompt: str | None = None
    run_state: tuple[int, bool] | None = None
    before_append: Callable[[], None] | None = None
    stochastic: bool = False


def _run_one(
    engine: VerificationEngine,
    speculator: Speculator,
    run: PromptRun,
    env: dict[str, Any],
    results_file: Path,
) -> dict[str, Any]:
    """Generate one prompt and append its row (a `ResultRow`, checked as it is written); return the row as
    written. Any Exception (non-finite logits, out of memory, a drafter's bug, a prompt that is empty or
    longer than the context window) makes a row with status "failed" and the reason in `error`, and the
    sweep goes on; KeyboardInterrupt and SystemExit propagate, so Ctrl-C stops the sweep with only
    complete rows on disk. env: the fields every row of the cell carries (names the schema does not
    know go to the row's `extra`)."""
    cell, draw, prompt_ids = run.cell, run.draw, run.prompt_ids
    row: ResultRow = cell.row(run.prompt.prompt_id, draw.sample_idx, draw.sample_seed)
    row.prompt_tokens = len(prompt_ids)
    row.fill(prompt_fields(getattr(run.prompt, "text", None), prompt_ids))
    row.fill(seed_fields(draw.run_seed, draw.sample_seed, draw.sequence_seed))
    row.fill(env, strict=False)
    if run.run_state is not None:
        row.run_state_prompts, row.run_state_restored = run.run_state
    row.timestamp = time.time()
    sampler = TreeSampler()
    try:
        if run.bad_prompt is not None:
            raise ValueError(run.bad_prompt)
        gen = generate(
            engine,
            speculator.drafter,
            prompt_ids,
            cell.max_new_tokens,
            on_step=sampler,
            sampling=draw.params,
            seed=draw.sequence_seed,
            sizer=speculator.sizer,
        )
        row.fill(generation_row(gen))
        row.fill(degenerate_fields(row))
        row.sample_tree = sample_tree(sampler.trees)
        row.fill(exact_fields(sampler.views))
        verdict = row_verdict(
            engine,
            prompt_ids,
            gen.output_ids,
            run.reference,
            is_reference=cell.method == "ar",
            stochastic=run.stochastic,
            sampling=draw.params,
            seed=draw.sequence_seed,
        )
        row.fill(verdict)
        row.status = "ok"
    except Exception as exc:  # a failed prompt, not a dead sweep (KeyboardInterrupt is no Exception)
        row.status, row.error = "failed", f"{type(exc).__name__}: {exc}"
        row.traceback = traceback.format_exc()
        if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
            del exc
            _free_memory()
    if run.before_append is not None:
        run.before_append()
    append_row(results_file, row)
    return row.to_dict()
