"""Runs one cell (model x bench x method x config) prompt by prompt and writes result rows.

For every prompt the greedy AR reference is looked up in the results on disk (rows of method
`ar` with the same model, bench, max_new_tokens and dtype) and, when missing, generated first and
written as an AR row: so every method row carries a losslessness verdict, and AR timings of the
same session sit beside the method's. Cells already in the results are skipped (resume).

Parallel jobs of one (model, bench) (Hydra's joblib or submitit launcher) share one results file
and one AR reference per prompt: it is generated under an exclusive lock on `<file>.lock`, after
reading the rows other jobs appended meanwhile, so it is written once. Should a file still hold
two rows of one cell, the first one wins (as in `analysis.load`).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import math
import os
import platform
import subprocess
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from goose.engine.decode import Generation, generate
from goose.engine.drafter import ARDrafter, Drafter
from goose.engine.tree import DraftTree
from goose.engine.verifier import VerificationEngine
from goose.records.results import append_row, cell_key, config_hash

SESSION_ID = uuid.uuid4().hex[:12]


def environment() -> dict[str, Any]:
    """Hardware, library versions and git commit, recorded in every row."""
    import transformers

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=5,
        ).stdout.strip()
        commit = commit + ("-dirty" if dirty else "") if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "hardware": {
            "cpu": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
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
    not pay for lazy initialisation (allocator, kernels, thread pools)."""
    ids = list(token_ids)[:32] or [0]
    logits = engine.prefill(ids)
    anchor = int(logits[-1].argmax())
    tree = DraftTree.chain(anchor, [anchor] * 3)
    tree.add(anchor + 1 if anchor + 1 < logits.shape[-1] else 0, 0, tree.sources[1])
    engine.verify(tree, budget=4)


@dataclass
class Cell:
    """What identifies a cell, copied into each row."""

    model: str
    bench: str
    method: str
    method_config: dict[str, Any]
    max_new_tokens: int
    dtype: str

    def row_base(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "bench": self.bench,
            "method": self.method,
            "method_config": self.method_config,
            "config_hash": config_hash(self.method_config),
            "max_new_tokens": self.max_new_tokens,
            "dtype": self.dtype,
        }


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
        "drafter_stats": gen.drafter_stats,
        "stop": gen.stop,
        "output_ids": gen.output_ids,
    }


def near_tie_threshold(top_logit: float, dtype: torch.dtype) -> float:
    """2 ulps of the top logit in `dtype`, and at least 1e-4 (measured fp32 noise between a tree
    forward and sequential decoding is ~4e-5)."""
    ulp = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(top_logit), 1e-30)))
    return max(2.0 * ulp, 1e-4)


def lossless_fields(
    engine: VerificationEngine, prompt_ids: list[int], output: list[int], reference: list[int]
) -> dict[str, Any]:
    """Compare with the AR reference; on a mismatch, teacher-force AR's prefix up to the first
    differing index and record the top-2 margin there. A margin within 2 ulps of the top logit in
    the model's dtype (at least 1e-4, the fp32 tree-vs-sequential noise) is a near-tie."""
    if output == reference:
        return {"lossless": True, "first_diff": None, "diff_margin": None, "near_tie": None}
    idx = next(
        (i for i, (a, b) in enumerate(zip(output, reference, strict=False)) if a != b),
        min(len(output), len(reference)),
    )
    top1, top2, margin, top_value = engine.next_token_margin(prompt_ids + reference[:idx])
    tol = near_tie_threshold(top_value, engine.dtype)
    return {
        "lossless": False,
        "first_diff": idx,
        "diff_tokens": [
            reference[idx] if idx < len(reference) else None,
            output[idx] if idx < len(output) else None,
        ],
        "diff_margin": margin,
        "diff_top2": [top1, top2],
        "near_tie": margin <= tol,
        "near_tie_threshold": tol,
    }


def run_cell(
    engine: VerificationEngine,
    tokenizer: Any,
    prompts: Sequence[Any],
    cell: Cell,
    make_drafter: Callable[[], Drafter],
    results_file: Path,
    extra: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run (or resume) a cell; returns the rows of this cell and of the AR reference, in prompt
    order, as they are on disk after the run."""
    env = {**environment(), **(extra or {})}
    ar_cell = Cell(cell.model, cell.bench, "ar", ARDrafter().config(), cell.max_new_tokens, cell.dtype)
    existing: dict[tuple, dict[str, Any]] = {}
    _warn_if_cut(results_file)
    offset = _merge_new_rows(existing, results_file, 0)
    drafter = make_drafter()
    ar_drafter = ARDrafter()
    out_rows: list[dict[str, Any]] = []
    done = sum(cell_key({**cell.row_base(), "prompt_id": p.prompt_id}) in existing for p in prompts)
    if done:
        log(
            f"{done} of {len(prompts)} prompts of this cell are already in {results_file}: their rows "
            "are reported, not re-run (resume; out_dir=<another folder> runs them afresh)"
        )
    for i, prompt in enumerate(prompts):
        prompt_ids, bad_prompt = _tokenize(tokenizer, prompt)
        ar_key = cell_key({**ar_cell.row_base(), "prompt_id": prompt.prompt_id})
        key = cell_key({**cell.row_base(), "prompt_id": prompt.prompt_id})
        if ar_key not in existing:
            with _reference_lock(results_file):  # another job may be writing this very reference
                offset = _merge_new_rows(existing, results_file, offset)
                if ar_key not in existing:
                    existing[ar_key] = _run_one(
                        engine, ar_drafter, prompt, prompt_ids, ar_cell, None, env, results_file, bad_prompt
                    )
                    if existing[ar_key].get("status") != "ok":
                        error = existing[ar_key].get("error")
                        log(f"[{i + 1}/{len(prompts)}] ar {prompt.prompt_id}: FAILED: {error}")
        ar_row = existing[ar_key]
        reference = ar_row.get("output_ids") if ar_row.get("status", "ok") == "ok" else None
        if key not in existing:
            existing[key] = _run_one(
                engine, drafter, prompt, prompt_ids, cell, reference, env, results_file, bad_prompt
            )
            r = existing[key]
            log(
                f"[{i + 1}/{len(prompts)}] {cell.method} {prompt.prompt_id}: "
                + (
                    f"{r['generated_tokens']} tok, tau {r['tau']:.2f}, {r['tokens_per_s']:.1f} tok/s, "
                    f"lossless {r['lossless']}"
                    if r.get("status") == "ok"
                    else f"FAILED: {r.get('error')}"
                )
            )
        out_rows.append(existing[key])
        if cell.method != "ar":
            out_rows.append(existing[ar_key])
    return out_rows


def _merge_new_rows(existing: dict[tuple, dict[str, Any]], path: Path, offset: int) -> int:
    """Add the "ok" rows appended to `path` from byte `offset` on to `existing` (by cell key, the
    first row wins); return the offset after the last whole line read. Reading only what was
    appended keeps a long cell linear in the file size. A cut line (a writer killed mid-write) is
    skipped; the next append seals it off with a newline."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return offset
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            warnings.warn(f"{path}: skipping a cut or corrupt line ({len(raw)} bytes)", stacklevel=2)
            continue
        if isinstance(row, dict) and row.get("status", "ok") == "ok":
            existing.setdefault(cell_key(row), row)
    return offset + end


@contextlib.contextmanager
def _reference_lock(results_file: Path) -> Iterator[None]:
    """Exclusive flock on `<results_file>.lock` (a separate file: `append_row` locks the results
    file itself, per row)."""
    results_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(results_file.with_name(results_file.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _warn_if_cut(results_file: Path) -> None:
    """Warn when the results file ends in a line cut mid-write (a writer killed before its newline):
    the line is skipped, its cell re-run, and the next append seals it off. Checked under a shared
    flock, so that a row another job is appending right now (`append_row` holds the exclusive
    lock while it writes) is not taken for a cut one."""
    try:
        fd = os.open(results_file, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20))) if size else b"\n"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    if not tail.endswith(b"\n"):
        cut = len(tail) - tail.rfind(b"\n") - 1
        warnings.warn(
            f"{results_file}: skipping a cut or corrupt last line ({cut} bytes, no newline): its cell is re-run",
            stacklevel=3,
        )


def _tokenize(tokenizer: Any, prompt: Any) -> tuple[list[int], str | None]:
    """(token ids, None), or ([], the reason) when the prompt cannot be tokenized (the prompt is
    then recorded as failed, and the sweep goes on)."""
    try:
        return list(tokenizer(prompt.text).input_ids), None
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
) -> dict[str, Any]:
    """Generate one prompt and append its row. Any Exception (non-finite logits, out of memory, a
    drafter's bug, a prompt that is empty or longer than the context window) makes a row with
    status "failed" and the reason in `error`, and the sweep goes on; KeyboardInterrupt and
    SystemExit propagate, so Ctrl-C stops the sweep with only complete rows on disk.

    reference: the AR output for this prompt; None for the AR row itself (cell.method == "ar"),
    or when the AR run of this prompt failed (the row then has lossless = None)."""
    row: dict[str, Any] = {
        **cell.row_base(),
        "prompt_id": prompt.prompt_id,
        "prompt_tokens": len(prompt_ids),
        **env,
        "timestamp": time.time(),
    }
    sampler = TreeSampler()
    try:
        if bad_prompt is not None:
            raise ValueError(bad_prompt)
        gen = generate(engine, drafter, prompt_ids, cell.max_new_tokens, on_step=sampler)
        row.update(generation_row(gen))
        row["sample_tree"] = sample_tree(sampler.trees)
        if cell.method == "ar":  # this is the AR reference itself
            row.update({"lossless": True, "first_diff": None, "diff_margin": None, "near_tie": None})
        elif reference is None:
            row.update({"lossless": None, "first_diff": None, "diff_margin": None, "near_tie": None})
            row["lossless_error"] = "no AR reference: the AR run of this prompt failed"
        else:
            row.update(lossless_fields(engine, prompt_ids, gen.output_ids, reference))
        row["status"] = "ok"
    except Exception as exc:  # a failed prompt, not a dead sweep (KeyboardInterrupt is no Exception)
        error = f"{type(exc).__name__}: {exc}"
        row.update({"status": "failed", "error": error, "traceback": traceback.format_exc()})
        if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
            del exc
            _free_memory()
    append_row(results_file, row)
    return row
