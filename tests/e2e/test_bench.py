"""`make bench` through the runner: every contender's rows in results/ (one folder per repeat),
resumed by the runner's cell keys with the drafters' cross-prompt state, so that a run cut short
and resumed drafts exactly what an uninterrupted run drafts; every results file starts from a fresh
drafter, so a repeat drafts what the first one did."""

from __future__ import annotations

import pytest

from experiments.bench import contenders, driver, hf
from goose.engine.budget.cost_model import LatencyTable
from goose.records.results import read_rows
from goose.records.row import ResultRow

# Token Recycling at budget=auto: its table and auto's acceptance rates outlive a prompt, so a
# resumed run that started from a fresh drafter would draft other trees.
ARGS = ["--benches", "humaneval", "--limit", "2", "--max-new-tokens", "12", "--repeats", "2"]
ARGS += ["--methods", "tr:auto", "--hf", "greedy", "--threads", "1"]


def drafted(rows: list[dict]) -> list[tuple]:
    """What each contender did on each prompt in each repeat, timings left out."""
    return sorted(
        (r["repeat"], r["bench"], str(r["prompt_id"]), r["method"], r["output_ids"], r.get("step_tree_size"))
        for r in rows
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The bench's arguments (budget=auto from a fixed latency profile) and its rows when nothing
    interrupts it."""
    tmp = tmp_path_factory.mktemp("bench")
    profile = tmp / "profile.json"
    LatencyTable(sizes=[1, 2, 8, 32], seconds=[0.02, 0.021, 0.024, 0.04]).save(profile)
    # the gate and the bookkeeping price act on measured seconds: off, so that repeats and resumes draft alike
    args = [*ARGS, "--latency", str(profile), "--no-price-bookkeeping"]
    record = driver.main([*args, "--out", str(tmp / "whole")])
    return args, timed(read_rows(tmp / "whole")), record


def timed(rows: list[dict]) -> list[dict]:
    """The rows of the timed rounds (the reference pass's have no repeat)."""
    return [r for r in rows if r.get("repeat") is not None]


def test_every_contender_writes_runner_rows_per_repeat(uninterrupted):
    _, rows, record = uninterrupted
    assert {r["method"] for r in rows} == {"ar", "tr_auto", "hf_greedy"}
    assert len(rows) == 3 * 2 * 2  # contenders x prompts x repeats, one row each
    assert {r["repeat"] for r in rows} == {0, 1}
    assert {r["experiment"] for r in rows} == {"bench:whole"}
    assert all(r["status"] == "ok" and r["lossless"] for r in rows)  # fp32: every output is AR's
    assert all("prompt_hash" in r and "seeds" in r for r in rows)  # the runner's provenance, hf rows too
    for r in rows:  # every row, transformers' too, is a valid typed row with the fields of the runner's
        ResultRow.from_dict(r).check()
    ar_fields = {k for r in rows if r["method"] == "ar" for k in r}
    assert all(set(r) <= ar_fields for r in rows if r["method"] == "hf_greedy")
    assert record["summary"]["identical_to_engine_ar"]["engine:tr:auto"]["identical"] == 2
    assert list(record["summary"]["tokens_per_s"]) == ["engine:ar", "engine:tr:auto", "hf:greedy"]


def test_engine_ar_rotates_with_the_others_and_every_output_is_checked_whatever_its_position(uninterrupted):
    """Three contenders, two prompts, two repeats: the order on the k-th prompt of repeat r is the
    contenders rotated by k + r, so engine AR runs first, third and second; a contender that runs before
    engine AR is checked against the reference pass's output."""
    _, rows, _ = uninterrupted
    first_prompt = min(str(r["prompt_id"]) for r in rows)
    positions = {}
    for rep in (0, 1):
        for prompt in sorted({str(r["prompt_id"]) for r in rows}):
            mine = sorted(
                (r for r in rows if r["repeat"] == rep and str(r["prompt_id"]) == prompt),
                key=lambda r: r["timestamp"],
            )
            positions[(rep, prompt == first_prompt)] = [r["method"] for r in mine]
    assert positions[(0, True)] == ["ar", "tr_auto", "hf_greedy"]
    assert positions[(0, False)] == positions[(1, True)] == ["tr_auto", "hf_greedy", "ar"]
    assert positions[(1, False)] == ["hf_greedy", "ar", "tr_auto"]
    assert all(r["lossless"] is True for r in rows if r["method"] != "ar")


def test_the_reference_pass_writes_one_untimed_ar_row_per_prompt_and_the_rows_are_sealed(uninterrupted):
    from pathlib import Path

    _, rows, record = uninterrupted
    out = Path(record["source"])
    reference = read_rows(out / "reference")
    assert sorted(str(r["prompt_id"]) for r in reference) == sorted({str(r["prompt_id"]) for r in rows})
    assert all(r["method"] == "ar" and r["repeat"] is None and r["reference_pass"] for r in reference)
    ar_outputs = {str(r["prompt_id"]): r["output_ids"] for r in reference}
    assert all(r["output_ids"] == ar_outputs[str(r["prompt_id"])] for r in rows if r["method"] == "ar")
    assert not list(out.rglob("*.jsonl")) and list(out.rglob("*.jsonl.xz"))  # sealed at the end


def test_the_transformers_contender_reads_each_results_file_once(uninterrupted, monkeypatch):
    """Resuming a finished run: transformers' contender finds every row on disk, reading each results file
    once (not once per prompt), and nothing runs again."""
    from pathlib import Path

    args, whole, record = uninterrupted
    out = Path(record["source"])
    reads: list[str] = []
    real = hf.read_rows
    monkeypatch.setattr(hf, "read_rows", lambda path: reads.append(str(path)) or real(path))
    driver.main([*args, "--out", str(out)])
    assert len(timed(read_rows(out))) == len(whole)
    assert len(reads) == len(set(reads)) == 2  # one benchmark, two repeats


def test_contenders_rotate_by_prompt_and_repeat():
    assert contenders.rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert contenders.rotated(["a", "b", "c"], 4) == ["b", "c", "a"]
    assert contenders.rotated([], 3) == []


def test_a_resume_over_rows_of_other_code_is_refused_before_anything_loads(tmp_path, capsys):
    from goose.records.results import append_row

    out = tmp_path / "run"
    append_row(
        out / "repeat0" / "smollm2-135m" / "humaneval.jsonl", {"method": "ar", "code_state": "0123456789ab"}
    )
    with pytest.raises(SystemExit, match="holds rows of another code state: 0123456789ab \\(1 rows\\)"):
        driver.main(["--out", str(out), "--hf", "", "--methods", "pld"])


def test_every_repeat_starts_from_a_fresh_drafter(uninterrupted):
    """Token Recycling keeps its table across prompts: carried from one repeat into the next, it would
    know the very texts it is about to draft and verify other trees."""
    _, rows, _ = uninterrupted
    steps = {
        (r["repeat"], str(r["prompt_id"])): r["step_tree_size"] for r in rows if r["method"] == "tr_auto"
    }
    assert len(steps) == 4
    for prompt in {p for _, p in steps}:
        assert steps[(1, prompt)] == steps[(0, prompt)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "stop_at_call",
    [
        # run_cell calls: 1 the reference pass; then in the rotated order engine AR (2) and Token
        # Recycling (3) on prompt 1, Token Recycling (4) and engine AR (5) on prompt 2, then repeat 2
        4,  # repeat 1, prompt 2, Token Recycling: the runner restores its state after prompt 1
        6,  # repeat 2, prompt 1, Token Recycling: a fresh drafter, as in the uninterrupted run
    ],
)
def test_an_interrupted_bench_resumes_with_the_same_drafts(
    uninterrupted, tmp_path, monkeypatch, stop_at_call
):
    args, whole, _ = uninterrupted
    out = tmp_path / "cut"
    calls = 0
    run_cell = contenders.run_cell

    def interrupt(*a, **k):  # the reference pass, then engine AR and Token Recycling once per prompt
        nonlocal calls
        calls += 1
        if calls == stop_at_call:
            raise KeyboardInterrupt
        return run_cell(*a, **k)

    monkeypatch.setattr(contenders, "run_cell", interrupt)
    with pytest.raises(KeyboardInterrupt):
        driver.main([*args, "--out", str(out)])
    cut = timed(read_rows(out))
    assert 0 < len(cut) < len(whole)
    monkeypatch.setattr(contenders, "run_cell", run_cell)
    shown = driver.main([*args, "--out", str(out), "--show-partial"])  # reads the rows, runs nothing
    assert "engine:ar" in shown["summary"]["tokens_per_s"]
    assert len(timed(read_rows(out))) == len(cut)
    driver.main([*args, "--out", str(out)])
    resumed = timed(read_rows(out))
    assert len(resumed) == len(whole)  # nothing ran twice
    assert drafted(resumed) == drafted(whole)


def test_show_partial_without_rows_says_so(tmp_path):
    with pytest.raises(SystemExit, match="no rows to show"):
        driver.main(["--out", str(tmp_path / "none"), "--show-partial"])


def test_an_unknown_transformers_contender_is_refused_before_loading_anything(capsys):
    with pytest.raises(SystemExit):
        driver.main(["--hf", "beam"])
    assert "unknown --hf contender 'beam'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "methods, needs",
    [
        ("pld@block", "needs a drafter that samples its drafts"),
        ("stand@block", "needs a chain"),
        ("stand_chain@gbv", "needs K i.i.d. paths"),
    ],
)
def test_a_verifier_that_does_not_apply_is_refused_before_loading_anything(methods, needs, capsys):
    with pytest.raises(SystemExit):
        driver.main(["--methods", methods, "--temperature", "1.0", "--hf", ""])
    assert needs in capsys.readouterr().err


def test_a_verifier_is_checked_against_the_shape_the_overrides_give(tmp_path, capsys):
    """stand_iid@gbv applies to the YAML's K i.i.d. paths, not to the chain an override makes of it."""
    overrides = tmp_path / "overrides.json"
    overrides.write_text('{"stand_iid": ["method.drafter.shape=chain"]}')
    with pytest.raises(SystemExit):
        driver.main(
            [
                "--methods",
                "stand_iid@gbv",
                "--temperature",
                "1.0",
                "--hf",
                "",
                "--method-overrides",
                str(overrides),
            ]
        )
    assert "needs K i.i.d. paths" in capsys.readouterr().err


def test_a_greedy_run_refuses_a_named_verifier(capsys):
    with pytest.raises(SystemExit):
        driver.main(["--methods", "stand_chain@block", "--hf", ""])
    assert "needs sampling (temperature > 0)" in capsys.readouterr().err


def test_each_contender_verifies_with_its_own_verifier_side_by_side(tmp_path, monkeypatch):
    """The same drafter under two verifiers: two contenders, rows told apart by their `verifier`, and the
    Block walk verifies the @block contender's steps only (walks deciding with the target's noise; the
    rows' exact expectations replay every applicable verifier after the generation, with scripted
    decisions)."""
    import goose.engine.core.verify as verify
    from goose.engine.core.verify.inputs import NoiseDecisions

    calls: list[int] = []
    block_walk = verify.block_walk

    def spy(*a, **k):
        if isinstance(a[-1], NoiseDecisions):
            calls.append(1)
        return block_walk(*a, **k)

    monkeypatch.setattr(verify, "block_walk", spy)
    args = ["--benches", "humaneval", "--limit", "2", "--max-new-tokens", "24", "--repeats", "1"]
    args += ["--methods", "stand_chain,stand_chain@block", "--hf", "", "--threads", "1"]
    record = driver.main([*args, "--temperature", "1.0", "--out", str(tmp_path / "run")])
    rows = read_rows(tmp_path / "run")
    assert {(r["method"], r["verifier"]) for r in rows} == {
        ("ar", "auto"),
        ("stand_chain", "auto"),
        ("stand_chain", "block"),
    }
    assert list(record["summary"]["tokens_per_s"]) == [
        "engine:ar",
        "engine:stand_chain",
        "engine:stand_chain@block",
    ]
    block_steps = sum(len(r["step_tree_size"]) for r in rows if r["verifier"] == "block")
    # at most one walk per step of the @block contender (and of its 16-token warm-up), none elsewhere
    assert 0 < len(calls) <= block_steps + 16


def test_latency_kv_lengths_are_checked_as_the_config_checks_them(capsys):
    from experiments.bench.cli import parse_args

    assert parse_args(["--latency-kv", "1024,2048"]).latency_kv == [1024, 2048]
    assert parse_args([]).latency_kv == [] and parse_args(["--latency-kv", ""]).latency_kv == []
    with pytest.raises(SystemExit):
        parse_args(["--latency-kv", "0"])
    assert "--latency-kv = [0]: must be a non-empty list of integers >= 1" in capsys.readouterr().err


def test_concurrency_above_1_serves_the_prompts_through_the_batched_engine(tmp_path):
    """--concurrency 1,2: engine AR and PLD each serve both prompts at concurrency 1 and 2 (experiments.batching's
    protocol); in fp32 every output equals batch-1 AR's."""
    out = tmp_path / "batched"
    args = ["--benches", "humaneval", "--limit", "2", "--max-new-tokens", "8", "--repeats", "1"]
    record = driver.main(
        [*args, "--methods", "pld", "--concurrency", "1,2", "--threads", "1", "--out", str(out)]
    )
    rows = read_rows(out / "smollm2-135m-float32.jsonl")
    assert record["rows"] == len(rows) == 4
    assert sorted((r["method"], r["concurrency"]) for r in rows) == [
        ("ar", 1),
        ("ar", 2),
        ("pld", 1),
        ("pld", 2),
    ]
    assert all(r["requests"] == 2 and r["identical"] == 2 for r in rows)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--concurrency", "2", "--hf", "greedy"], "does not take --hf; leave it out"),
        (["--concurrency", "1,4", "--temperature", "1.0"], "does not take --temperature"),
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "two"], "--concurrency 'two'"),
        (
            ["--concurrency", "2", "--methods", "pld@block"],
            "engine:pld@block: the batched protocol takes no verifier",
        ),
    ],
)
def test_a_batched_bench_refuses_what_its_protocol_does_not_take(argv, message, capsys):
    with pytest.raises(SystemExit):
        driver.main(argv)
    assert message in capsys.readouterr().err


def test_batched_contender_names_carry_the_budget_policy_and_the_batch_state():
    from experiments import batching

    assert batching.row_method("tr:auto+shared") == "tr_auto_shared"
    assert batching.row_method("goose:auto@batch") == "goose_auto_batch"
    assert [batching.batch_state(n) for n in ("tr:auto+shared", "tr:auto", "pld")] == [
        "shared",
        "isolated",
        "isolated",
    ]
    assert [batching.budget_policy(n) for n in ("goose:auto@batch+shared", "tr:auto+shared", "pld")] == [
        "batch",
        "per_request",
        "fixed",
    ]


def test_cuda_graphs_run_on_cuda_and_are_refused_with_the_reason_elsewhere(tmp_path):
    import torch

    args = ["--benches", "humaneval", "--limit", "1", "--max-new-tokens", "8", "--repeats", "1"]
    args += ["--methods", "pld", "--hf", "", "--cuda-graphs", "--out", str(tmp_path / "graphs")]
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match=r"experiments\.bench: .*(?i:cuda)"):
            driver.main(args)
        assert not (tmp_path / "graphs").exists() or not read_rows(tmp_path / "graphs")
        return
    driver.main([*args, "--device", "cuda"])
    rows = timed(read_rows(tmp_path / "graphs"))
    assert {r["method"] for r in rows} == {"ar", "pld"}
    assert all("graphs" in r["forward"] for r in rows)
    assert len({tuple(r["output_ids"]) for r in rows}) == 1  # fp32 greedy: PLD writes AR's output
