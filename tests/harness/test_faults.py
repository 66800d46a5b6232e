"""Faults during a sweep (goose.harness.runner.run_cell on a tiny random model): a prompt that fails (NaN
or inf logits, out of memory, a drafter's exception) becomes a row with status "failed" and the
reason, the sweep goes on, and the summary counts the failure; a results file cut mid-line is read
with a warning and the cut cell re-run; Ctrl-C stops the sweep with only complete rows on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import goose.harness.runner as runner
from baselines.pld import PromptLookupDrafter
from goose.engine.core.drafter import ARDrafter
from goose.harness.job import print_summary
from goose.harness.runner import run_cell
from goose.method.drafter import GooseDrafter
from goose.records.metrics import cell_summary
from goose.records.results import read_rows
from tests.toy_harness import POISON, ToyTokenizer, cell_of, one_thread, tiny_engine, toy_prompts  # noqa: F401


class ModelFault:
    """Forward hook on the model: once a prefill holding POISON has run, the forward calls of that
    sequence from the `after`-th on produce NaN / +inf logits or raise an out-of-memory error."""

    def __init__(self, kind: str, after: int = 0):
        self.kind, self.after, self.armed, self.calls = kind, after, False, 0

    def __call__(self, module, args, kwargs, output):
        ids = kwargs.get("input_ids")
        pos = kwargs.get("position_ids")
        if pos is None or int(pos.reshape(-1)[0]) == 0:  # a new sequence (prefill or teacher forcing)
            self.armed, self.calls = bool((ids == POISON).any()), 0
        if self.armed:
            if self.calls >= self.after:
                if self.kind == "nan":
                    output.logits.fill_(float("nan"))
                elif self.kind == "inf":
                    output.logits[..., 3] = float("inf")
                elif self.kind == "oom":
                    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
            self.calls += 1
        return output


class FailingDrafter(GooseDrafter):
    """Goose, except that its 3rd proposal on a prompt holding POISON raises `exc`."""

    def __init__(self, exc: BaseException, **kw):
        super().__init__(**kw)
        self.exc, self.poisoned, self.proposals = exc, False, 0

    def begin(self, prompt_ids, prefill_logits):
        super().begin(prompt_ids, prefill_logits)
        self.poisoned, self.proposals = POISON in prompt_ids, 0

    def propose(self, committed):
        self.proposals += 1
        if self.poisoned and self.proposals == 3:
            raise self.exc
        return super().propose(committed)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize(
    "fault, where, reason",
    [
        ("nan", 0, "NonFiniteLogitsError"),  # NaN in the prefill
        ("nan", 3, "NonFiniteLogitsError"),  # NaN at the 3rd verification step
        ("inf", 2, "NonFiniteLogitsError"),
        ("oom", 0, "OutOfMemoryError"),
        ("oom", 4, "OutOfMemoryError"),
    ],
)
def test_model_fault_fails_one_prompt_and_the_sweep_goes_on(tmp_path, capsys, caplog, fault, where, reason):
    engine = tiny_engine()
    engine.model.register_forward_hook(ModelFault(fault, after=where), with_kwargs=True)
    prompts = toy_prompts(3, poison_at=1)
    out = tmp_path / "r.jsonl"
    rows = run_cell(
        engine, ToyTokenizer(), prompts, cell_of("pld", PromptLookupDrafter()), PromptLookupDrafter, out
    )
    by = {(r["method"], r["prompt_id"]): r for r in rows}
    for method in ("ar", "pld"):
        assert by[(method, "p0")]["status"] == "ok" and by[(method, "p2")]["status"] == "ok"
        failed = by[(method, "p1")]
        assert failed["status"] == "failed" and reason in failed["error"], failed["error"]
        assert "Traceback" in failed["traceback"] and "output_ids" not in failed
    assert by[("pld", "p2")]["lossless"] is True  # the prompt after the failure is sound
    assert "pld p1: FAILED" in caplog.text  # the runner logs a failed prompt as a warning
    assert len(lines(out)) == 6  # one row per (method, prompt), failures included
    # the printed summary counts the failure
    pld = [r for r in rows if r["method"] == "pld"]
    ar = [r for r in rows if r["method"] == "ar"]
    summary = cell_summary(pld, ar)
    assert (summary["prompts"], summary["failed"]) == (2, 1)
    print_summary({"ar": cell_summary(ar, ar), "pld": summary}, 1.0)
    table = capsys.readouterr().out.splitlines()
    header = table[1].split()
    assert "failed" in header
    pld_line = next(line.split() for line in table if line.startswith("pld"))
    assert pld_line[header.index("failed")] == "1" and pld_line[header.index("prompts")] == "2"


@pytest.mark.parametrize("exc", [IndexError("list index out of range"), KeyError(7), ZeroDivisionError("x")])
def test_drafter_exception_fails_only_that_prompt(tmp_path, exc):
    engine = tiny_engine()
    prompts = toy_prompts(3, poison_at=1)
    drafter = FailingDrafter(exc)
    rows = run_cell(
        engine,
        ToyTokenizer(),
        prompts,
        cell_of("goose", drafter),
        lambda: FailingDrafter(exc),
        tmp_path / "r.jsonl",
    )
    status = {(r["method"], r["prompt_id"]): r["status"] for r in rows}
    assert status == {
        ("ar", "p0"): "ok",
        ("ar", "p1"): "ok",
        ("ar", "p2"): "ok",
        ("goose", "p0"): "ok",
        ("goose", "p1"): "failed",
        ("goose", "p2"): "ok",
    }
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["error"].startswith(type(exc).__name__)
    assert all(r["lossless"] for r in rows if r["status"] == "ok")


def test_failed_reference_leaves_losslessness_unknown(tmp_path, monkeypatch):
    """When the AR run of a prompt fails, the method's row must not claim to be lossless."""

    class FailingAR(ARDrafter):
        def begin(self, prompt_ids, prefill_logits):
            if POISON in prompt_ids:
                raise RuntimeError("AR broke")
            super().begin(prompt_ids, prefill_logits)

    monkeypatch.setattr(runner, "ARDrafter", FailingAR)
    rows = run_cell(
        tiny_engine(),
        ToyTokenizer(),
        toy_prompts(2, poison_at=1),
        cell_of("pld", PromptLookupDrafter()),
        PromptLookupDrafter,
        tmp_path / "r.jsonl",
    )
    by = {(r["method"], r["prompt_id"]): r for r in rows}
    assert by[("ar", "p1")]["status"] == "failed"
    row = by[("pld", "p1")]
    assert row["status"] == "ok" and row["lossless"] is None and "AR run" in row["lossless_error"]
    assert by[("pld", "p0")]["lossless"] is True


def test_cut_last_line_is_read_with_a_warning_and_rerun(tmp_path):
    engine = tiny_engine()
    prompts = toy_prompts(2)
    out = tmp_path / "r.jsonl"
    cell = cell_of("pld", PromptLookupDrafter())
    first = run_cell(engine, ToyTokenizer(), prompts, cell, PromptLookupDrafter, out)
    data = out.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    out.write_bytes(data[: last_start + (len(data) - last_start) // 2])  # the last row, cut mid-write
    assert [r["method"] for r in lines_ok(out)] == ["ar", "pld", "ar"]
    with pytest.warns(UserWarning, match="cut or corrupt"):
        second = run_cell(engine, ToyTokenizer(), prompts, cell, PromptLookupDrafter, out)
    with pytest.warns(UserWarning, match="cut or corrupt"):
        rows = read_rows(out)
    keys = sorted((r["method"], r["prompt_id"]) for r in rows)
    assert keys == [("ar", "p0"), ("ar", "p1"), ("pld", "p0"), ("pld", "p1")]  # the cut cell re-run, once
    assert [r["output_ids"] for r in second] == [r["output_ids"] for r in first]


def lines_ok(path: Path) -> list[dict]:
    out = []
    for raw in path.read_text().splitlines():
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            pass
    return out


def test_keyboard_interrupt_stops_the_sweep_with_complete_rows(tmp_path):
    engine = tiny_engine()
    prompts = toy_prompts(3, poison_at=1)
    out = tmp_path / "r.jsonl"
    drafter = FailingDrafter(KeyboardInterrupt())
    cell = cell_of("goose", drafter)
    with pytest.raises(KeyboardInterrupt):
        run_cell(engine, ToyTokenizer(), prompts, cell, lambda: FailingDrafter(KeyboardInterrupt()), out)
    rows = lines(out)  # every line parses: nothing half-written
    assert [(r["method"], r["prompt_id"]) for r in rows] == [("ar", "p0"), ("goose", "p0"), ("ar", "p1")]
    assert all(r["status"] == "ok" for r in rows)  # the interrupted prompt is not recorded as failed
    # resume: the remaining cells run, each once
    run_cell(engine, ToyTokenizer(), prompts, cell, GooseDrafter, out)
    keys = [(r["method"], r["prompt_id"]) for r in lines(out)]
    assert sorted(keys) == sorted({(m, f"p{i}") for m in ("ar", "goose") for i in range(3)})
