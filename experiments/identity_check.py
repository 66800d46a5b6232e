"""Behaviour identity across a code change: every method on a fixed set of cells, fingerprinted.

A refactor that claims "no change in behaviour" runs this on the tree before and after and compares:
per (method, bench, prompt) the output tokens, forward calls, τ, the per-step accepted lengths and tree
sizes, offered / accepted counts, routes, the drafter's stats (its timings left out) and the method
config with its config_hash. Each method runs at its fixed budget B and under budget=auto with one saved
latency table (so t(n) is the same in both trees and the chosen sizes may be compared); fp32, so that
every output is exact. Rows come from `experiments.lossless_stress` of the tree being checked, read as
plain JSON, so the fingerprint does not depend on the code it checks.

    python -m experiments.identity_check run --out /tmp/before      # in the tree before the change
    python -m experiments.identity_check run --out /tmp/after       # in the tree after it
    python -m experiments.identity_check compare /tmp/before/fingerprint.json /tmp/after/fingerprint.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# one fixed latency table (a bf16 protocol run's), so that the sizes budget=auto picks compare across trees
LATENCY = ROOT / "experiments" / "data" / "identity_check_latency.json"
CELLS = {
    "model": "smollm2-135m",
    "dtype": "float32",
    "benches": "humaneval,mtbench",
    "limit": 1,
    "tokens": 32,
}
FIELDS = (
    "generated_tokens",
    "forward_calls",
    "tau",
    "method_config",
    "config_hash",
    "step_accepted",
    "step_tree_size",
    "offered",
    "accepted",
    "routes",
    "depth_offered",
    "depth_accepted",
    "rank_offered",
    "rank_accepted",
    "stop",
    "lossless",
    "status",
)


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row under `folder` (plain `.jsonl` and sealed `.jsonl.xz`)."""
    rows = []
    for path in sorted(folder.rglob("*.jsonl*")):
        if path.suffix not in (".jsonl", ".xz"):
            continue
        text = lzma.decompress(path.read_bytes()).decode() if path.suffix == ".xz" else path.read_text()
        rows += [json.loads(line) for line in text.splitlines() if line.strip()]
    return rows


def fingerprint(row: dict[str, Any]) -> dict[str, Any]:
    """What must not change: FIELDS, the output's hash and the drafter's stats without timings."""
    out = {f: row.get(f) for f in FIELDS}
    out["output_sha"] = hashlib.sha256(json.dumps(row.get("output_ids")).encode()).hexdigest()[:16]
    stats = row.get("drafter_stats") or {}
    out["drafter_stats"] = {k: v for k, v in sorted(stats.items()) if not k.endswith("_s")}
    return out


def run(out: Path, python: str) -> Path:
    """lossless_stress at fixed B and under budget=auto; the fingerprint of every row to out/fingerprint.json."""
    out.mkdir(parents=True, exist_ok=True)
    for budget in ("fixed", "auto"):
        sets = [f"budget={budget}"] + ([f"budget_profile={LATENCY}"] if budget == "auto" else [])
        cmd = [
            python,
            "-m",
            "experiments.lossless_stress",
            "--model",
            CELLS["model"],
            "--dtype",
            CELLS["dtype"],
        ]
        cmd += ["--benches", CELLS["benches"], "--limit", str(CELLS["limit"]), "--threads", "2"]
        cmd += ["--max-new-tokens", str(CELLS["tokens"]), "--out", str(out / budget)]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=False, cwd=Path.cwd())
    prints = {}
    for budget in ("fixed", "auto"):
        for row in read_rows(out / budget):
            prints[f"{budget}|{row['method']}|{row['bench']}|{row['prompt_id']}"] = fingerprint(row)
    path = out / "fingerprint.json"
    path.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
    print(f"{len(prints)} rows fingerprinted -> {path}")
    return path


def compare(before: Path, after: Path) -> int:
    """0 if every cell of `before` has the same fingerprint in `after` (and no cell is missing)."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    missing = sorted(set(a) ^ set(b))
    changed = {k: [f for f in a[k] if a[k][f] != b[k].get(f)] for k in sorted(set(a) & set(b))}
    changed = {k: v for k, v in changed.items() if v}
    methods = sorted({k.split("|")[1] for k in a})
    print(
        f"{len(a)} cells before, {len(b)} after, {len(methods)} methods; {len(changed)} changed, {len(missing)} unmatched"
    )
    for k in missing:
        print(f"  unmatched: {k}")
    for k, fields in changed.items():
        print(f"  changed: {k}: {', '.join(fields)}")
    return 1 if changed or missing else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="fingerprint this tree's methods on the fixed cells")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--python", default=sys.executable)
    c = sub.add_parser("compare", help="compare two fingerprint.json files")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        run(args.out, args.python)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
