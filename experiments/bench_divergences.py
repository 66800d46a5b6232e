"""Every divergence of a `make bench` run from engine AR, classified by its measured top-2 margin.

In fp32 every contender must equal engine AR token for token. In bf16 a wide (tree) forward rounds
differently from a one-token step, so an output may leave AR's at a near-tie; anything else is a
bug. The bench compares outputs in its first repeat (experiments/bench_summary.py); for a greedy
run this module gives each of those mismatches the verdict `goose.harness.runner.divergence_verdict` gives a
`run.py` cell: the top-2 margin of a teacher-forced forward over the prompt and AR's output up to
the first differing token, against the near-tie threshold (2 ulps of the top logit in the model's
dtype, at least 1e-4). Each contender's entry in `summary.identical_to_engine_ar` then counts
`near_tie` and `real`, and each mismatch carries its margin. Runs at temperature > 0 are not
classified: transformers' samples and STAND's drafts follow other random streams than engine AR's,
so their outputs differ by design.

`make bench` classifies after its timed rounds, with engine AR's outputs still in memory. A record
written before the bench did (or by a run whose classification should be checked again) is
classified afterwards, on the same kind of machine:

    python -m experiments.bench_divergences figures/bench_bfloat16.json

which regenerates engine AR's output on each prompt that has a mismatch, with the record's model,
dtype, forward, threads, prompts and sampling, checks that it is as long as the run's engine AR
output on that prompt (engine AR's outputs are deterministic: the record lists any prompt on
which they changed between repeats), and writes the verdicts into the record, with
`summary.divergences_classified` saying when and on which machine.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from goose.engine.core.sampling import SamplingParams, derive_seed
from goose.engine.core.verifier import VerificationEngine
from goose.harness.run_state import write_text_atomically
from goose.harness.runner import divergence_verdict, environment

PromptKey = tuple[str, str]
"""(bench, prompt id)."""
VerdictAt = Callable[[str, str, int], dict[str, Any]]
"""(bench, prompt id, first differing index) -> divergence_verdict's fields."""


def mismatched_prompts(summary: dict[str, Any]) -> set[PromptKey]:
    """(bench, prompt id) of every prompt on which some contender left engine AR's output."""
    return {
        (m["bench"], m["prompt_id"])
        for v in (summary.get("identical_to_engine_ar") or {}).values()
        for m in v.get("mismatches", [])
    }


def classify(summary: dict[str, Any], verdict_at: VerdictAt) -> dict[str, tuple[int, int]]:
    """Annotate every mismatch of `summary["identical_to_engine_ar"]` in place with the verdict at
    its first differing index (one forward per distinct (prompt, index)) and the other contenders
    that leave engine AR at the same token (`same_divergence_in`: where transformers' plain greedy
    `generate`, which drafts nothing, is one of them, the divergence is the two forwards' rounding,
    not a verifier's), and count them per contender. Returns {contender: (near-ties, real)}."""
    verdicts: dict[tuple[str, str, int], dict[str, Any]] = {}
    counts: dict[str, tuple[int, int]] = {}
    entries = {n: e for n, e in (summary.get("identical_to_engine_ar") or {}).items() if "mismatches" in e}
    diverging: dict[tuple[str, str, int], list[str]] = {}
    for name, entry in entries.items():
        for m in entry["mismatches"]:
            diverging.setdefault((m["bench"], m["prompt_id"], m["first_diff"]), []).append(name)
    for name, entry in entries.items():
        for m in entry["mismatches"]:
            key = (m["bench"], m["prompt_id"], m["first_diff"])
            if key not in verdicts:
                verdicts[key] = verdict_at(*key)
            m.update(verdicts[key])
            m["same_divergence_in"] = [n for n in diverging[key] if n != name]
        near = sum(1 for m in entry["mismatches"] if m["near_tie"])
        entry["near_tie"], entry["real"] = near, len(entry["mismatches"]) - near
        counts[name] = (near, entry["real"])
    return counts


def classify_against_ar(
    summary: dict[str, Any],
    engine: VerificationEngine,
    prompt_ids: Mapping[PromptKey, list[int]],
    ar_outputs: Mapping[PromptKey, list[int]],
    sampling: SamplingParams,
    seed: int,
    how: dict[str, Any],
) -> dict[str, tuple[int, int]]:
    """`classify` with each divergence's verdict taken after the prompt and engine AR's output up
    to the first differing token (the run's own outputs in `make bench`, regenerated ones
    afterwards), at the prompt's seed as the bench derives it; `how` goes into
    `summary["divergences_classified"]`."""

    def verdict_at(bench: str, prompt_id: str, idx: int) -> dict[str, Any]:
        key = (bench, prompt_id)
        prefix = prompt_ids[key] + ar_outputs[key][:idx]
        return divergence_verdict(engine, prefix, sampling, derive_seed(seed, prompt_id))

    counts = classify(summary, verdict_at)
    summary["divergences_classified"] = how
    return counts


def real_mismatches(summary: dict[str, Any]) -> list[str]:
    """'contender bench/prompt@index' for every classified mismatch that is not a near-tie."""
    return [
        f"{name} {m['bench']}/{m['prompt_id']}@{m['first_diff']} (margin {m['diff_margin']:.3g} > "
        f"{m['near_tie_threshold']:.3g}; same divergence in: {', '.join(m['same_divergence_in']) or 'none'})"
        for name, entry in (summary.get("identical_to_engine_ar") or {}).items()
        for m in entry.get("mismatches", [])
        if m.get("near_tie") is False
    ]


def classify_record(path: Path, data_dir: str | None = None) -> dict[str, tuple[int, int]]:
    """Classify the mismatches of the bench record at `path` afterwards (see the module docstring)
    and write them into it. Raises ValueError when a regenerated engine AR output is not as long
    as the run's, since its verdicts would then be about another output."""
    # here, not above: experiments.bench imports this module
    from experiments.bench import engine_contender, load_prompts, method_factory, model_and_engine

    record = json.loads(path.read_text())
    args, summary = record["args"], record["summary"]
    if float(args.get("temperature") or 0) > 0:
        raise ValueError(
            f"{path} sampled at temperature {args['temperature']}: only greedy records are classified "
            "(transformers' samples and STAND's drafts follow other random streams, so their outputs "
            "differ from engine AR's by design)"
        )
    need = mismatched_prompts(summary)
    if not need:
        return classify(summary, lambda *_: {})
    if args.get("threads"):
        torch.set_num_threads(args["threads"])
    loaded, engine = model_and_engine(args["model"], args["dtype"], args["prepack"], args["compile"])
    prompts = {
        (p.bench, p.prompt_id): p
        for p in load_prompts(
            loaded.tokenizer,
            args["model"],
            [b for b in args["benches"].split(",") if b],
            args["limit"],
            data_dir or args["data_dir"],
            args["chat_template"],
        )
    }
    run_tokens = {
        (p["bench"], p["prompt_id"]): p["runs"][0]["engine:ar"]["tokens"]
        for p in record["per_prompt"]
        if p["runs"] and p["runs"][0].get("engine:ar")
    }
    sampling = SamplingParams(args["temperature"], args["top_p"], args["top_k"])
    ar = engine_contender(engine, method_factory("ar")(), sampling)
    outputs: dict[PromptKey, list[int]] = {}
    for key in sorted(need):
        seed = derive_seed(args["seed"], key[1])
        out = ar(prompts[key].ids, args["max_new_tokens"], seed).output_ids
        if len(out) != run_tokens.get(key):
            raise ValueError(
                f"{key[0]}/{key[1]}: engine AR regenerated {len(out)} tokens, the run had {run_tokens.get(key)}; "
                "classify on the machine kind and code that ran the bench"
            )
        outputs[key] = out

    how = {
        "when": "afterwards (experiments/bench_divergences.py)",
        "ar_regenerated_prompts": len(outputs),
        "environment": environment(),
    }
    ids = {key: p.ids for key, p in prompts.items()}
    counts = classify_against_ar(summary, engine, ids, outputs, sampling, args["seed"], how)
    write_text_atomically(path, json.dumps(record, indent=1, default=str))
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("record", type=Path, help="a bench record (figures/bench_<dtype>.json)")
    ap.add_argument(
        "--data-dir", default=None, help="the benchmarks' prompts, if not where the run read them"
    )
    args = ap.parse_args(argv)
    if not args.record.is_file():
        ap.error(f"no bench record at {args.record}")
    counts = classify_record(args.record, args.data_dir)
    for name, (near, real) in counts.items():
        print(f"{name:24s} near-tie {near:3d}   real {real:3d}")
    real = real_mismatches(json.loads(args.record.read_text())["summary"])
    print(f"wrote the verdicts into {args.record}; real mismatches: {len(real) or 'none'}")
    for line in real:
        print(f"  {line}")
    return 1 if real else 0


if __name__ == "__main__":
    raise SystemExit(main())
