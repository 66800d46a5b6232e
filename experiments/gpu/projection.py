"""The projection stage of `make gpu-check`: projected wall-clock speed-ups at a larger target's scale, the per-step tree sizes that real runs
recorded (the shipped SmolLM2 rows), replayed against a verification cost curve measured on
another machine at another model's shape (`make gpu-check`: random weights with Vicuna-7B's shape
on a GPU).

A projection, not a measurement. It assumes that the larger target accepts exactly what SmolLM2
accepted (the same trees, the same accepted lengths, step for step), and that drafting costs on
the GPU machine's host what it cost where the rows were recorded (or what `overhead_s` says).
Under those assumptions one prompt of one method takes

    T = prefill(L) + Σ_i [ t(n_i, L + c_i) + o_m ]

where L is the prompt length, n_i the tree size of step i (`step_tree_size`), c_i the tokens
committed before step i (Σ_{j<i} accepted_j + 1, from `step_accepted`), t the measured cost curve
(one verification step: inputs, mask, forward, walk, compaction, as `goose.engine.budget.calibration`
times it) interpolated linearly in n and in the KV length (clamped to the measured KV lengths), and
o_m the method's host time per step outside the verification (drafting + the drafter's update:
`draft_s + update_s` per step of its rows). Projected tokens/s = generated tokens / Σ T over the
prompts that the method and AR both completed; the speed-up is its ratio to AR's.

Rows used: greedy (temperature 0) rows with `status` ok, one row per (method, bench, prompt), from
the experiments named in `EXPERIMENTS` (the main grid, the methods beyond the paper, the iso
control and the ablations; not the sensitivity sweeps, whose many settings of one method would
mix). Pure Python: no torch; the cost curves are goose.records.cost_curve's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.gpu.profile import ROOT
from goose.records.cost_curve import CostCurve, PrefillCurve
from goose.records.results import read_rows as read_result_rows
from goose.records.seal import results_files

EXPERIMENTS = ("cpu_main", "cpu_beyond", "cpu_iso_control", "cpu_ablations")


def read_rows(results_dir: str | Path, model: str = "smollm2-135m") -> list[dict[str, Any]]:
    """Every row of <results_dir>/<model>/*.jsonl (sealed or not: `goose.records.seal`)."""
    return read_result_rows(results_files(Path(results_dir) / model, recursive=False))


def select_rows(rows: Iterable[Mapping[str, Any]], experiments: Sequence[str] = EXPERIMENTS) -> list[dict]:
    """Greedy ok rows of `experiments` with per-step records; the first row per (method, bench,
    prompt) wins."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for r in rows:
        if r.get("experiment") not in experiments or r.get("status") != "ok":
            continue
        if (r.get("temperature") or 0.0) != 0.0 or not r.get("step_tree_size"):
            continue
        key = (r["method"], r["bench"], str(r["prompt_id"]))
        if key not in seen:
            seen.add(key)
            out.append(dict(r))
    return out


def host_seconds_per_step(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """o_m: (draft_s + update_s) per verification step, pooled over each method's rows."""
    total: dict[str, float] = {}
    steps: dict[str, int] = {}
    for r in rows:
        m = r["method"]
        total[m] = total.get(m, 0.0) + float(r.get("draft_s") or 0.0) + float(r.get("update_s") or 0.0)
        steps[m] = steps.get(m, 0) + len(r["step_tree_size"])
    return {m: total[m] / steps[m] for m in total if steps[m]}


def prompt_seconds(row: Mapping[str, Any], curve: CostCurve, prefill: PrefillCurve, host_s: float) -> float:
    """T of one row (see the module docstring)."""
    length = int(row["prompt_tokens"])
    seconds = prefill.t(length)
    committed = 0
    accepted = row.get("step_accepted") or [0] * len(row["step_tree_size"])
    for n, acc in zip(row["step_tree_size"], accepted, strict=True):
        seconds += curve.t(int(n), length + committed) + host_s
        committed += int(acc) + 1
    return seconds


def _tokens_per_s(
    cell: Mapping[str, Mapping[str, Any]],
    prompts: Sequence[str],
    curve: CostCurve,
    prefill: PrefillCurve,
    host_s: float,
) -> float:
    """Projected tokens/s of one (method, bench) cell over `prompts`."""
    tokens = sum(int(cell[p]["generated_tokens"]) for p in prompts)
    return tokens / sum(prompt_seconds(cell[p], curve, prefill, host_s) for p in prompts)


def project(
    rows: Iterable[Mapping[str, Any]],
    curve: CostCurve,
    prefill: PrefillCurve,
    overhead_s: Mapping[str, float] | None = None,
    reference: str = "ar",
) -> list[dict[str, Any]]:
    """One dict per (method, bench) with the rows' τ and mean tree size, the projected tokens/s and
    the projected speed-up over `reference` on the prompts both completed. overhead_s: o_m per
    method (default: measured from the rows, `host_seconds_per_step`)."""
    rows = list(rows)
    host = dict(host_seconds_per_step(rows))
    host.update(overhead_s or {})
    by_cell: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        by_cell.setdefault((r["method"], r["bench"]), {})[str(r["prompt_id"])] = r
    out = []
    for (method, bench), mine in sorted(by_cell.items()):
        ref = by_cell.get((reference, bench))
        if ref is None:
            continue
        common = sorted(set(mine) & set(ref))
        if not common:
            continue

        steps = sum(len(mine[p]["step_tree_size"]) for p in common)
        tps = _tokens_per_s(mine, common, curve, prefill, host.get(method, 0.0))
        out.append(
            {
                "method": method,
                "bench": bench,
                "prompts": len(common),
                # the paper's τ: generated tokens / forward calls, the prefill counted as one call
                "tau": sum(int(mine[p]["generated_tokens"]) for p in common) / (steps + len(common)),
                "mean_tree": sum(sum(mine[p]["step_tree_size"]) for p in common) / steps,
                "host_ms_per_step": host.get(method, 0.0) * 1e3,
                "projected_tokens_per_s": tps,
                "projected_speedup": tps
                / _tokens_per_s(ref, common, curve, prefill, host.get(reference, 0.0)),
            }
        )
    return out


def markdown(table: Sequence[Mapping[str, Any]], caption: str) -> str:
    """A method x bench table of projected speed-ups (τ in brackets), plus the mean over the
    benchmarks each method ran (the ablations and the iso control ran on three of the five)."""
    benches = sorted({r["bench"] for r in table})
    methods = sorted({r["method"] for r in table}, key=lambda m: (m != "ar", m))
    cell = {(r["method"], r["bench"]): r for r in table}
    lines = [
        caption,
        "",
        "| method | " + " | ".join(benches) + " | mean over its benchmarks |",
        "|---|" + "---|" * (len(benches) + 1),
    ]
    for m in methods:
        got = [cell.get((m, b)) for b in benches]
        vals = [r["projected_speedup"] for r in got if r]
        body = " | ".join(f"{r['projected_speedup']:.2f}x (τ {r['tau']:.2f})" if r else "-" for r in got)
        mean = f"{sum(vals) / len(vals):.2f}x" if vals else "-"
        lines.append(f"| {m} | {body} | {mean} |")
    return "\n".join(lines) + "\n"


def stage_projection(
    record: dict[str, Any], results_dir: str, drafting_rows: str | None = None
) -> dict[str, Any]:
    """Each method's per-step drafting time o_m comes from SmolLM2 rows written by one process on
    this machine's host: `drafting_rows` if given, else this run's fp32 lossless rows when that
    stage ran its methods one process at a time; the shipped rows' (measured on the CPU that
    recorded them) for every method those rows lack. Rows written side by side are never used:
    their drafting times include waits for a GPU the other processes hold."""
    timing = record["stages"].get("timing")
    if not timing:
        return {"error": "no timing stage in the record: run --stages timing first"}
    rows = select_rows(read_rows(results_dir))
    overhead: dict[str, float] = {}
    source = f"the shipped rows ({results_dir}, drafting as measured on the CPU that recorded them)"
    stage = record["stages"].get("lossless", {})
    lossless = stage.get("float32", {})
    host_rows = drafting_rows or (lossless.get("rows") if stage.get("jobs", 1) == 1 else None)
    if host_rows:
        # every *.jsonl below (a lossless run keeps each process's rows in its own shard folder)
        device_rows = select_rows(read_result_rows(ROOT / host_rows), experiments=("lossless_stress",))
        overhead = host_seconds_per_step(device_rows)
        if not overhead:
            return {"error": f"no greedy lossless_stress rows with per-step records under {host_rows}"}
        source = (
            f"SmolLM2 rows written by one process on a GPU machine's host ({host_rows}) for "
            f"{', '.join(sorted(overhead))}; " + source + " otherwise"
        )
    elif lossless.get("rows"):
        source += (
            f"; this run's SmolLM2 rows were written by {stage['jobs']} processes side by side, so "
            "their drafting times are not used"
        )
    out: dict[str, Any] = {"rows": results_dir, "drafting_time_from": source, "shapes": {}}
    for name, shape in timing.items():
        # the engine a user would run: steps replayed from CUDA graphs where they won the AR race
        graphed = (shape.get("graphs") or {}).get("keep", False)
        curves = shape["graphs"]["cost_curve"] if graphed else shape["cost_curve"]
        engine = "the engine with CUDA graphs (cuda_graphs=true)" if graphed else "the eager engine"
        curve = CostCurve(
            curves[next(iter(curves))]["sizes"], {int(kv): c["seconds"] for kv, c in curves.items()}
        )
        table = project(rows, curve, PrefillCurve.from_dict(shape["prefill"]), overhead)
        caption = (
            f"Projected wall-clock speed-up over AR at the {name} shape ({shape['dtype']}, "
            f"{record['environment']['hardware']['gpu'] or 'CPU: no GPU found'}, {engine}): the per-step tree sizes "
            "of the shipped SmolLM2-135M runs (fp32, 128 tokens) replayed against the cost curve "
            "measured with random weights. A projection from SmolLM2's acceptance, not a measurement "
            "of a 7B model (τ in brackets is SmolLM2's)."
        )
        out["shapes"][name] = {"table": table, "caption": caption, "cuda_graphs": graphed}
    return out
