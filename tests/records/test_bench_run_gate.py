"""A bench run's record names the contenders whose budget=auto ran with the draft gate (their rows'
method_config carries its settings), and the tables' captions say so; a run without it says nothing."""

from __future__ import annotations

from analysis.wall_clock import gate_note
from goose.records.bench_run import GATE_KEY, record_from_rows


def _row(method: str, repeat: int, gated: bool) -> dict:
    return {
        "repeat": repeat,
        "bench": "humaneval",
        "prompt_id": "0",
        "method": method,
        "verifier": "auto",
        "generated_tokens": 8,
        "wall_time_s": 0.1,
        "output_ids": [1, 2, 3],
        "method_config": {GATE_KEY: 0.8} if gated else {},
        "code_state": "abc",
        "timestamp": float(repeat),
        "session_id": "s",
        "dtype": "float32",
    }


def test_the_record_names_the_gated_contenders_and_the_caption_says_so():
    rows = [_row(m, rep, m == "suffix_auto") for rep in (0, 1) for m in ("ar", "pld", "suffix_auto")]
    record = record_from_rows(rows, "run")
    assert record["gated"] == ["engine:suffix:auto"]
    assert gate_note(record) == "; budget=auto's draft gate on for engine:suffix:auto"
    ungated = record_from_rows([_row(r["method"], r["repeat"], False) for r in rows], "run")
    assert ungated["gated"] == [] and gate_note(ungated) == ""
