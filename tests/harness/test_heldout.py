"""experiments/heldout/ without a model: its arguments refused before anything runs, the Spec-Bench run's
command and category filter (experiments.bench --categories), the fresh processes' order and `run.py`
commands, and their resume (a stand-in process writes the rows)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments.bench import cli as bench_cli
from experiments.heldout import cli, driver, fresh_process
from goose.records.results import append_row, read_rows
from goose.records.spec_bench import SPEC_BENCH_QUESTION_CATEGORIES
from tests.conftest import SHARED_DATA, require_shared

SPEC_BENCH_FILE = SHARED_DATA / "spec_bench" / "question.jsonl"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--categories", "writing,poetry"], "unknown Spec-Bench category poetry"),
        (["--workloads", "fresh,bogus"], "unknown workload bogus"),
        (["--methods", "pld@block"], "greedy engine contenders only"),
        (["--methods", "nosuch,pld"], "no conf/method/<name>.yaml for nosuch"),
        (["--rounds", "0"], "must be >= 1"),
        (["--per-category", "0"], "must be >= 1"),
        (["--fresh-benches", "humaneval,nosuch"], "no conf/bench/<name>.yaml for nosuch"),
        (["--model", "nosuch"], "no conf/model/nosuch.yaml"),
        (["--data-dir", "/nonexistent"], "no spec_bench/question.jsonl"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(argv, says, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(argv)
    assert says in capsys.readouterr().err


def test_categories_are_the_question_files_in_its_order():
    assert bench_cli.categories_arg("qa,writing") == ["writing", "qa"]
    assert bench_cli.categories_arg("all") == [c for c, _, _ in SPEC_BENCH_QUESTION_CATEGORIES]
    assert len(bench_cli.categories_arg("all")) == 13


def test_the_bench_takes_categories_of_spec_bench_only(capsys):
    with pytest.raises(SystemExit):
        bench_cli.parse_args(["--benches", "humaneval", "--categories", "qa", "--hf", ""])
    assert "--categories selects questions of spec_bench" in capsys.readouterr().err
    args = bench_cli.parse_args(["--benches", "spec_bench", "--categories", "rag,qa", "--hf", ""])
    assert args.categories == ["qa", "rag"]


def test_spec_bench_prompts_filtered_by_category_and_spread_over_each():
    """writing (ten questions) and qa (eighty): two of each, the category's first and its middle one."""
    require_shared(SPEC_BENCH_FILE, "Spec-Bench's questions")
    from experiments.bench.load import load_prompts

    tokenizer = lambda text, **_: SimpleNamespace(input_ids=[len(text)])  # noqa: E731
    prompts = load_prompts(
        tokenizer, "smollm2-135m", ["spec_bench"], 20, str(SHARED_DATA), "false", 2, ["qa", "writing"]
    )
    assert [p.prompt_id for p in prompts] == ["81", "86", "321", "361"]


def dry_run(capsys, *argv: str) -> list[list[str]]:
    assert driver.main(["--dry-run", "--data-dir", str(SHARED_DATA), *argv]) == 0
    return [shlex.split(line.split("  #")[0]) for line in capsys.readouterr().out.splitlines()]


def test_dry_run_prints_the_spec_bench_run_and_every_fresh_process(capsys, tmp_path):
    require_shared(SPEC_BENCH_FILE, "Spec-Bench's questions")
    out = tmp_path / "run"
    argv = [
        "--methods",
        "pld,suffix:auto",
        "--fresh-benches",
        "humaneval,gsm8k",
        "--rounds",
        "2",
        "--threads",
        "2",
    ]
    commands = dry_run(capsys, *argv, "--out", str(out))
    assert commands[0][1:3] == ["-m", "experiments.bench"]
    assert commands[0][3:] == [
        *("--model", "smollm2-135m", "--dtype", "bfloat16", "--benches", "spec_bench"),
        *("--categories", ",".join(c for c, _, _ in SPEC_BENCH_QUESTION_CATEGORIES), "--per-category", "3"),
        *(
            "--chat-template",
            "auto",
            "--max-new-tokens",
            "128",
            "--repeats",
            "3",
            "--methods",
            "pld,suffix:auto",
        ),
        *(
            "--hf",
            "",
            "--data-dir",
            str(SHARED_DATA.resolve()),
            "--threads",
            "2",
            "--out",
            str(out / "spec_bench"),
        ),
    ]
    fresh = [dict(o.split("=", 1) for o in c[2:]) for c in commands[1:]]
    assert len(fresh) == 2 + 2 * 2 * 3  # AR's reference per benchmark, then rounds x benchmarks x contenders
    order = [
        (f["bench"], f["method"], f["budget"], f["out_dir"].removeprefix(str(out / "fresh"))) for f in fresh
    ]
    assert order[:5] == [
        ("humaneval", "ar", "fixed", "/reference"),
        ("gsm8k", "ar", "fixed", "/reference"),
        ("humaneval", "ar", "fixed", "/round0/ar"),  # round 0, benchmark 0: not rotated
        ("humaneval", "pld", "fixed", "/round0/pld"),
        ("humaneval", "suffix", "auto", "/round0/suffix_auto"),
    ]
    # rotated by r * 2 + the benchmark's index: round 0 gsm8k by 1, round 1 humaneval by 2, gsm8k by 3 (= 0)
    assert [m for b, m, _, d in order[5:8]] == ["pld", "suffix", "ar"]
    assert [m for b, m, _, d in order[8:11]] == ["suffix", "ar", "pld"]
    assert [m for b, m, _, d in order[11:14]] == ["ar", "pld", "suffix"]
    assert {f["bench.limit"] for f in fresh} == {"6"} and {f["max_new_tokens"] for f in fresh} == {"128"}
    assert {f["model.dtype"] for f in fresh} == {"bfloat16"} and {f["wandb"] for f in fresh} == {"disabled"}
    assert "--gate" not in commands[0] and not any("budget_gate" in f for f in fresh)
    assert not out.exists()  # a dry run writes nothing


def test_the_gate_reaches_both_workloads_and_a_resume_keeps_it(capsys, tmp_path):
    require_shared(SPEC_BENCH_FILE, "Spec-Bench's questions")
    out = tmp_path / "run"
    commands = dry_run(
        capsys, "--methods", "pld:auto", "--fresh-benches", "gsm8k", "--gate", "--out", str(out)
    )
    assert commands[0][-3:] == ["--gate", "--out", str(out / "spec_bench")]
    fresh = [dict(o.split("=", 1) for o in c[2:]) for c in commands[1:]]
    assert len(fresh) == 1 + 3 * 2 and {f["budget_gate"] for f in fresh} == {"true"}
    out.mkdir()
    (out / "heldout.json").write_text('{"model": "smollm2-135m"}')  # recorded before --gate existed: off
    driver.check_resume(out, {"model": "smollm2-135m", "gate": False})
    with pytest.raises(SystemExit, match="gate: False there, True now"):
        driver.check_resume(out, {"model": "smollm2-135m", "gate": True})


def test_a_resumed_run_must_keep_its_arguments(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "heldout.json").write_text('{"model": "smollm2-135m", "max_new_tokens": 64}')
    driver.check_resume(
        out, {"model": "smollm2-135m", "max_new_tokens": 64, "rounds": 5}
    )  # more rounds: fine
    with pytest.raises(SystemExit, match="max_new_tokens: 64 there, 128 now"):
        driver.check_resume(out, {"model": "smollm2-135m", "max_new_tokens": 128})


STAND_IN = """
import sys
from pathlib import Path
from goose.records.results import append_row, read_rows
folder, bench, method, n = sys.argv[1:]
path = Path(folder) / "tiny" / f"{bench}.jsonl"
seeded = sum(r["method"] == "ar" for r in read_rows(path)) if path.exists() else 0
have = {r["prompt_id"] for r in read_rows(path) if r["method"] == method} if path.exists() else set()
for i in [str(i) for i in range(int(n))]:
    if i not in have:
        append_row(path, {"method": method, "bench": bench, "prompt_id": i, "seeded": seeded, "status": "ok"})
"""


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    """A held-out run's fresh processes, each a stand-in for run.py that writes the rows of its method (those
    not yet written, as run.py resumes) and records how many AR rows it found seeded."""
    args = argparse.Namespace(
        out=tmp_path / "run",
        contenders=["engine:ar", "engine:pld"],
        fresh_benches=["humaneval"],
        rounds=1,
        fresh_limit=2,
    )
    launched = []

    def command(args, p):
        launched.append(p.label)
        return [sys.executable, "-c", STAND_IN, str(p.folder), p.bench, p.method, str(args.fresh_limit)]

    monkeypatch.setattr(fresh_process, "command", command)
    return args, launched


def test_fresh_processes_seed_the_reference_and_skip_what_is_done(stand_in):
    args, launched = stand_in
    processes = fresh_process.schedule(args)
    assert [p.label for p in processes] == [
        "reference humaneval engine:ar",
        "round 0 humaneval engine:ar",
        "round 0 humaneval engine:pld",
    ]
    for p in processes:
        assert fresh_process.run(args, p, log=lambda _: None) is not None
    pld = read_rows(processes[2].folder)
    assert (
        sorted((r["method"], r.get("seeded")) for r in pld) == [("ar", 0)] * 2 + [("pld", 2)] * 2
    )  # the reference rows, copied
    assert {r["seeded"] for r in read_rows(processes[1].folder)} == {0}  # engine AR's own process: no seed
    said = []
    assert [fresh_process.run(args, p, log=said.append) for p in processes] == [None] * 3
    assert len(launched) == 3 and all(s.endswith("done, skipped") for s in said)


def test_a_process_cut_short_is_cleared_and_run_again_whole(stand_in):
    args, launched = stand_in
    reference, _, pld = fresh_process.schedule(args)
    fresh_process.run(args, reference)
    cut = pld.folder / "tiny" / "humaneval.jsonl"
    append_row(cut, {"method": "pld", "bench": "humaneval", "prompt_id": "0", "seeded": -1, "status": "ok"})
    said = []
    fresh_process.run(args, pld, log=said.append)
    assert "cut short before, cleared and run again whole" in said[0]
    rows = [r for r in read_rows(pld.folder) if r["method"] == "pld"]
    assert sorted((r["prompt_id"], r["seeded"]) for r in rows) == [
        ("0", 2),
        ("1", 2),
    ]  # one process wrote both


def test_a_failing_process_stops_the_run_with_its_log(monkeypatch, stand_in):
    args, _ = stand_in
    monkeypatch.setattr(
        fresh_process, "command", lambda a, p: [sys.executable, "-c", "print('boom'); exit(2)"]
    )
    with pytest.raises(SystemExit, match=r"reference humaneval engine:ar failed \(exit 2\)(.|\n)*boom"):
        fresh_process.run(args, fresh_process.schedule(args)[0])
    assert Path(args.out / "fresh" / "reference" / "logs" / "humaneval" / "stdout.txt").is_file()
