"""What the user sees of a running cell: a tqdm bar on a terminal, else one plain line per prompt
(`CellProgress`). Messages go to the logger `goose.harness.runner` (the name the runner always logged under,
which Hydra's job log and users' logging settings address).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from goose.harness.cells import Cell

logger = logging.getLogger("goose.harness.runner")

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
