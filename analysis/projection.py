"""Projected wall-clock speed-ups at a larger target's scale: the per-step tree sizes that real runs
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
(one verification step: inputs, mask, forward, walk, compaction, as `goose.engine.budget.cost_model`
times it) interpolated linearly in n and in the KV length (clamped to the measured KV lengths), and
o_m the method's host time per step outside the verification (drafting + the drafter's update:
`draft_s + update_s` per step of its rows). Projected tokens/s = generated tokens / Σ T over the
prompts that the method and AR both completed; the speed-up is its ratio to AR's.

Rows used: greedy (temperature 0) rows with `status` ok, one row per (method, bench, prompt), from
the experiments named in `EXPERIMENTS` (the main grid, the methods beyond the paper, the iso
control and the ablations; not the sensitivity sweeps, whose many settings of one method would
mix). Pure Python: no torch.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goose.records.results import read_rows as read_result_rows
from goose.records.seal import results_files

EXPERIMENTS = ("cpu_main", "cpu_beyond", "cpu_iso_control", "cpu_ablations")


def _interp(xs: Sequence[float], ys: Sequence[float], x: float, extrapolate: bool) -> float:
    """Piecewise-linear y(x) through the points (xs ascending); beyond the last point the last
    segment is extended when `extrapolate`, else (and always below the first point) clamped."""
    if len(xs) == 1 or x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        if not extrapolate:
            return float(ys[-1])
        x0, x1, y0, y1 = xs[-2], xs[-1], ys[-2], ys[-1]
        return float(y1 + (y1 - y0) * (x - x1) / (x1 - x0))
    i = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return float(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


@dataclass(frozen=True)
class CostCurve:
    """t(n, kv): seconds of one verification step of n nodes after kv cached tokens, measured at a
    few KV lengths (`seconds[kv][i]` for `sizes[i]`)."""

    sizes: list[int]
    seconds: dict[int, list[float]]

    def __post_init__(self) -> None:
        if not self.seconds:
            raise ValueError("a cost curve needs at least one KV length")
        for kv, row in self.seconds.items():
            if len(row) != len(self.sizes):
                raise ValueError(f"KV length {kv}: {len(row)} timings for {len(self.sizes)} sizes")

    @property
    def kv_lens(self) -> list[int]:
        return sorted(self.seconds)

    def t(self, n: int, kv: float) -> float:
        """Linear in n (extended beyond the largest measured n), linear in kv between the measured
        KV lengths and clamped outside them."""
        kvs = self.kv_lens
        per_kv = [_interp(self.sizes, self.seconds[k], n, extrapolate=True) for k in kvs]
        return _interp(kvs, per_kv, kv, extrapolate=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostCurve:
        """{"sizes": [...], "seconds": {"512": [...], ...}} (JSON keys are strings)."""
        return cls(list(data["sizes"]), {int(k): list(v) for k, v in data["seconds"].items()})


@dataclass(frozen=True)
class PrefillCurve:
    """Seconds of a prefill of L prompt tokens, measured at a few lengths."""

    lengths: list[int]
    seconds: list[float]

    def t(self, length: int) -> float:
        return _interp(self.lengths, self.seconds, length, extrapolate=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrefillCurve:
        return cls(list(data["lengths"]), list(data["seconds"]))


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
