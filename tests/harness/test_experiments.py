"""Experiment presets (conf/experiment/), resume after an interruption, parallel jobs.

- Every preset composes with Hydra's compose API, sweeps what the paper's experiment sweeps, and
  every value of every swept key gives a valid job config (drafter instantiated, no model loaded).
- Resume: `python run.py` on the real offline model, killed (SIGKILL, SIGINT) once its first rows
  are on disk, then re-run: every (method, prompt) cell exactly once, every row parses.
- Scale-out: a tiny sweep with the joblib launcher (2 processes), and one through submitit's local
  executor (`hydra/launcher=submitit_local`, the code path of the SLURM launcher), write both jobs'
  rows and one AR reference per prompt into one results file.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.types import RunMode
from hydra.utils import instantiate

from goose.harness.compose import effective_sizes
from goose.records.paper import PAPER_BENCHMARKS
from goose.records.results import config_hash
from tests.conftest import ROOT
from tests.harness.config_snapshot import preset_jobs, sweep_values

CONF = ROOT / "conf"
PAPER_MODELS = ["vicuna-7b", "vicuna-13b", "vicuna-33b", "llama3-8b", "qwen3-8b"]
PAPER_BENCHES = list(PAPER_BENCHMARKS)
PAPER_MAX_NEW = {"humaneval": 512, "mbpp": 512, "classeval": 512, "gsm8k": 1024, "mtbench": 1024}
ALL_METHODS = ["ar", "pld", "tr", "iso3", "iso5", "eagle2", "goose"]
ISO = ["iso3", "iso5", "iso3_beff", "iso5_beff", "goose"]
ABLATIONS = ["goose", "goose_no_spine_branches", "goose_no_bigram", "goose_no_consensus", "goose_no_prefill"]
CPU3 = ["humaneval", "gsm8k", "mtbench"]
SENSITIVITY = {  # name -> (drafter field, swept values); the paper default is among them
    "budget": ("budget", [20, 40, 60, 80, 100]),
    "depth": ("max_depth", [2, 4, 6, 8]),
    "topk": ("k", [4, 6, 8, 10, 12]),
    "rho": ("rho", [0.0, 0.25, 0.5, 0.75, 1.0]),
    "tiers": ("spine_ratio_tiers", [[0.1, 0.2, 0.35], [0.15, 0.3, 0.5], [0.25, 0.45, 0.65], [0.4, 0.6, 0.8]]),
}

# preset -> (models, benches, methods, extra swept key or None, prompt limit, max_new_tokens);
# limit None = every prompt, max_new None = the benchmark's paper value.
PRESETS: dict[str, tuple] = {
    "main_grid": (PAPER_MODELS, PAPER_BENCHES, ALL_METHODS, None, None, None),
    "cpu_main": (["smollm2-135m"], PAPER_BENCHES, ALL_METHODS, None, 20, 128),
    "cpu_main_gemma": (["gemma3-270m"], PAPER_BENCHES, ALL_METHODS, None, 5, 128),
    "cpu_like_for_like": (
        ["smollm2-135m"],
        PAPER_BENCHES,
        ["goose_persistent", "tr_per_prompt", "pld", "tr", "goose"],
        None,
        10,
        128,
    ),
    "cpu_beyond": (
        ["smollm2-135m"],
        PAPER_BENCHES,
        ["opt_tree", "suffix", "suffix_global", "sam"],
        None,
        20,
        128,
    ),
    "cpu_chat_template": (["smollm2-135m"], ["mtbench"], ["ar", "goose"], "chat_template", 20, 128),
    "cpu_sampling": (
        ["smollm2-135m"],
        ["humaneval", "gsm8k", "mtbench"],
        ["ar", "pld", "tr", "eagle2", "goose", "stand"],
        "temperature",
        20,
        128,
    ),
    "cpu_verifiers": (
        ["smollm2-135m"],
        ["humaneval", "mtbench"],
        ["stand", "stand_chain", "stand_iid", "stand_delayed"]
        + ["self_draft_tree", "self_draft", "self_draft_iid", "self_draft_delayed"],
        ("verifier_temperature", "verifier"),
        3,
        128,
    ),
    "iso_control": (["llama3-8b", "qwen3-8b"], PAPER_BENCHES, ISO, None, None, None),
    "cpu_iso_control": (["smollm2-135m"], CPU3, ISO, None, 10, 128),
    "ablations": (PAPER_MODELS, PAPER_BENCHES, ABLATIONS, None, None, None),
    "cpu_ablations": (["smollm2-135m"], CPU3, ABLATIONS, None, 10, 128),
}
for _name in SENSITIVITY:
    PRESETS[f"sensitivity_{_name}"] = (["qwen3-8b"], PAPER_BENCHES, ["goose"], _name, None, None)
    PRESETS[f"cpu_sensitivity_{_name}"] = (["smollm2-135m"], ["humaneval", "gsm8k"], ["goose"], _name, 5, 128)


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=overrides, return_hydra_config=True)


def test_default_run_is_the_practical_setting_and_never_touches_the_reference_rows():
    """`python run.py`: budget=auto into results/runs/ (ignored by git), not the shipped
    results/reference/; every paper preset runs the fixed budget B on raw prompts."""
    cfg = _compose([])
    assert cfg.budget == "auto" and cfg.out_dir == "results/runs" and cfg.model.dtype == "float32"
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "results/runs/smollm2-135m/humaneval.jsonl"], cwd=ROOT
    )
    tracked = subprocess.run(
        ["git", "check-ignore", "-q", "results/reference/smollm2-135m/humaneval.jsonl"], cwd=ROOT
    )
    assert ignored.returncode == 0 and tracked.returncode == 1
    for name in PRESETS:
        preset = _compose([f"+experiment={name}"])
        assert preset.budget == "fixed" and preset.bench.chat_template is False, name  # swept only by
        # cpu_chat_template (false, true)
        assert preset.out_dir == "results/runs", name  # `make reference` passes out_dir explicitly


def test_every_preset_file_is_checked():
    assert sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")) == sorted(PRESETS)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_composes_and_sweeps_the_grid(name):
    models, benches, methods, swept, limit, max_new = PRESETS[name]
    cfg = _compose([f"+experiment={name}"])
    assert cfg.hydra.mode == RunMode.MULTIRUN  # one command runs the whole grid
    assert cfg.experiment == name  # rows and W&B runs are grouped by preset
    assert cfg.quick is False and cfg.bench.limit == limit and cfg.max_new_tokens == max_new
    params = dict(cfg.hydra.sweeper.params)
    assert params.pop("model").split(",") == models
    assert sorted(params.pop("bench").split(",")) == sorted(benches)
    assert params.pop("method").split(",") == methods
    if swept is None:
        assert params == {}
    else:  # one swept setting per preset (the verifier grid: temperature and verifier)
        assert list(params) == [_swept_key(s) for s in (swept if isinstance(swept, tuple) else (swept,))]


OTHER_SWEEPS = {  # swept settings, not hyperparameters
    "chat_template": ("bench.chat_template", [False, True]),
    "temperature": ("sampling.temperature", [0.7, 1.0, 0.3, 0.0]),
    "verifier_temperature": ("sampling.temperature", [0.6, 1.0]),
    "verifier": ("sampling.verifier", ["auto", "traversal"]),
}


def _swept_key(swept: str) -> str:
    return OTHER_SWEEPS[swept][0] if swept in OTHER_SWEEPS else f"method.drafter.{SENSITIVITY[swept][0]}"


def _goose_default_config() -> dict:
    cfg = _compose(["method=goose"])
    return instantiate(cfg.method.drafter, _convert_="all").config()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_swept_value_gives_a_valid_job(name):
    """Each value of each swept key (the others at their first value) composes into a job whose
    model/bench/method/hyperparameter are what the sweep says and whose drafter instantiates."""
    models, benches, methods, swept, limit, max_new = PRESETS[name]
    sweep = sweep_values(_compose([f"+experiment={name}"]))
    hyperparameter = isinstance(swept, str) and swept in SENSITIVITY
    for one in swept if isinstance(swept, tuple) else (swept,):
        if one in OTHER_SWEEPS:
            key, values = OTHER_SWEEPS[one]
            assert [str(v).lower() for v in sweep[key]] == [str(v).lower() for v in values]
    if hyperparameter:
        field, values = SENSITIVITY[swept]
        assert [json.loads(v) for v in sweep[f"method.drafter.{field}"]] == values
        default = _goose_default_config()[field]  # conf/method/goose.yaml
        assert default in values  # the paper default is one of the points
    checked = set()
    for _, job, cfg in preset_jobs(name, _one_value_at_a_time):
        assert cfg.model.name == job["model"] and cfg.bench.name == job["bench"]
        assert cfg.method.name == job["method"] and cfg.experiment == name
        drafter = instantiate(cfg.method.drafter, _convert_="all")  # validates the hyperparameters
        if hyperparameter:
            field, _ = SENSITIVITY[swept]
            logged = drafter.config()[field]
            assert logged == json.loads(job[f"method.drafter.{field}"])
            if logged == default:  # the default point is the main grid's goose cell
                assert config_hash(drafter.config()) == config_hash(_goose_default_config())
        got_limit, got_max_new = effective_sizes(cfg)
        assert got_limit == limit
        assert got_max_new == (max_new if max_new is not None else PAPER_MAX_NEW[cfg.bench.name])
        checked |= set(job.items())
    assert checked == {(k, v) for k, values in sweep.items() for v in values}  # every swept value


def _one_value_at_a_time(sweep: dict[str, list[str]]) -> list[dict[str, str]]:
    return [{key: value} for key, values in sweep.items() for value in values]


def test_command_line_narrows_a_preset():
    """A command-line value of a swept key replaces the preset's sweep (BasicSweeper semantics)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = _compose(["+experiment=main_grid"])
    args = [f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()] + ["model=llama3-8b", "bench=mtbench"]
    jobs = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(args), None)[0]
    assert len(jobs) == len(ALL_METHODS)
    assert all("model=llama3-8b" in j and "bench=mtbench" in j for j in jobs)


@pytest.mark.parametrize(
    "launcher,extra,field,value",
    [
        ("joblib", ["hydra.launcher.n_jobs=2"], "n_jobs", 2),
        (
            "submitit_slurm",
            ["hydra.launcher.partition=gpu", "hydra.launcher.timeout_min=600"],
            "timeout_min",
            600,
        ),
        ("slurm_gpu", ["hydra.launcher.partition=gpu"], "gpus_per_node", 1),
    ],
)
def test_launchers_compose(launcher, extra, field, value):
    """hydra-submitit-launcher is a dev dependency: without it this fails rather than skips."""
    cfg = _compose(["+experiment=main_grid", f"hydra/launcher={launcher}", *extra])
    assert cfg.hydra.launcher[field] == value
    if "slurm" in launcher:
        assert cfg.hydra.launcher.partition == "gpu"
        assert cfg.hydra.launcher._target_.endswith("SlurmLauncher")


# --------------------------------------------------------------------------- resume


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in _lines(path) if line.strip()]


def _command(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "run.py",
        "method=pld",
        "budget=fixed",
        "bench=humaneval",
        "bench.limit=3",
        "max_new_tokens=24",
        f"out_dir={out}",
        "wandb=disabled",
        f"hydra.run.dir={out}/hydra",
        *extra,
    ]


def _start_and_interrupt(out: Path, sig: int) -> int:
    """Start a run, send `sig` once the results file holds its first row; return the rows then."""
    results = out / "smollm2-135m" / "humaneval.jsonl"
    proc = subprocess.Popen(_command(out), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while b"\n" not in (results.read_bytes() if results.exists() else b""):
            assert proc.poll() is None, (
                f"run ended before its first row: {proc.stderr.read().decode()[-2000:]}"
            )
            assert time.monotonic() < deadline, "no row within 300 s"
            time.sleep(0.02)
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0  # it was interrupted, not finished
    return len(_lines(results))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_interrupted_run_resumes_without_duplicates(tmp_path, sig):
    out = tmp_path / "out"
    results = out / "smollm2-135m" / "humaneval.jsonl"
    before = _start_and_interrupt(out, sig)
    kept = _rows(results)  # every line on disk parses: no partial row
    assert 1 <= before == len(kept) < 6, before
    assert results.read_bytes().endswith(b"\n")
    if sig == signal.SIGKILL:  # a writer killed mid-write leaves a cut line: resume must cope
        with results.open("ab") as fh:
            fh.write(b'{"model": "smollm2-135m", "bench": "humaneval", "method": "pld", "prom')

    proc = subprocess.run(_command(out), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in _lines(results) if line.strip()]
    rows, bad = [], 0
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    assert bad == (1 if sig == signal.SIGKILL else 0)  # only the simulated cut line, sealed off
    cells = sorted((r["method"], r["prompt_id"]) for r in rows)
    expected = sorted((m, f"HumanEval/{i}") for m in ("ar", "pld") for i in range(3))
    assert cells == expected  # every cell exactly once
    assert all(r["status"] == "ok" and r["lossless"] for r in rows)
    assert rows[: len(kept)] == kept  # the interrupted run's rows were kept, not re-run
    assert len({r["session_id"] for r in rows}) == 2
    print(f"{signal.Signals(sig).name}: {before} row(s) after the interrupt, {len(rows)} after the resume")

    again = subprocess.run(_command(out), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [line for line in _lines(results) if line.strip()] == lines  # complete: nothing re-run


def test_merge_new_rows_reads_incrementally_first_wins(tmp_path):
    """The runner's view of a results file: ok rows by cell key, the first of duplicates wins, a
    cut last line is left for later, failed rows are not cells (they are re-run)."""
    from goose.harness.resume import merge_new_rows
    from goose.records.results import append_row, cell_key

    path = tmp_path / "r.jsonl"
    base = {"model": "m", "bench": "b", "config_hash": "h", "max_new_tokens": 8, "dtype": "float32"}
    append_row(path, {**base, "method": "ar", "prompt_id": 0, "status": "ok", "n": 1})
    append_row(path, {**base, "method": "ar", "prompt_id": 0, "status": "ok", "n": 2})
    append_row(path, {**base, "method": "ar", "prompt_id": 1, "status": "failed"})
    existing: dict = {}
    offset = merge_new_rows(existing, path, 0)
    assert offset == path.stat().st_size and len(existing) == 1
    assert existing[cell_key({**base, "method": "ar", "prompt_id": 0})]["n"] == 1
    with path.open("ab") as fh:
        fh.write(b'{"model": "m", "cut')
    assert merge_new_rows(existing, path, offset) == offset  # an unfinished line is not consumed
    append_row(path, {**base, "method": "pld", "prompt_id": 0, "status": "ok"})  # seals the cut line
    with pytest.warns(UserWarning, match="cut or corrupt"):
        offset = merge_new_rows(existing, path, offset)
    assert offset == path.stat().st_size and len(existing) == 2


# --------------------------------------------------------------------------- scale-out


def test_joblib_launcher_runs_jobs_in_parallel(tmp_path):
    """2 methods x 1 bench x 1 prompt x 8 tokens as two joblib processes: both jobs write rows
    into one results file (flock appends), the AR reference is written once (runner's lock)."""
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "run.py",
        "-m",
        "+experiment=cpu_ablations",
        "bench=humaneval",
        "method=goose,goose_no_bigram",
        "bench.limit=1",
        "max_new_tokens=8",
        "threads=1",
        f"out_dir={out}",
        "wandb=disabled",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={out}/multirun",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Joblib.Parallel(n_jobs=2" in log
    rows = _rows(out / "smollm2-135m" / "humaneval.jsonl")  # every line parses
    assert sorted(r["method"] for r in rows) == ["ar", "goose", "goose_no_bigram"]  # one AR row
    by_method = {r["method"]: r for r in rows}
    assert by_method["goose"]["session_id"] != by_method["goose_no_bigram"]["session_id"]  # 2 processes
    assert all(r["experiment"] == "cpu_ablations" and r["status"] == "ok" and r["lossless"] for r in rows)
    assert sorted(p.name for p in (out / "multirun").iterdir() if p.is_dir()) == ["0", "1"]


def test_submitit_local_launcher_runs_the_slurm_code_path(tmp_path):
    """A real 2-job sweep through `hydra/launcher=submitit_local`: submitit pickles each job and
    runs it in its own process, as on SLURM (`slurm_gpu` / `submitit_slurm` differ only in
    submitting through sbatch). One results file gets one row per (method, prompt), the AR
    reference once, all lossless; the per-prompt line is in the job's Hydra log."""
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "run.py",
        "-m",
        "hydra/launcher=submitit_local",
        "method=ar,pld",
        "bench=humaneval",
        "budget=fixed",
        "bench.limit=1",
        "max_new_tokens=8",
        "threads=1",
        f"out_dir={out}",
        "wandb=disabled",
        f"hydra.sweep.dir={out}/multirun",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Submitit 'local' sweep output dir" in log
    rows = _rows(out / "smollm2-135m" / "humaneval.jsonl")  # every line parses
    assert sorted(r["method"] for r in rows) == [
        "ar",
        "pld",
    ]  # 2 cells, one prompt each, the AR reference written once
    assert len({r["prompt_id"] for r in rows}) == 1
    assert all(r["status"] == "ok" and r["lossless"] is True for r in rows)
    assert len(list((out / "multirun" / ".submitit").glob("*/*_result.pkl"))) == 2  # submitit ran both
    # job 1 (pld) always runs its prompt (job 0's AR cell may be resumed from job 1's reference)
    assert "[1/1] pld" in (out / "multirun" / "1" / "run.log").read_text()  # goose.harness.runner


def test_reference_lock_is_exclusive_across_processes(tmp_path):
    """While one process holds the AR-reference lock of a results file, another one waits."""
    from goose.harness.resume import reference_lock

    results = tmp_path / "m" / "b.jsonl"
    code = (
        "import time; from pathlib import Path; from goose.harness.resume import reference_lock\n"
        "print('ready', flush=True); t = time.monotonic()\n"
        f"with reference_lock(Path({str(results)!r})): print(time.monotonic() - t, flush=True)\n"
    )
    with reference_lock(results):
        child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(1.5)
    waited = float(child.communicate(timeout=120)[0])
    assert waited > 1.0


@pytest.mark.slow
def test_joblib_sweep_of_stateful_cells_equals_a_sequential_one(tmp_path):
    """A parallel launcher keeps one cell in one job, so cells whose drafter carries state across
    prompts (TR's run-long table, Goose with a persistent table) give the same rows in a 2-job
    joblib sweep as in one sequential process (tokens and forward calls, prompt by prompt)."""

    def sweep(out: Path, launcher: list[str]) -> dict:
        cmd = [
            sys.executable,
            "run.py",
            "-m",
            "method=tr,goose_persistent",
            "bench=gsm8k",
            "budget=fixed",
            "bench.limit=4",
            "max_new_tokens=32",
            "threads=1",
            f"out_dir={out}",
            "wandb=disabled",
            f"hydra.sweep.dir={out}/multirun",
            *launcher,
        ]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        rows = _rows(out / "smollm2-135m" / "gsm8k.jsonl")
        return {
            (r["method"], r["prompt_id"]): (r["output_ids"], r["forward_calls"])
            for r in rows
            if r["method"] != "ar"
        }

    parallel = sweep(tmp_path / "joblib", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    sequential = sweep(tmp_path / "basic", [])
    assert len(parallel) == 8
    assert parallel == sequential
