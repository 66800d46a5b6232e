"""analysis.speculation_profile: one speculation_profile.json per cell of the shipped rows, each
passing specdec_bench's checks; a corrupted profile fails them; the CLI's exit status says so."""

from __future__ import annotations

import json
import subprocess
import sys

from analysis import speculation_profile as sp
from goose.records.acceptance import validate_profile
from goose.records.seal import copy_results_file
from tests.conftest import ROOT

SHIPPED = ROOT / "results" / "reference" / "smollm2-135m" / "mtbench.jsonl"


def test_export_of_shipped_rows_passes_its_checks(tmp_path):
    results = tmp_path / "results" / "smollm2-135m"
    results.mkdir(parents=True)
    copy_results_file(SHIPPED, results / "mtbench.jsonl")  # the shipped file may be sealed
    out = tmp_path / "profiles"
    assert (
        sp.main(["--results", str(tmp_path / "results"), "--out", str(out), "--methods", "ar,pld,tr,goose"])
        == 0
    )
    index = json.loads((out / "index.json").read_text())
    assert {e["method"] for e in index} == {"ar", "pld", "tr", "goose"} and all(e["passed"] for e in index)
    greedy = [
        e for e in index if e["method"] == "goose" and not e["chat_template"] and not (e["temperature"] or 0)
    ]
    assert len(greedy) == 1
    profile = json.loads((out / greedy[0]["path"]).read_text())
    for field in (
        "schema_version",
        "method",
        "target_model",
        "num_speculative_tokens",
        "verification_method",
        "conditional_accept_rates",
        "marginal_accept_rates",
        "mean_accept_length",
        "mean_accept_length_per_request",
        "acceptance_length_histogram",
        "per_category",
        "measurement_conditions",
        "validation",
    ):
        assert field in profile
    assert profile["schema_version"] == "1.0" and profile["target_model"] == "smollm2-135m"
    assert profile["validation"]["mean_consistency"]["passed"]
    assert abs(1 + sum(profile["marginal_accept_rates"]) - profile["mean_accept_length"]) <= 0.02
    assert profile["measurement_conditions"]["num_requests"] == 20

    # a corrupted profile (marginals halved) fails the mean-consistency check
    profile["marginal_accept_rates"] = [m * 0.5 for m in profile["marginal_accept_rates"]]
    assert not validate_profile(profile)["passed"]


def test_cli_reports_a_failing_check(tmp_path, monkeypatch):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"model": "m", "bench": "b", "method": "pld", "step_accepted": [1, 2]}) + "\n")
    monkeypatch.setattr(sp, "validate_profile", lambda p: {"passed": False, "mean_consistency": None})
    assert sp.main(["--results", str(rows), "--out", str(tmp_path / "o")]) == 1
    assert (tmp_path / "o" / "m" / "b" / "pld" / "speculation_profile.json").exists()


def test_the_export_never_imports_torch():
    code = "import sys, analysis.speculation_profile\nassert 'torch' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_only_and_show(tmp_path, capsys):
    out = tmp_path / "o"
    args = ["--results", str(SHIPPED), "--out", str(out), "--methods", "goose", "--show"]
    assert sp.main([*args, "--only", "temperature=0", "--only", "chat_template=false"]) == 0
    index = json.loads((out / "index.json").read_text())
    assert len(index) == 1 and index[0]["temperature"] in (None, 0.0) and not index[0]["chat_template"]
    printed = capsys.readouterr().out
    assert "acceptance-length histogram" in printed and "per request" in printed
    assert sp.main([*args, "--only", "chat_template=true"]) == 0
    assert [e["chat_template"] for e in json.loads((out / "index.json").read_text())] == [True]


def counted(
    prompt: str,
    accepted: list[int],
    generated: int,
    calls: int,
    stop: str = "max_new_tokens",
    max_new: int = 8,
) -> dict:
    return {
        "prompt_id": prompt,
        "status": "ok",
        "step_accepted": accepted,
        "generated_tokens": generated,
        "forward_calls": calls,
        "max_new_tokens": max_new,
        "stop": stop,
    }


def test_the_row_counters_check_steps_and_committed_tokens_exactly():
    from goose.records.acceptance import counter_check

    # 1 (prefill) + (2+1) + (3+1) = 8 tokens in 2 steps after the prefill: 3 forward calls
    assert counter_check([counted("a", [2, 3], 8, 3)]) == {"rows": 1, "violations": [], "passed": True}
    # an EOS inside the last step's path drops what came after it: 1 + 3 + 4 - 6 = 2 <= 3 + 1
    assert counter_check([counted("b", [2, 3], 6, 3, stop="eos")])["passed"]
    # a step left out of the counters (forward calls 4 for 2 steps), a token lost at max_new_tokens
    bad = counter_check([counted("c", [2, 3], 8, 4), counted("d", [2, 3], 7, 3, max_new=7)])
    assert [v["prompt_id"] for v in bad["violations"]] == ["c", "d"] and not bad["passed"]
    assert bad["violations"][1]["committed_minus_generated"] == 1
    # more dropped at EOS than the last step committed
    assert not counter_check([counted("e", [2, 0], 2, 3, stop="eos")])["passed"]


def test_the_export_is_the_same_with_duplicated_rows(tmp_path):
    """A results file holding one cell's rows twice (a cell re-run into the same file) exports the same
    profiles: the first row of each cell key counts, once."""
    from goose.records.results import append_row, read_rows

    rows = read_rows(SHIPPED)[:40]
    once, twice = tmp_path / "once" / "smollm2-135m", tmp_path / "twice" / "smollm2-135m"
    for r in rows:
        append_row(once / "mtbench.jsonl", r)
    for r in rows + rows:
        append_row(twice / "mtbench.jsonl", r)
    a = sp.export(tmp_path / "once", tmp_path / "out_once")
    b = sp.export(tmp_path / "twice", tmp_path / "out_twice")
    assert a == b and a
    for entry in a:
        first = (tmp_path / "out_once" / entry["path"]).read_text()
        assert first == (tmp_path / "out_twice" / entry["path"]).read_text()
        assert json.loads(first)["validation"]["row_counters"]["passed"]
