"""experiments.gpu.check on a machine without CUDA: the same stages at toy sizes on the CPU, a
record that says no GPU was found, and clear errors for a bad stage, shape or device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from experiments.gpu import check, profile, summary, timing
from experiments.gpu.projection import stage_projection
from goose.engine.budget.settle import ROBUST


def test_the_timing_projection_and_figure_stages_run_at_toy_sizes(tmp_path, capsys):
    out = tmp_path / "gpu"
    rc = check.main(
        [
            "--device",
            "cpu",
            "--stages",
            "timing,projection,figures",
            "--shapes",
            "toy-llama",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    record = json.loads((out / "gpu_check.json").read_text())
    assert record["device"] == "cpu" and "no GPU found" in record["note"]
    shape = record["stages"]["timing"]["toy-llama"]
    assert shape["random_weights"] is True
    for curve in shape["cost_curve"].values():
        assert curve["sizes"][0] == 1 and curve["relative"][0] == 1.0
        assert curve["seconds"] == [ROBUST.estimate(s) for s in curve["samples"]]  # as measured (settle rule)
    ar = shape["ar_vs_generate"]
    assert ar["tokens_per_s"]["engine:ar"]["median"] > 0 and ar["tokens_per_s"]["hf:generate"]["median"] > 0
    graphs = shape["cuda_graphs"]
    assert graphs["graphs"] is False and "no CUDA device" in graphs["why_no_graphs"]
    assert set(graphs["sizes"]) == {"1", "16"} and graphs["helps"] is False
    assert all(row["eager_s"]["median"] > 0 for row in graphs["sizes"].values())
    graphed = shape["graphs"]  # the graphed engine's padded steps, run eagerly without CUDA
    assert graphed["graphs"] is False and graphed["keep"] is False and graphed["captures"] == 0
    assert graphed["forward"].endswith("+static") and sum(graphed["steps"]["steps"].values()) > 0
    assert ar["identical_to_generate"]["engine:ar+graphs"] == ar["identical_to_generate"]["engine:ar"]
    table = record["stages"]["projection"]["shapes"]["toy-llama"]["table"]
    assert {"ar", "goose", "pld"} <= {r["method"] for r in table}
    assert (out / "cost_curve.png").is_file() and "projection" in (out / "projection.md").read_text()
    printed = capsys.readouterr().out
    assert "CUDA graphs: not timed: no CUDA device" in printed
    assert "engine with CUDA graphs: not timed: no CUDA device" in printed
    assert "NO GPU FOUND" in printed and "projected speed-up over AR at the toy-llama shape" in printed


def test_a_second_invocation_extends_the_record(tmp_path):
    out = tmp_path / "gpu"
    assert (
        check.main(["--device", "cpu", "--stages", "timing", "--shapes", "toy-qwen3", "--out", str(out)]) == 0
    )
    first = json.loads((out / "gpu_check.json").read_text())["stages"]["timing"]["toy-qwen3"]
    assert (
        check.main(
            ["--device", "cpu", "--stages", "timing,projection", "--shapes", "toy-llama", "--out", str(out)]
        )
        == 0
    )
    record = json.loads((out / "gpu_check.json").read_text())
    assert set(record["stages"]) == {"timing", "projection"}
    assert record["stages"]["timing"]["toy-qwen3"] == first  # the first call's shape stays
    assert set(record["stages"]["projection"]["shapes"]) == {"toy-qwen3", "toy-llama"}


def test_bad_input_is_rejected_with_the_valid_choices(tmp_path, capsys):
    assert check.main(["--stages", "timing,warp", "--out", str(tmp_path)]) == 2
    assert (
        "unknown stage(s) warp; valid stages are: tests, usedby, timing, lossless" in capsys.readouterr().err
    )
    with pytest.raises(ValueError, match="valid shapes are"):
        check.main(
            ["--device", "cpu", "--stages", "timing", "--shapes", "vicuna-70b", "--out", str(tmp_path)]
        )
    assert check.main(["--device", "cpu", "--stages", "sidebyside", "--side-dtypes", "fp8"]) == 2
    assert "--side-dtypes fp8: choose from float32, float16, bfloat16" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert check.main(["--device", "cuda", "--out", str(tmp_path)]) == 2
        assert "torch sees no CUDA device" in capsys.readouterr().err


def test_every_stage_runs_on_the_cpu(tmp_path):
    """`make gpu-check` without CUDA (~20 s, so CI runs it): device tests, SmolLM2 lossless (1
    prompt, fp32 + bf16), toy timing, projection, figures; fp32 identical to AR, no real mismatch."""
    out = tmp_path / "gpu"
    assert check.main(["--device", "cpu", "--out", str(out), "--work", str(tmp_path / "work")]) == 0
    record = json.loads((out / "gpu_check.json").read_text())
    assert record["stages"]["tests"]["failed"] == 0 and record["stages"]["tests"]["passed"] > 0
    fp32 = record["stages"]["lossless"]["float32"]["totals"]
    assert fp32["identical"] == fp32["prompts"] > 0
    sampled = record["stages"]["lossless"][f"{profile.SAMPLED}0.7"]["totals"]
    assert sampled["identical"] == sampled["prompts"] > 0  # deterministic drafters: AR's very sample
    used = record["stages"]["usedby"]
    assert used["returncode"] == 0 and used["random_weights"] is True and used["model"] == "vicuna-7b-random"
    assert set(used["summary"]) == {"ar", "pld_auto", "goose_auto"}
    assert all(s["lossless_share"] == 1.0 for s in used["summary"].values())
    floor = record["stages"]["timing"]["toy-llama"]["bandwidth_floor"]
    assert floor["bandwidth_bytes_per_s"] > 0 and set(floor["t1_over_floor"]) == {"64", "128"}
    # rows written side by side never give drafting times; one process's rows, in shard folders, do
    assert (
        "side by side, so their drafting times are not used"
        in record["stages"]["projection"]["drafting_time_from"]
    )
    side = record["stages"]["sidebyside"]
    assert side["random_weights"] is False and side["cuda_graphs"] is False
    fp32 = side["float32"]
    assert fp32["returncode"] == 0 and fp32["rows"] == 2 * 3  # 2 repeats x (ar, pld, hw_tree:auto), 1 prompt
    assert "--device cpu --dtype float32" in fp32["command"] and "--cuda-graphs" not in fp32["command"]
    assert {n: e["identical"] for n, e in fp32["identical_to_engine_ar"].items()} == {
        "engine:pld": 1,
        "engine:hw_tree:auto": 1,
    }
    assert set(fp32["per_step"]) == {"ar", "pld", "hw_tree_auto"} and fp32["per_step"]["ar"]["tau"] == 1.0
    assert any("tokens/s over engine:ar" in line for line in fp32["summary"])
    # the same rows copied back and summarised into another record, without running anything
    rows = ["--sidebyside-rows", str(tmp_path / "work" / "sidebyside"), "--out", str(tmp_path / "home")]
    assert check.main(["--device", "cpu", "--stages", "sidebyside", *rows]) == 0
    home = json.loads((tmp_path / "home" / "gpu_check.json").read_text())["stages"]["sidebyside"]
    for key in ("rows", "identical_to_engine_ar", "per_step", "summary"):
        assert home["float32"][key] == fp32[key]
    shards = tmp_path / "work" / "lossless" / "float32"
    projection = stage_projection(record, "results/reference", drafting_rows=str(shards))
    assert "for ar, goose, pld;" in projection["drafting_time_from"], projection["drafting_time_from"]
    empty = stage_projection(record, "results/reference", drafting_rows=str(tmp_path / "none"))
    assert "no greedy lossless_stress rows" in empty["error"]


def test_a_side_by_side_fp32_output_that_is_not_ars_fails_the_check_and_bf16_does_not():
    same = {
        "engine:pld": {"identical": 5, "prompts": 5},
        "engine:hw_tree:auto": {"identical": 4, "prompts": 5},
    }
    record = {"stages": {"sidebyside": {"bfloat16": {"identical_to_engine_ar": same}, "limit": 5}}}
    assert summary.failures(record) == []  # bf16: near-ties, classified by the bench, not a failure here
    record["stages"]["sidebyside"]["float32"] = {"identical_to_engine_ar": same}
    assert summary.failures(record) == ["sidebyside float32: engine:hw_tree:auto 1 output(s) differ from AR"]


def test_the_side_by_side_bench_runs_with_the_device_and_graphs_of_the_profile():
    from experiments.gpu.side_by_side import bench_argv

    argv = bench_argv(profile.GPU, "bfloat16", "data", Path("out"))
    assert argv[argv.index("--device") + 1] == "cuda" and argv[argv.index("--dtype") + 1] == "bfloat16"
    assert "--cuda-graphs" in argv and argv[argv.index("--limit") + 1] == "5"
    assert argv[argv.index("--benches") + 1] == "humaneval,gsm8k,mtbench"
    assert "--cuda-graphs" not in bench_argv(profile.CPU, "float32", "data", Path("out"))


def test_a_graphed_ar_that_differs_from_eager_ar_fails_the_check():
    """The `float32+graphs` lossless run (CUDA only) compares every method with its own AR, and
    that AR with the eager fp32 AR: a difference in either fails `make gpu-check`."""
    totals = {"prompts": 5, "identical": 5, "near_tie": 0, "real": 0, "failed": 0}
    graphed = {"totals": totals, "ar_identical_to_eager": {"identical": 5, "prompts": 5}}
    record = {"stages": {"lossless": {"float32": {"totals": totals}, profile.GRAPHED_FP32: graphed}}}
    assert summary.failures(record) == []
    graphed["ar_identical_to_eager"] = {"identical": 4, "prompts": 5}
    assert summary.failures(record) == [
        "float32+graphs: AR through CUDA graphs differs from eager AR on 1 prompt(s)"
    ]
    graphed["ar_identical_to_eager"]["identical"] = 5
    graphed["totals"] = {**totals, "identical": 3}
    assert summary.failures(record) == ["float32+graphs: 2 output(s) differ from AR"]


def test_lossless_stress_passes_a_run_override_to_every_job_and_refuses_a_bad_one(tmp_path, capsys):
    from experiments import lossless_stress

    argv = ["--limit", "1", "--methods", "pld", "--benches", "humaneval", "--out", str(tmp_path)]
    assert lossless_stress.main([*argv, "--set", "cuda_graphs=maybe"]) == 2
    assert "cuda_graphs = 'maybe'" in capsys.readouterr().err


def test_the_bandwidth_floor_counts_the_weights_a_step_reads_and_the_kv_cache():
    """Untied head: every weight but the input embedding; tied: all of them once; plus K and V of
    every layer at each KV length."""
    from goose.harness.models.random_weights import load_shape, random_model

    spec = load_shape("toy-llama")
    model = random_model(spec, torch.float32, "cpu")
    floor = timing.bandwidth_floor(model, spec.config, (64,), bandwidth=1e9)
    total = sum(p.numel() * 4 for p in model.parameters())
    embed = model.get_input_embeddings().weight.numel() * 4
    tied = spec.config.get("tie_word_embeddings", True)
    assert floor["weight_bytes_read"] == (total if tied else total - embed)
    c = spec.config
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    kv = 2 * c["num_hidden_layers"] * c.get("num_key_value_heads", c["num_attention_heads"]) * head_dim * 4
    assert floor["kv_bytes_per_token"] == kv
    assert floor["seconds"]["64"] == pytest.approx((floor["weight_bytes_read"] + 64 * kv) / 1e9)


def test_rows_of_a_lossless_run_cut_short_are_summarised_with_the_stage_header(tmp_path, capsys):
    """A host's time limit can stop the lossless stage before it writes its section: summarising the
    rows it left (--lossless-rows) still records what was run and prints the summary."""
    out, rows = tmp_path / "gpu", tmp_path / "rows"
    (rows / "float32").mkdir(parents=True)  # a run whose processes were stopped before any row
    args = ["--device", "cpu", "--stages", "lossless", "--lossless-rows", str(rows), "--jobs", "4"]
    assert check.main([*args, "--out", str(out)]) == 0
    lossless = json.loads((out / "gpu_check.json").read_text())["stages"]["lossless"]
    assert lossless["model"] == "smollm2-135m" and lossless["jobs"] == 4 and lossless["limit"] >= 1
    assert "no method row was written" in capsys.readouterr().out


def test_jobs_below_one_is_refused(capsys):
    assert check.main(["--device", "cpu", "--stages", "lossless", "--jobs", "0"]) == 2
    assert "--jobs 0: must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("gpu", "folder"),
    [("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"), ("NVIDIA H200", "nvidia-h200"), ("  ", "cuda")],
)
def test_a_gpu_record_goes_to_a_folder_named_after_the_gpu(gpu, folder):
    assert profile.folder_name(gpu) == folder
