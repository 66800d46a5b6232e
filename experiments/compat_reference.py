"""The harness's Goose and isotropic controls against the official Goose code, prompt by prompt.

`../shared/reference/official-goose-smollm2-fp32.csv` holds the official implementation's counters
(github.com/2kinto/GOOSE_Speculative_Decoding @ c5c8bb37) for goose, iso3 and iso5 on SmolLM2-135M
fp32, raw prompts (no chat template), the first 20 prompts of HumanEval, GSM8K and MT-Bench, greedy,
128 new tokens, stop on EOS id 2 (its README says exactly how). This script runs the same prompts
through the harness (the project's loaders: goose.harness.compose, one model, `generate`) for each
setting and compares forward calls per prompt:

  authors               method.drafter.compat=authors, the `transformers` forward (lean=False)
  harness               the default (compat=harness, the lean forward)
  authors-<flag>        --toggles: compat=authors with one flag of goose.method.compat.CompatRules
                        reverted to the harness's choice (`lean_forward`: the lean forward), to
                        measure what each difference is worth

It prints per setting and method the prompts whose forward calls equal the official counter, τ per
benchmark, and, for each prompt that differs, which official counters differ (routes, offered and
accepted nodes). The official code records no per-cycle trace, so for a prompt on which the
`authors` setting matches the official counters, the first cycle that differs is read from the
harness's own traces: the first cycle whose (route, tree size, accepted length) differs from the
`authors` setting's (a route code s/b/c/a for spine tree, branch tree, chain, AR, then
"<tree size>:<accepted>"; cycle 1 is the first after the prefill). `--ablations` adds the four Goose ablations (no official
counters: τ only). Rows go to <out>/<setting>.csv (one per prompt), the summary to
<out>/summary.json; a setting whose CSV exists is read back instead of re-run (--force re-runs).

    python -m experiments.compat_reference                             # goose iso3 iso5, both settings
    python -m experiments.compat_reference --methods goose --toggles   # one difference at a time
    python -m experiments.compat_reference --ablations --settings authors harness
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from goose.engine.core.decode import generate
from goose.engine.core.tree import SPINE
from goose.engine.core.walk import greedy_walk
from goose.engine.forward.choose import verification_engine
from goose.harness.chat import encode_prompt
from goose.harness.compose import benchmark_prompts, compose_config, drafter_factory
from goose.harness.models.load import load_model
from goose.method.compat import AUTHORS, HARNESS, CompatRules

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "official-goose-smollm2-fp32.csv"
OUT = ROOT / "results" / "reference" / "compat"
BENCHES = ("humaneval", "gsm8k", "mtbench")
METHODS = ("goose", "iso3", "iso5")
ABLATIONS = ("goose_no_spine_branches", "goose_no_bigram", "goose_no_consensus", "goose_no_prefill")
MAX_NEW_TOKENS = 128
LIMIT = 20
MODEL = "smollm2-135m"  # the official counters' model: every config here is composed with it
# Flags that cannot change an isotropic tree (it has no spine, no chain extension, no ρ).
GOOSE_ONLY = ("largest_remainder_split", "cut_extension_at_limit", "spine_cap", "rho0_spine_floor")
# The official DecodeStats counters compared after forward_calls, in this order.
COUNTERS = (
    "generated_tokens",
    "spine_tree_cycles",
    "branch_tree_cycles",
    "chain_cycles",
    "ar_cycles",
    "spine_nodes",
    "branch_nodes",
    "spine_accepted",
    "branch_accepted",
)


def official_task_id(bench: str, prompt_id: str) -> str:
    """The reference CSV's task id of a harness prompt id (GSM8K rows are `gsm8k_<index>`)."""
    return f"gsm8k_{prompt_id}" if bench == "gsm8k" else str(prompt_id)


def read_reference(path: Path = REFERENCE) -> dict[tuple[str, str, str], dict[str, int]]:
    """(bench, method, task id) -> the official counters (ints)."""
    out = {}
    with path.open() as fh:
        for row in csv.DictReader(fh):
            key = (row.pop("dataset"), row.pop("method"), row.pop("task_id"))
            out[key] = {k: int(v) for k, v in row.items()}
    return out


def reference_prompts(
    tokenizer: Any, limit: int = LIMIT, benches=BENCHES
) -> list[tuple[str, str, list[int]]]:
    """(bench, official task id, token ids) of the reference prompts, built by the project's loaders
    as the reference README says: raw text (bench.chat_template=false), first `limit` in file order,
    the conf/bench templates (GSM8K: "Question: {question}\\n\\nAnswer: Let me solve step by step.\\n")."""
    out = []
    for bench in benches:
        cfg = compose_config(
            [f"model={MODEL}", f"bench={bench}", f"bench.limit={limit}", "bench.chat_template=false"]
        )
        _, prompts, _ = benchmark_prompts(cfg, limit)
        for p in prompts:
            out.append((bench, official_task_id(bench, p.prompt_id), encode_prompt(tokenizer, p.text, False)))
    return out


def make_drafter(method: str, compat: str, rules: CompatRules | None = None):
    """The configured drafter of conf/method/<method>.yaml (validated) at `compat`, with `rules`
    replacing its compat rules if given (before any prompt, so the table is built to match)."""
    cfg = compose_config([f"model={MODEL}", f"method={method}", f"method.drafter.compat={compat}"])
    drafter = drafter_factory(cfg)()
    if rules is not None:
        drafter.rules = rules
    return drafter


def settings(toggles: bool, names: list[str] | None) -> dict[str, tuple[str, CompatRules]]:
    """setting name -> (compat, rules)."""
    out = {"authors": ("authors", AUTHORS), "harness": ("harness", HARNESS)}
    if toggles:
        for flag in CompatRules.flags():
            reverted = dataclasses.replace(AUTHORS, **{flag: getattr(HARNESS, flag)})
            out[f"authors-{flag}"] = ("authors", reverted)
    if names:
        out = {k: v for k, v in out.items() if k in names}
    return out


class Counters:
    """Per-prompt counters in the official `DecodeStats` sense, gathered from `generate`'s steps.

    spine/branch nodes are the offered nodes of every verified tree or chain; accepted counts the
    greedy walk over the whole verified tree (the official code counts it before cutting the output
    at 128 tokens or EOS)."""

    def __init__(self) -> None:
        self.values = {k: 0 for k in COUNTERS}
        self.trace: list[str] = []  # per cycle: route code, tree size, accepted length

    def on_step(self, tree, outcome, record) -> None:
        v = self.values
        route = record.route
        path = greedy_walk(tree, outcome.predictions)[1:]
        code = {"spine_tree": "s", "branch_tree": "b", "tree": "b", "chain": "c"}.get(route, "a")
        self.trace.append(f"{code}{len(tree)}:{len(path)}")
        if route in ("spine_tree", "branch_tree"):
            v[f"{route}_cycles"] += 1
        elif route == "tree":  # the isotropic controls: a tree without spine
            v["branch_tree_cycles"] += 1
        elif route == "chain":
            v["chain_cycles"] += 1
        else:
            v["ar_cycles"] += 1
        v["spine_nodes"] += record.offered["spine"]
        v["branch_nodes"] += record.offered["branch"]
        spine = sum(1 for u in path if tree.sources[u] == SPINE)
        v["spine_accepted"] += spine
        v["branch_accepted"] += len(path) - spine


def run_setting(engines, method, compat, rules, prompts, ref) -> list[dict[str, Any]]:
    """One row per prompt: the harness's counters beside the official ones."""
    engine = engines["transformers" if not rules.lean_forward else "lean"]
    drafter = make_drafter(method, compat, rules)
    rows = []
    for bench, task_id, ids in prompts:
        counters = Counters()
        gen = generate(engine, drafter, ids, MAX_NEW_TOKENS, on_step=counters.on_step)
        counters.values["generated_tokens"] = len(gen.output_ids)
        official = ref.get((bench, method, task_id), {})
        row = {"method": method, "bench": bench, "task_id": task_id, "prompt_length": len(ids)}
        row["forward_calls"] = gen.forward_calls
        row.update(counters.values)
        row["official_forward_calls"] = official.get("forward_calls", "")
        row["match"] = int(official.get("forward_calls") == gen.forward_calls) if official else ""
        row["differing_counters"] = " ".join(
            f"{k}:{counters.values[k]}/{official[k]}"
            for k in COUNTERS
            if official and counters.values[k] != official[k]
        )
        row["trace"] = " ".join(counters.trace)
        rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def first_difference(trace: str, other: str) -> str:
    """'cycle k: <this> vs <other>' at the first cycle where two traces differ ('' if none)."""
    a, b = trace.split(), other.split()
    for k, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return f"cycle {k}: {x} vs {y}"
    return "" if len(a) == len(b) else f"cycle {min(len(a), len(b)) + 1}: one run ended"


def summarize(rows: list[dict[str, Any]], authors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per method: matches (of prompts with an official counter), τ per bench and pooled, and the
    prompts that differ (with the first cycle that differs from the `authors` rows where those
    match the official counters)."""
    matched = {
        (r["method"], r["bench"], r["task_id"]): r["trace"]
        for r in authors or []
        if str(r["match"]) == "1" and r.get("trace")
    }
    out: dict[str, Any] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        checked = [r for r in mine if str(r["match"]) != ""]
        tau = {}
        for bench in (*BENCHES, "all"):
            sel = [r for r in mine if bench in ("all", r["bench"])]
            calls = sum(int(r["forward_calls"]) for r in sel)
            tau[bench] = round(sum(int(r["generated_tokens"]) for r in sel) / calls, 4) if calls else None
        out[method] = {
            "matches": sum(int(r["match"]) for r in checked),
            "checked": len(checked),
            "tau": tau,
            "differs": [
                f"{r['bench']} {r['task_id']}: forward_calls {r['forward_calls']} vs {r['official_forward_calls']}"
                f" ({r['differing_counters'] or 'other counters equal'})"
                + (
                    f"; first differing cycle vs authors: {first_difference(r['trace'], ref_trace)}"
                    if (ref_trace := matched.get((method, r["bench"], r["task_id"]))) and r.get("trace")
                    else ""
                )
                for r in checked
                if str(r["match"]) == "0"
            ],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), help="methods with official counters")
    parser.add_argument("--ablations", action="store_true", help="also the four Goose ablations (τ only)")
    parser.add_argument("--toggles", action="store_true", help="also compat=authors minus one flag at a time")
    parser.add_argument(
        "--settings", nargs="+", default=None, help="only these settings (e.g. authors harness)"
    )
    parser.add_argument("--limit", type=int, default=LIMIT, help="prompts per benchmark (reference: 20)")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="folder of the per-setting CSVs and summary.json"
    )
    parser.add_argument("--force", action="store_true", help="re-run settings whose CSV exists")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    ref = read_reference()
    methods = list(args.methods) + (list(ABLATIONS) if args.ablations else [])
    loaded = engines = prompts = None
    summary_path = args.out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for name, (compat, rules) in settings(args.toggles, args.settings).items():
        path = args.out / f"{name}.csv"
        rows = read_csv(path) if path.exists() else []
        done = {r["method"] for r in rows}
        todo = [
            m
            for m in methods
            if (args.force or m not in done)
            and not (m.startswith("iso") and name.removeprefix("authors-") in GOOSE_ONLY)
        ]
        if todo and loaded is None:
            cfg = compose_config([f"model={MODEL}"])
            from omegaconf import OmegaConf

            loaded = load_model(**OmegaConf.to_container(cfg.model, resolve=True))
            engines = {
                lean: verification_engine(
                    loaded.model, loaded.eos_token_ids, loaded.context_length, lean=(lean == "lean") or False
                )
                for lean in ("lean", "transformers")
            }
            prompts = reference_prompts(loaded.tokenizer, args.limit)
        for method in todo:
            t0 = time.perf_counter()
            new = run_setting(engines, method, compat, rules, prompts, ref)
            rows = [r for r in rows if r["method"] != method] + new
            write_csv(path, rows)
            print(f"[{name}] {method}: {time.perf_counter() - t0:.0f} s", flush=True)
        if rows:
            authors_csv = args.out / "authors.csv"
            authors = read_csv(authors_csv) if name != "authors" and authors_csv.exists() else None
            summary[name] = summarize(rows, authors)
            args.out.mkdir(parents=True, exist_ok=True)
            summary_path.write_text(json.dumps(summary, indent=1) + "\n")
        for method, s in summary.get(name, {}).items():
            if method not in methods:
                continue
            taus = " ".join(f"{b}={t}" for b, t in s["tau"].items())
            match = f"{s['matches']}/{s['checked']} prompts match" if s["checked"] else "no official counters"
            print(f"{name:34s} {method:24s} {match:22s} τ {taus}")
            for line in s["differs"]:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
