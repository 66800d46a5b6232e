"""Every figure and table of the paper from a results directory:

    python -m analysis.make_figures --results results/reference --out figures     (or: make figures)

The rows come from --results; the raw records of the measurement scripts (`make bench` rows under
bench/, forward_speed/ and cost_curve/ records) from --records, by default the parent of --results
(results/). Nothing is read from <out>.

Runs each analysis script on the same loaded rows, prints the files written, and writes
<out>/README.md indexing them with what each shows and what was skipped. A script whose
experiment is absent from the results is skipped with a printed note; a script that fails
otherwise is reported and the exit status is 1, the other scripts still run. Files that an earlier
run wrote into <out> (listed in <out>/.manifest) and this run did not are removed, so a figure of
an experiment no longer in the results cannot linger.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from analysis import (
    chat_template,
    combine_vs_choose,
    cost_curve,
    heldout,
    heterogeneity,
    iso_ablation,
    losslessness,
    main_results,
    non_degradation,
    opt_tree,
    performance_targets,
    readme_results,
    reproduction,
    results_index,
    sampling,
    self_draft_cost,
    sensitivity,
    spec_bench_table,
    tau_decomposition,
    time_split,
    topology,
    wall_clock,
)
from analysis.load import Results, load
from analysis.report import Output, Skip
from analysis.studies.batching import throughput as batching_throughput
from analysis.studies.hw_tree import hw_tree_calibration, hw_tree_gap, hw_tree_sizing, step_cost_in_run
from analysis.studies.verifier_claims import claims as verifier_claims
from analysis.studies.verifiers import verifier_eval

SCRIPTS = [
    main_results,
    tau_decomposition,
    sensitivity,
    heterogeneity,
    iso_ablation,
    topology,
    reproduction,
    losslessness,
    time_split,
    chat_template,
    non_degradation,
    opt_tree,
    sampling,
    verifier_eval,
    verifier_claims,
    batching_throughput,
    self_draft_cost,
    wall_clock,
    heldout,
    spec_bench_table,
    combine_vs_choose,
    performance_targets,
    cost_curve,
    hw_tree_gap,
    hw_tree_calibration,
    hw_tree_sizing,
    step_cost_in_run,
    readme_results,
    results_index,
]


INLINE_TABLE_LINES = 45  # tables up to this many lines are shown in README.md, longer ones linked
MANIFEST = ".manifest"


def remove_stale(out: Path, written: list[Path]) -> list[Path]:
    """Delete the files the previous run listed in <out>/.manifest that this run did not write;
    record this run's files. Returns the removed paths."""
    manifest = out / MANIFEST
    before = set(manifest.read_text().split("\n")) if manifest.exists() else set()
    now = {str(f.relative_to(out)) for f in written if f.is_relative_to(out)}
    removed = []
    for name in sorted(before - now - {""}):
        p = out / name
        if p.is_file() and p.resolve().is_relative_to(out.resolve()):
            p.unlink()
            removed.append(p)
    manifest.write_text("\n".join(sorted(now)) + "\n")
    return removed


def prune_empty(folder: Path, out: Path) -> None:
    """Remove `folder` and its parents below `out` while they are empty (a study with nothing to show)."""
    while folder != out and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def figures_folder(module) -> str:
    """Where a script writes, relative to <out>: a study's script (analysis.studies.<name>.<script>) into
    studies/<name>/, as results/studies/<name>/ holds its runs; every other script into <out> itself."""
    return "/".join(module.__name__.split(".")[1:-1])


def source_path(module) -> str:
    """The script's file relative to the repository root: `analysis/studies/hw_tree/hw_tree_gap.py`."""
    return module.__name__.replace(".", "/") + ".py"


def _doc(module) -> str:
    """The first paragraph of a script's docstring, on one line."""
    return " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())


def run_all(res: Results, out: Path, log=print) -> tuple[dict[str, Output], dict[str, str], dict[str, str]]:
    """(outputs, skipped reasons, failures) per script name."""
    outputs: dict[str, Output] = {}
    skipped: dict[str, str] = {}
    failed: dict[str, str] = {}
    for module in SCRIPTS:
        name = module.__name__.rsplit(".", 1)[-1]
        try:
            folder = out / figures_folder(module)
            folder.mkdir(parents=True, exist_ok=True)
            outputs[name] = module.build(res, folder)
            prune_empty(folder, out)
        except Skip as exc:
            prune_empty(folder, out)
            skipped[name] = str(exc)
            log(f"skipped {name}: {exc}")
        except Exception as exc:  # noqa: BLE001 - report and go on with the other scripts
            failed[name] = f"{type(exc).__name__}: {exc}"
            log(f"FAILED {name}: {failed[name]}\n{traceback.format_exc()}")
    return outputs, skipped, failed


def write_readme(
    res: Results, out: Path, outputs: dict[str, Output], skipped: dict[str, str], failed: dict[str, str]
) -> Path:
    """<out>/README.md: what each file shows, with the PNGs inline and every note."""
    lines = [
        "# Figures and tables",
        "",
        f"Generated by `make figures` (`python -m analysis.make_figures`) from the rows under "
        f"`{Path(res.source).name}/` and the raw records beside them (`bench/`, `forward_speed/`, "
        "`cost_curve/`); do not edit by hand (every number comes from results/, paper values from "
        "`analysis/paper_values.yaml`).",
        "",
        f"{res.scope()}.",
        f"Rows used: {len(res.rows)} (status ok, first row per cell key); dropped: "
        f"{res.rows.attrs.get('n_failed_rows', 0)} failed rows, {res.rows.attrs.get('n_duplicates', 0)} duplicate rows.",
        "",
    ]
    by_name = {m.__name__.rsplit(".", 1)[-1]: m for m in SCRIPTS}
    for name, module in by_name.items():
        lines += [f"## {name} (`{source_path(module)}`)", "", _doc(module), ""]
        if name in skipped:
            lines += [f"*Skipped:* {skipped[name]}", ""]
            continue
        if name in failed:
            lines += [f"**FAILED:** {failed[name]}", ""]
            continue
        o = outputs[name]
        for f in o.files:
            rel = f.relative_to(out) if f.is_relative_to(out) else f
            lines.append(f"- [`{rel}`]({rel})")
        lines.append("")
        for f in o.files:
            rel = f.relative_to(out) if f.is_relative_to(out) else f
            if f.suffix == ".png":
                lines += [f"![{f.stem}]({rel})", ""]
            elif f.suffix == ".md":
                table = f.read_text().splitlines()
                if len(table) <= INLINE_TABLE_LINES:
                    lines += table + [""]
                else:
                    lines += [f"({len(table)} lines: see [`{rel}`]({rel}))", ""]
        for n in o.notes:
            lines.append(f"- Note: {n}")
        if o.notes:
            lines.append("")
    path = out / "README.md"
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Every figure and table of the paper from results/.")
    ap.add_argument(
        "--results",
        default="results/reference",
        help="directory of result JSONL files (searched recursively)",
    )
    ap.add_argument(
        "--records",
        default=None,
        help="the raw measurement records (bench/, forward_speed/, cost_curve/); default: the parent "
        "of --results",
    )
    ap.add_argument(
        "--out", default="figures", help="where figures (PDF + PNG) and tables (Markdown + LaTeX) go"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = load(args.results, args.records)
    if res.rows.empty:
        print(f"note: no usable result rows under {args.results}")
    outputs, skipped, failed = run_all(res, out)
    readme = write_readme(res, out, outputs, skipped, failed)
    for p in remove_stale(out, [f for o in outputs.values() for f in o.files] + [readme]):
        print(f"removed stale {p} (not produced from these results)")
    print("files written:")
    for name, o in outputs.items():
        for n in o.notes:
            print(f"  note ({name}): {n}")
        for f in o.files:
            print(f"  {f}")
    print(f"  {readme}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
