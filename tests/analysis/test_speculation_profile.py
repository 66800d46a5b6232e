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
