"""What trying costs where drafts fail: each budget=auto method's failed step and its gated AR step, against
an AR step, side by side on prompts where little is accepted (MT-Bench's writing questions by default).

Per method, with budget_gate on (its plain steps AR's step exactly: `<m>:auto`; or taking the anchor's
top-K for the drafter's table: `<m>:auto:plainlearns`) and off (`<m>:auto:nogate`), interleaved over
`--repeats` rounds (each round rotates the contenders' order; engine AR is a contender): the mean whole step
(draft + verify + update) of
  - AR's steps (the reference, c_ar),
  - drafted steps that accepted nothing (a failed draft: drafting, a wider forward, bookkeeping),
  - drafted steps whose proposal the size rule cut to the anchor alone (with the gate lean, verified as AR's
    step and heard of as a plain step: drafting alone beyond it),
  - drafted steps that proposed nothing (an empty draft: drafting, and the anchor's top-K for the table),
  - the gate's plain AR steps (what skipping costs),
each as overhead over c_ar, and the run's tokens/s over AR's (median [min, max] over rounds). A step's cost
grows with the context it attends to, and a method's gated or failed steps fall at other positions than
AR's average step, so each kind is also priced against AR's own steps at the same positions (same round,
prompt and committed length: `matched`), split into the forward and what the method adds around it
(drafting, walk, update: `beyond_forward`, in ms over AR's at those positions).

    python -m experiments.failed_step --model smollm2-135m --dtype bfloat16 --out results/studies/failed_step
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from experiments.bench.load import load_prompts, method_factory, model_and_engine
from experiments.interleaved import Runs, add_common_args, interleaved_runs, speedup, tau, write_record
from goose.engine.budget.auto_budget import AutoBudgetSettings, auto_budget_factory
from goose.engine.budget.calibration import engine_latency
from goose.engine.budget.draft_gate import DraftGateConfig
from goose.engine.core.decode import Generation, StepRecord
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.sizing import Speculator

METHODS = ("pld", "suffix", "tr", "goose", "opt_tree", "hw_tree")


def step_seconds(step: StepRecord) -> float:
    return step.draft_s + step.verify_s + step.update_s


def mean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def contenders(model: str, engine: Any, methods: list[str]) -> dict[str, Callable[[], Speculator]]:
    """engine AR, and each method at budget=auto with the gate on (`<m>:auto`; `<m>:auto:plainlearns`: its
    plain steps take the anchor's top-K for the drafter to learn from) and off (`<m>:auto:nogate`)."""
    table = engine_latency(engine)
    out: dict[str, Callable[[], Speculator]] = {"ar": lambda: Speculator(ARDrafter())}
    for m in methods:
        make = method_factory(m, model=model)
        arms = (
            (f"{m}:auto", DraftGateConfig()),
            (f"{m}:auto:plainlearns", DraftGateConfig(plain_learns=True)),
            (f"{m}:auto:nogate", None),
        )
        for label, gate in arms:
            settings = AutoBudgetSettings(gate=gate, acceptance_prior=model)
            out[label] = auto_budget_factory(make, engine, latency=table, settings=settings)
    return out


STEP_KINDS = ("failed", "cut", "empty", "skipped")


def step_kind(step: StepRecord) -> str | None:
    """failed (drafted, nothing accepted), cut (drafted nodes proposed, the size rule kept the anchor alone:
    with the gate lean, AR's step), empty (nothing proposed), skipped (the gate's AR step)."""
    if not step.drafted:
        return "skipped"
    if step.cut_to_anchor:
        return "cut"
    if step.tree_size == 1:
        return "empty"
    return "failed" if step.accepted_len == 0 else None


def positioned(g: Generation) -> list[tuple[int, StepRecord]]:
    """Each step with the number of tokens committed before it (the context past the prompt it attends to)."""
    out, pos = [], 0
    for s in g.steps:
        out.append((pos, s))
        pos += s.new_tokens
    return out


def matched_kinds(rounds: list[list[Generation]], ar_rounds: list[list[Generation]]) -> dict[str, Any]:
    """Per step kind: Σ seconds over Σ AR's step seconds at the same round, prompt and position, minus 1
    (`overhead`), and the ms the method adds beyond the forward (draft + walk + update, over AR's at those
    positions). Steps at positions AR never reached (AR stopped earlier) are left out."""
    sums = {
        k: {"n": 0, "s": 0.0, "ar": 0.0, "extra": 0.0, "ar_extra": 0.0, "fwd": 0.0, "ar_fwd": 0.0}
        for k in STEP_KINDS
    }
    for rnd, ar_rnd in zip(rounds, ar_rounds, strict=True):
        for g, ar in zip(rnd, ar_rnd, strict=True):
            for pos, s in positioned(g):
                kind = step_kind(s)
                if kind is None or pos >= len(ar.steps):
                    continue
                a, acc = ar.steps[pos], sums[kind]
                acc["n"] += 1
                acc["s"] += step_seconds(s)
                acc["ar"] += step_seconds(a)
                acc["fwd"] += s.forward_s
                acc["ar_fwd"] += a.forward_s
                acc["extra"] += step_seconds(s) - s.forward_s
                acc["ar_extra"] += step_seconds(a) - a.forward_s
    out: dict[str, Any] = {}
    for kind, acc in sums.items():
        n = acc["n"]
        out[kind] = {
            "count": n,
            "overhead": acc["s"] / acc["ar"] - 1.0 if n else None,
            "forward_overhead": acc["fwd"] / acc["ar_fwd"] - 1.0 if n and acc["ar_fwd"] else None,
            "beyond_forward_ms": 1e3 * (acc["extra"] - acc["ar_extra"]) / n if n else None,
            "ar_step_ms": 1e3 * acc["ar"] / n if n else None,
        }
    return out


def summarize(runs: Runs) -> dict[str, Any]:
    """Per contender: step kinds' mean seconds and overhead over AR's mean step and over AR's steps at the
    same positions (`matched`); tokens/s over AR per round."""
    ar_steps = [step_seconds(s) for rnd in runs["ar"] for g in rnd for s in g.steps]
    c_ar = statistics.fmean(ar_steps)
    out: dict[str, Any] = {"ar_step_ms": 1e3 * c_ar, "contenders": {}}
    for name, rounds in runs.items():
        steps = [s for rnd in rounds for g in rnd for s in g.steps]
        entry: dict[str, Any] = {"steps": len(steps)}
        seconds: dict[str | None, list[float]] = {kind: [] for kind in STEP_KINDS}
        for s in steps:
            seconds.setdefault(step_kind(s), []).append(step_seconds(s))
        for kind in STEP_KINDS:
            m = mean_or_none(seconds[kind])
            entry[kind] = {"count": len(seconds[kind]), "overhead": None if m is None else m / c_ar - 1.0}
        entry["matched"] = matched_kinds(rounds, runs["ar"])
        entry["speedup"] = speedup(runs, name)
        entry["tau"] = tau(rounds)
        out["contenders"][name] = entry
    return out


def table(summary: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:+.1f} %"

    lines = [
        f"AR step: {summary['ar_step_ms']:.2f} ms",
        "",
        "| contender | τ | tokens/s over AR | failed draft | cut to the anchor | empty draft | gated AR step |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in summary["contenders"].items():
        s = e["speedup"]
        cells = [f"{pct(e[k]['overhead'])} ({e[k]['count']})" if e[k]["count"] else "—" for k in STEP_KINDS]
        lines.append(
            f"| {name} | {e['tau']:.2f} | {s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}] | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "Against AR's steps at the same positions: whole-step overhead; ms beyond the forward (draft + walk +"
        " update, over AR's)",
        "",
        "| contender | failed draft | cut to the anchor | empty draft | gated AR step |",
        "|---|---|---|---|---|",
    ]
    for name, e in summary["contenders"].items():
        m = e["matched"]
        cells = [
            f"{pct(m[k]['overhead'])}; {m[k]['beyond_forward_ms']:+.2f} ms ({m[k]['count']})"
            if m[k]["count"]
            else "—"
            for k in STEP_KINDS
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap, METHODS, "results/studies/failed_step")
    ap.add_argument("--bench", default="mtbench")
    ap.add_argument("--limit", type=int, default=5, help="the first prompts of --bench (MT-Bench: writing)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    prompts = load_prompts(loaded.tokenizer, args.model, [args.bench], args.limit, args.data_dir, "auto")
    makers = contenders(args.model, engine, args.methods.split(","))
    runs = interleaved_runs(engine, [p.ids for p in prompts], makers, args.repeats, args.max_new_tokens)
    summary = summarize(runs)
    print(table(summary))
    path = Path(args.out) / f"{args.model}-{args.dtype}-{args.bench}.json"
    write_record(
        summary, args, [p.prompt_id for p in prompts], engine_latency(engine).meta.get("device"), path
    )
    return summary


if __name__ == "__main__":
    main()
