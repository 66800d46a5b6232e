"""Progress of a cell (goose.harness.runner.CellProgress, through run_cell on a tiny random model):
plain lines with [i/n], elapsed and ETA where stderr is no terminal; where it is, one tqdm bar per
cell whose per-prompt lines reach only the non-terminal handlers (the job's log file), while
warnings (a failed prompt) still reach the terminal; the resume message either way.
"""

from __future__ import annotations

import io
import logging
import re

import pytest

from baselines.pld import PromptLookupDrafter
from goose.harness.runner import run_cell
from tests.toy_harness import POISON, ToyTokenizer, cell_of, one_thread, tiny_engine, toy_prompts  # noqa: F401

RUNNER = "goose.harness.runner"
LINE = re.compile(
    r"^\[(\d)/3\] pld p\d: \d+ tok, tau [\d.]+, [\d.]+ tok/s, lossless True "
    r"\(elapsed \d\d:\d\d, ETA \d\d:\d\d\)$"
)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(out, progress, prompts=None):
    return run_cell(
        tiny_engine(),
        ToyTokenizer(),
        prompts or toy_prompts(3),
        cell_of("pld", PromptLookupDrafter()),
        PromptLookupDrafter,
        out,
        progress=progress,
    )


@pytest.fixture
def streams():
    """The root logger writes to a (fake) terminal and to a log file, as under Hydra."""
    terminal, logfile = FakeTerminal(), io.StringIO()
    root = logging.getLogger()
    before, level = root.handlers, root.level
    root.handlers = [logging.StreamHandler(terminal), logging.StreamHandler(logfile)]
    root.setLevel(logging.INFO)
    yield terminal, logfile
    root.handlers = before
    root.setLevel(level)


@pytest.fixture
def failing_prompt(monkeypatch):
    """PLD's generation raises on the prompt holding POISON (a drafter bug): its row is failed."""
    import goose.harness.runner as runner

    real = runner.generate

    def generate(engine, drafter, prompt_ids, *args, **kwargs):
        if POISON in prompt_ids and isinstance(drafter, PromptLookupDrafter):
            raise ZeroDivisionError("drafter bug")
        return real(engine, drafter, prompt_ids, *args, **kwargs)

    monkeypatch.setattr(runner, "generate", generate)


def test_plain_lines_with_eta_then_the_resume_message(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=RUNNER)
    _run(tmp_path / "r.jsonl", progress=False)
    lines = [r.getMessage() for r in caplog.records if r.name == RUNNER]
    assert [int(LINE.match(line).group(1)) for line in lines] == [1, 2, 3], lines
    assert lines[-1].endswith("ETA 00:00)")
    caplog.clear()
    _run(tmp_path / "r.jsonl", progress=False)
    (message,) = [r.getMessage() for r in caplog.records if r.name == RUNNER]
    assert message.startswith("3 of 3 prompts of this cell are already in") and "(resume;" in message


def test_bar_keeps_prompt_lines_off_the_terminal(tmp_path, capsys, streams):
    """With the bar on, the handler writing to a terminal gets no per-prompt line, the one writing
    to a log file every one; the handlers are restored afterwards."""
    terminal, logfile = streams
    handlers = logging.getLogger().handlers
    _run(tmp_path / "r.jsonl", progress=True)
    assert logging.getLogger().handlers is handlers  # the _AboveBar stand-ins are gone
    assert all(f"[{i}/3] pld p{i - 1}:" in logfile.getvalue() for i in (1, 2, 3))
    assert terminal.getvalue() == ""
    bar = capsys.readouterr().err.split("\r")[-1]
    assert bar.startswith("tiny/toy/pld: 100%") and "3/3" in bar and "tau=" in bar and "tok/s=" in bar


def test_failure_is_a_warning_on_the_terminal_and_in_the_bar(tmp_path, capsys, streams, failing_prompt):
    terminal, logfile = streams
    _run(tmp_path / "r.jsonl", progress=True, prompts=toy_prompts(3, poison_at=2))
    (warning,) = terminal.getvalue().splitlines()  # only the failure reaches the terminal
    assert warning.startswith("[3/3] pld p2: FAILED: ZeroDivisionError: drafter bug (elapsed")
    assert "[1/3] pld p0:" in logfile.getvalue() and "[3/3] pld p2: FAILED" in logfile.getvalue()
    assert "failed=1" in capsys.readouterr().err.split("\r")[-1]
