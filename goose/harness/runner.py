"""Runs one cell (model x bench x method x config) prompt by prompt and writes result rows.

For every prompt the greedy AR reference is looked up in the results on disk (rows of method
`ar` with the same model, bench, max_new_tokens, dtype and chat template setting) and, when missing, generated first and
written as an AR row: so every method row carries a losslessness verdict, and AR timings of the
same session sit beside the method's. Cells already in the results are skipped (resume).

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
import logging
import math
import os
import platform
import subprocess
import sys
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock
from tqdm import tqdm

from goose.engine.core.decode import Generation, generate
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.sampling import GREEDY, SamplingParams, derive_seed
from goose.engine.core.tree import DraftTree
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.packed_linear import native_bf16
from goose.harness.chat import encode_prompt
from goose.harness.run_state import RunStateStore
from goose.records.provenance import chat_template_fields, prompt_fields, seed_fields
from goose.records.results import append_lock, append_row, cell_key, config_hash, read_appended

SESSION_ID = uuid.uuid4().hex[:12]
logger = logging.getLogger(__name__)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux; `platform` elsewhere, often just the ISA)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict[str, Any]:
    """Hardware, library versions and git commit, recorded in every row."""
    import transformers

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=Path(__file__).resolve().parent, timeout=5
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        commit = commit + ("-dirty" if dirty else "") if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "hardware": {
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            # the widest vector ISA torch dispatches to, and whether oneDNN has bf16 kernels here
            # (without them bf16 products run as fp32, goose.engine.forward.packed_linear)
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "onednn_bf16": native_bf16(),
            "torch_threads": torch.get_num_threads(),
            "gpu": gpu,
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "git_commit": commit,
        "session_id": SESSION_ID,
    }


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


@dataclass
class Cell:
    """What identifies a cell, copied into each row. chat_template: the prompts are put in the
    tokenizer's chat template (goose.harness.chat), else raw; sampling: the warp (temperature 0 =
    greedy); both part of the row's key."""

    model: str
    bench: str
    method: str
    method_config: dict[str, Any]
    max_new_tokens: int
    dtype: str
    chat_template: bool = False
    sampling: SamplingParams = GREEDY

    def row_base(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "bench": self.bench,
            "method": self.method,
            "method_config": self.method_config,
            "config_hash": config_hash(self.method_config),
            "max_new_tokens": self.max_new_tokens,
            "dtype": self.dtype,
            "chat_template": self.chat_template,
            **self.sampling.as_dict(),
        }


@dataclass(frozen=True)
class SamplingPlan:
    """The `sampling` config group beyond the warp: the run's seed and the samples per prompt."""

    seed: int = 0
    num_samples: int = 1

    def samples(self, params: SamplingParams) -> list[tuple[int | None, int | None]]:
        """(sample_idx, sample_seed) of each sample of a prompt; greedy decoding has one, unseeded."""
        if params.greedy:
            return [(None, None)]
        return [(i, derive_seed(self.seed, i)) for i in range(self.num_samples)]


@dataclass(frozen=True)
class Draw:
    """One generation's sampling: the warp, which sample of the prompt it is, and the seeds."""

    params: SamplingParams = GREEDY
    sample_idx: int | None = None
    sample_seed: int | None = None
    sequence_seed: int = 0
    run_seed: int = 0  # the sampling group's seed (provenance only)

    def fields(self) -> dict[str, Any]:
        """What a row records of it (the warp itself is in the cell's fields)."""
        return {"sample_idx": self.sample_idx, "sample_seed": self.sample_seed}


def sequence_seed(sample_seed: int | None, prompt_id: Any) -> int:
    """The seed of one generation: the sample's seed mixed with the prompt, so that the prompts of a
    run draw independent noise."""
    return 0 if sample_seed is None else derive_seed(sample_seed, str(prompt_id))


def sample_tree(gen_trees: list[tuple[DraftTree, list[int]]]) -> dict[str, Any] | None:
    """The largest tree among the recorded ones, as plain lists (for the topology figure)."""
    if not gen_trees:
        return None
    tree, accepted = max(gen_trees, key=lambda ta: len(ta[0]))
    return {
        "tokens": tree.tokens,
        "parents": tree.parents,
        "sources": tree.sources,
        "depths": tree.depths,
        "accepted": accepted,
    }


class TreeSampler:
    """A step callback that keeps the trees of the first `keep` steps of a prompt (for the
    topology figure) with their accepted paths."""

    def __init__(self, keep: int = 16) -> None:
        self.keep, self.trees = keep, []

    def __call__(self, tree: DraftTree, outcome: Any, record: Any) -> None:
        if len(self.trees) < self.keep:
            self.trees.append((tree, outcome.accepted_nodes))


def generation_row(gen: Generation) -> dict[str, Any]:
    """The measured fields of a row."""
    n = len(gen.output_ids)
    return {
        "generated_tokens": n,
        "forward_calls": gen.forward_calls,
        "tau": gen.tau,
        "wall_time_s": gen.wall_time_s,
        "tokens_per_s": n / gen.wall_time_s if gen.wall_time_s else 0.0,
        **gen.time_split(),
        "offered": gen.totals("offered"),
        "accepted": gen.totals("accepted"),
        "routes": gen.routes(),
        "step_accepted": [s.accepted_len for s in gen.steps],
        "step_tree_size": [s.tree_size for s in gen.steps],
        **gen.shape_totals(),  # acceptance by depth and sibling rank (goose.records.acceptance)
        "drafter_stats": gen.drafter_stats,
        "stop": gen.stop,
        "graph_captures": gen.graph_captures,
        "graph_capture_s": gen.graph_capture_s,
        "output_ids": gen.output_ids,
    }


def near_tie_threshold(top_logit: float, dtype: torch.dtype) -> float:
    """2 ulps of the top logit in `dtype`, and at least 1e-4 (measured fp32 noise between a tree
    forward and sequential decoding is ~4e-5)."""
    ulp = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(top_logit), 1e-30)))
    return max(2.0 * ulp, 1e-4)


def lossless_fields(
    engine: VerificationEngine,
    prompt_ids: list[int],
    output: list[int],
    reference: list[int],
    sampling: SamplingParams = GREEDY,
    seed: int = 0,
) -> dict[str, Any]:
    """Compare with the AR reference; on a mismatch, teacher-force AR's prefix up to the first
    differing index and record the top-2 margin there. A margin within 2 ulps of the top logit in
    the model's dtype (at least 1e-4, the fp32 tree-vs-sequential noise) is a near-tie. At
    temperature > 0 the margin is that of the perturbed scores log p / ... + g that AR's draw
    compared (the same noise), and the tolerance is divided by T."""
    if output == reference:
        return {"lossless": True, "first_diff": None, "diff_margin": None, "near_tie": None}
    idx = next(
        (i for i, (a, b) in enumerate(zip(output, reference, strict=False)) if a != b),
        min(len(output), len(reference)),
    )
    return {
        "lossless": False,
        "first_diff": idx,
        "diff_tokens": [
            reference[idx] if idx < len(reference) else None,
            output[idx] if idx < len(output) else None,
        ],
        **divergence_verdict(engine, prompt_ids + reference[:idx], sampling, seed),
    }


def divergence_verdict(
    engine: VerificationEngine,
    prefix_ids: list[int],
    sampling: SamplingParams = GREEDY,
    seed: int = 0,
) -> dict[str, Any]:
    """The verdict on a divergence after `prefix_ids` (the prompt + AR's output up to the first
    differing token): the top-2 margin of a teacher-forced forward there, and whether it is a
    near-tie (within `near_tie_threshold`, divided by T at temperature > 0) or a real mismatch."""
    top1, top2, margin, top_value = engine.next_token_margin(prefix_ids, sampling, seed)
    tol = near_tie_threshold(top_value, engine.dtype) / (1.0 if sampling.greedy else sampling.temperature)
    return {
        "diff_margin": margin,
        "diff_top2": [top1, top2],
        "near_tie": margin <= tol,
        "near_tie_threshold": tol,
    }


PROMPT_LINE = "goose_prompt_line"  # LogRecord attribute marking a per-prompt line (see CellProgress)


def _writes_to_terminal(handler: logging.Handler) -> bool:
    """A console handler whose stream is a terminal (not a log file, not a pipe)."""
    if not isinstance(handler, logging.StreamHandler) or isinstance(handler, logging.FileHandler):
        return False
    try:
        return bool(handler.stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _terminal_width(stream: Any) -> int:
    """Columns of the terminal `stream` writes to; 0 when it is no terminal, or a pseudo-terminal
    that reports no size (a bar could not be drawn there)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (AttributeError, OSError, ValueError):  # no stream, no file descriptor, closed
        return 0


class _AboveBar(logging.Handler):
    """Stands in for a terminal handler while a progress bar is drawn: drops per-prompt lines
    (records marked `PROMPT_LINE`; the bar shows that progress) and writes every other record
    through tqdm's `external_write_mode`, which clears the bar first and redraws it below."""

    def __init__(self, inner: logging.Handler) -> None:
        super().__init__(inner.level)
        self.inner = inner

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, PROMPT_LINE, False):
            return
        with tqdm.external_write_mode(file=getattr(self.inner, "stream", None)):
            self.inner.handle(record)


class CellProgress:
    """What the user sees of a running cell (`run_cell` drives it; use it as a context manager).

    With `bar` (run_cell's default where stderr is a terminal): one tqdm bar per cell on stderr,
    described `model/bench/method`, counting the cell's prompts (those already in the results file
    count as done from the start), with tqdm's `elapsed<ETA` and as postfix the method's running
    τ and tok/s (ratios of sums over the cell's ok rows so far, resumed ones included, as in the
    summary table) and `failed=k` once a prompt failed. The per-prompt lines still go to the
    logger `goose.harness.runner`, but while the bar is drawn, handlers that write to a terminal
    skip them (`_AboveBar`): they land in the log files only (Hydra's `<job dir>/<job name>.log`),
    and warnings (a failed prompt, a failed AR reference) print above the bar.

    Without `bar` (stderr is no terminal: CI, SLURM, a redirect to a file; tqdm's redraws would
    litter such logs): one plain line per prompt run, to the `log` callback if given, else to the
    logger (INFO; WARNING for a failed prompt), e.g.
    `[3/8] goose 83: 128 tok, tau 2.31, 19.0 tok/s, lossless True (elapsed 00:41, ETA 01:08)`.

    Both ETAs are the mean wall time per prompt run so far in this call (AR reference included)
    times the prompts left to run (tqdm with smoothing=0), so that resumed prompts, which cost
    nothing, do not make the ETA optimistic.
    """

    def __init__(
        self, cell: Cell, total: int, done: int, bar: bool, log: Callable[[str], None] | None = None
    ) -> None:
        self.method, self.total, self.done, self.log = cell.method, total, done, log
        self.ran = self.counted = self.failed = 0
        self.tokens = self.calls = 0
        self.wall = 0.0
        self.start = time.perf_counter()
        self._saved: list[tuple[logging.Logger, list[logging.Handler]]] = []
        self.bar = tqdm(
            total=total,
            initial=done,
            desc=f"{cell.model}/{cell.bench}/{cell.method}",
            unit="prompt",
            file=sys.stderr,
            disable=not bar,
            smoothing=0,
            dynamic_ncols=True,
        )

    def __enter__(self) -> CellProgress:
        if not self.bar.disable:  # while the bar is drawn, terminal handlers go through _AboveBar
            node: logging.Logger | None = logger
            while node is not None:
                if any(_writes_to_terminal(h) for h in node.handlers):
                    self._saved.append((node, node.handlers))
                    node.handlers = [_AboveBar(h) if _writes_to_terminal(h) else h for h in node.handlers]
                node = node.parent if node.propagate else None
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()
        for node, handlers in self._saved:
            node.handlers = handlers
        self._saved.clear()

    def warn(self, message: str) -> None:
        """A message shown in every mode (above the bar where one is drawn)."""
        if self.log is not None:
            self.log(message)
        else:
            logger.warning(message)

    def prompt(self, index: int, prompt_id: Any, row: dict[str, Any], ran: bool, resumed: bool) -> None:
        """Report prompt `index` (0-based) of the cell, whose method row is `row`. ran: this call
        generated the row; resumed: the row was in the results file when the cell started (then
        it counts only towards τ and tok/s)."""
        ok = row.get("status", "ok") == "ok"
        if ok:
            self.tokens += row["generated_tokens"]
            self.calls += row["forward_calls"]
            self.wall += row["wall_time_s"]
        if not resumed:
            self.counted += 1
            self.ran += int(ran)
            self.failed += int(ran and not ok)
        if not self.bar.disable:
            postfix = {"tau": f"{self.tokens / self.calls if self.calls else 0.0:.2f}"}
            postfix["tok/s"] = f"{self.tokens / self.wall if self.wall else 0.0:.1f}"
            if self.failed:
                postfix["failed"] = str(self.failed)
            self.bar.set_postfix(postfix, refresh=resumed)
            if not resumed:
                self.bar.update(1)
        if resumed or not ran:  # not ran: written meanwhile by another job running the same cell
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.ran * (self.total - self.done - self.counted)
        result = (
            f"{row['generated_tokens']} tok, tau {row['tau']:.2f}, {row['tokens_per_s']:.1f} tok/s, "
            f"lossless {row['lossless']}"
            if ok
            else f"FAILED: {row.get('error')}"
        )
        line = (
            f"[{index + 1}/{self.total}] {self.method} {prompt_id}: {result} "
            f"(elapsed {tqdm.format_interval(elapsed)}, ETA {tqdm.format_interval(eta)})"
        )
        if self.log is not None:
            self.log(line)
        elif ok:
            logger.info(line, extra={PROMPT_LINE: True})
        else:
            logger.warning(line)


def run_cell(
    engine: VerificationEngine,
    tokenizer: Any,
    prompts: Sequence[Any],
    cell: Cell,
    make_drafter: Callable[[], Drafter],
    results_file: Path,
    extra: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    progress: bool | None = None,
    plan: SamplingPlan | None = None,
) -> list[dict[str, Any]]:
    """Run (or resume) a cell; returns the rows of this cell and of the AR reference, in prompt
    order (then sample order), as they are on disk after the run. `plan`: the seed and samples per
    prompt when `cell.sampling` samples.

    Progress (`CellProgress`): a tqdm bar when `progress` is True, one plain line per prompt when
    it is False; None (the default) draws the bar where stderr is a terminal with a size and no
    `log` callback is given. Lines and messages go to `log` if given, else to the logger
    `goose.harness.runner` (under Hydra: the console and the job's log file)."""
    env = {**environment(), **(extra or {}), **chat_template_fields(tokenizer, cell.chat_template)}
    ar_cell = Cell(  # the AR reference of the same prompt form (raw or in the chat template)
        cell.model,
        cell.bench,
        "ar",
        ARDrafter().config(),
        cell.max_new_tokens,
        cell.dtype,
        cell.chat_template,
        cell.sampling,
    )
    plan = plan or SamplingPlan()
    units = [(p, idx, seed) for p in prompts for idx, seed in plan.samples(cell.sampling)]
    existing: dict[tuple, dict[str, Any]] = {}
    _warn_if_cut(results_file)
    offset = _merge_new_rows(existing, results_file, 0)
    drafter = make_drafter()
    ar_drafter = ARDrafter()
    out_rows: list[dict[str, Any]] = []
    resumed = [
        cell_key({**cell.row_base(), "prompt_id": p.prompt_id, "sample_seed": seed}) in existing
        for p, _, seed in units
    ]
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
    store = RunStateStore(results_file, cell.row_base()) if drafter.carries_run_state else None
    seen: list[str] = []  # ids of the prompts whose runs shaped the drafter's state, in order
    restored, state_checked = False, False
    stochastic = drafter.samples_drafts and not cell.sampling.greedy
    unit_ids = [p.prompt_id if idx is None else f"{p.prompt_id}#{idx}" for p, idx, _ in units]
    with CellProgress(cell, len(units), sum(resumed), progress, log) as report:
        for i, (prompt, sample_idx, sample_seed) in enumerate(units):
            prompt_ids, bad_prompt = _tokenize(tokenizer, prompt, cell.chat_template)
            sample = {"prompt_id": prompt.prompt_id, "sample_seed": sample_seed}
            ar_key = cell_key({**ar_cell.row_base(), **sample})
            key = cell_key({**cell.row_base(), **sample})
            draw = Draw(
                cell.sampling,
                sample_idx,
                sample_seed,
                sequence_seed(sample_seed, prompt.prompt_id),
                plan.seed,
            )
            if ar_key not in existing:
                with _reference_lock(results_file):  # another job may be writing this very reference
                    offset = _merge_new_rows(existing, results_file, offset)
                    if ar_key not in existing:
                        existing[ar_key] = _run_one(
                            engine,
                            ar_drafter,
                            prompt,
                            prompt_ids,
                            ar_cell,
                            None,
                            env,
                            results_file,
                            bad_prompt,
                            draw=draw,
                        )
                        written.add(ar_key)
                        if existing[ar_key].get("status") != "ok" and cell.method != "ar":
                            error = existing[ar_key].get("error")
                            report.warn(f"[{i + 1}/{len(prompts)}] ar {prompt.prompt_id}: FAILED: {error}")
            ar_row = existing[ar_key]
            reference = ar_row.get("output_ids") if ar_row.get("status", "ok") == "ok" else None
            if key not in existing:
                fields, before_append = None, None
                if store is not None:
                    if not state_checked:  # the first prompt this process runs: restore the state
                        state_checked = True
                        restored = _restore_run_state(store, drafter, unit_ids[:i], report)
                        seen = unit_ids[:i] if restored else []
                    fields = {"run_state_prompts": len(seen), "run_state_restored": restored}
                    ids_after = [*seen, unit_ids[i]]
                    before_append = lambda row, ids=ids_after: store.save(ids, drafter.run_state())  # noqa: E731
                existing[key] = _run_one(
                    engine,
                    drafter,
                    prompt,
                    prompt_ids,
                    cell,
                    reference,
                    env,
                    results_file,
                    bad_prompt,
                    fields,
                    before_append,
                    draw=draw,
                    stochastic=stochastic,
                )
                written.add(key)
                if store is not None:
                    seen.append(unit_ids[i])
                    store.prune(len(seen))
            report.prompt(i, unit_ids[i], existing[key], ran=key in written, resumed=resumed[i])
            out_rows.append(existing[key])
            if cell.method != "ar":
                out_rows.append(existing[ar_key])
    return out_rows


def _restore_run_state(store: RunStateStore, drafter: Drafter, before: list[str], report: Any) -> bool:
    """Restore the drafter's state after the cell's prompts `before` (already in the results)
    from its checkpoint; True if restored. Without a matching checkpoint the cell goes on with a
    fresh state and says that its later rows may differ from an uninterrupted run."""
    if not before:
        return False
    state = store.load(before)
    if state is None:
        report.warn(
            f"{drafter.name} carries state across prompts, but no checkpoint of it after the "
            f"{len(before)} prompts already in the results was found in {store.folder}: the cell "
            "goes on with a fresh state, so its next rows may differ from an uninterrupted run "
            "(each row records the state it started from: run_state_prompts)"
        )
        return False
    drafter.restore_run_state(state)
    return True


def _merge_new_rows(existing: dict[tuple, dict[str, Any]], path: Path, offset: int) -> int:
    """Add the "ok" rows appended to `path` from byte `offset` on to `existing` (by cell key, the
    first row wins); return the offset after the last whole line read (`read_appended`)."""
    rows, offset = read_appended(path, offset)
    for row in rows:
        if row.get("status", "ok") == "ok":
            existing.setdefault(cell_key(row), row)
    return offset


def _reference_lock(results_file: Path) -> FileLock:
    """The exclusive lock under which an AR reference is looked up and, if still missing,
    generated and appended: a `FileLock` on `<results_file>.lock`, held for the whole generation,
    so that parallel jobs write one reference per prompt. A separate file from `append_lock`'s,
    so that other jobs' appends do not wait for the generation."""
    results_file.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(results_file.with_name(results_file.name + ".lock"))


def _warn_if_cut(results_file: Path) -> None:
    """Warn when the results file ends in a line cut mid-write (a writer killed before its newline):
    the line is skipped, its cell re-run, and the next append seals it off. Checked under
    `append_lock`, so that a row another job is appending right now is not taken for a cut one."""
    if not results_file.exists():
        return
    with append_lock(results_file), results_file.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - (1 << 20)))
        tail = fh.read() if size else b"\n"
    if not tail.endswith(b"\n"):
        cut = len(tail) - tail.rfind(b"\n") - 1
        warnings.warn(
            f"{results_file}: skipping a cut or corrupt last line ({cut} bytes, no newline): its cell is re-run",
            stacklevel=3,
        )


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


def _run_one(
    engine: VerificationEngine,
    drafter: Drafter,
    prompt: Any,
    prompt_ids: list[int],
    cell: Cell,
    reference: list[int] | None,
    env: dict[str, Any],
    results_file: Path,
    bad_prompt: str | None = None,
    fields: dict[str, Any] | None = None,
    before_append: Callable[[dict[str, Any]], None] | None = None,
    draw: Draw | None = None,
    stochastic: bool = False,
) -> dict[str, Any]:
    """Generate one prompt and append its row (with `fields` added; `before_append(row)` runs
    just before the row is written, e.g. to checkpoint the drafter's run state). Any Exception (non-finite logits, out of memory, a
    drafter's bug, a prompt that is empty or longer than the context window) makes a row with
    status "failed" and the reason in `error`, and the sweep goes on; KeyboardInterrupt and
    SystemExit propagate, so Ctrl-C stops the sweep with only complete rows on disk.

    reference: the AR output for this prompt; None for the AR row itself (cell.method == "ar"),
    or when the AR run of this prompt failed (the row then has lossless = None).
    draw: the sample this row is (greedy: none); stochastic: the drafter samples its drafts, so
    the output is compared with AR's in distribution only (lossless None, see module docstring)."""
    draw = draw or Draw()
    row: dict[str, Any] = {
        **cell.row_base(),
        "prompt_id": prompt.prompt_id,
        **draw.fields(),
        "prompt_tokens": len(prompt_ids),
        **prompt_fields(getattr(prompt, "text", None), prompt_ids),
        **seed_fields(draw.run_seed, draw.sample_seed, draw.sequence_seed),
        **env,
        **(fields or {}),
        "timestamp": time.time(),
    }
    sampler = TreeSampler()
    try:
        if bad_prompt is not None:
            raise ValueError(bad_prompt)
        gen = generate(
            engine,
            drafter,
            prompt_ids,
            cell.max_new_tokens,
            on_step=sampler,
            sampling=draw.params,
            seed=draw.sequence_seed,
        )
        row.update(generation_row(gen))
        row["sample_tree"] = sample_tree(sampler.trees)
        if cell.method == "ar":  # this is the AR reference itself
            row.update({"lossless": True, "first_diff": None, "diff_margin": None, "near_tie": None})
        elif stochastic:
            row.update({"lossless": None, "first_diff": None, "diff_margin": None, "near_tie": None})
            row["lossless_check"] = "distribution"
            row["same_as_ar"] = gen.output_ids == reference if reference is not None else None
        elif reference is None:
            row.update({"lossless": None, "first_diff": None, "diff_margin": None, "near_tie": None})
            row["lossless_error"] = "no AR reference: the AR run of this prompt failed"
        else:
            row.update(
                lossless_fields(
                    engine, prompt_ids, gen.output_ids, reference, draw.params, draw.sequence_seed
                )
            )
        row["status"] = "ok"
    except Exception as exc:  # a failed prompt, not a dead sweep (KeyboardInterrupt is no Exception)
        error = f"{type(exc).__name__}: {exc}"
        row.update({"status": "failed", "error": error, "traceback": traceback.format_exc()})
        if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
            del exc
            _free_memory()
    if before_append is not None:
        before_append(row)
    append_row(results_file, row)
    return row
