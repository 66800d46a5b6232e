"""Export specdec_bench's `speculation_profile.json` (schema 1.0) per (model, bench, method) cell.

    python -m analysis.speculation_profile --results results/reference --out figures/profiles

Rows are read as everywhere in analysis (the first ok row of each cell key). A (model, bench,
method) with one cell in the results writes `<out>/<model>/<bench>/<method>/speculation_profile.json`;
one with several cells (configs, prompt forms, sampling settings, lengths) writes one per cell under
`<method>/<tag>/`, tag = config hash, max_new_tokens, dtype, raw|chat, T/top-p/top-k. `index.json`
lists every profile with its checks. Each profile is checked (`goose.records.acceptance.
validate_profile`: 1 + Σ marginal = mean acceptance length within 0.02, monotone marginals, and
the histogram's mean, which hold by construction when all come from one histogram; and
`counter_check`, the informative one: each row's steps = forward calls - 1 and its committed tokens =
generated tokens, the EOS step's cut counted as documented there); the exit status is 1 when a check
fails. Duplicated rows (one cell key twice) count once, so the export is the same with or without them.
No torch.

`--only field=value` (repeatable) keeps the cells whose setting field has that value (e.g.
`--only temperature=0 --only chat_template=false`: greedy, raw prompts); `--show` prints each
profile's histogram, marginal and conditional rates and both means.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from goose.records.acceptance import counter_check, speculation_profile, validate_profile
from goose.records.results import cell_key, read_rows
from goose.records.row import CELL_FIELDS, migrate_row

# A cell's fields without the prompt and its sample seed (which tell the rows of a cell apart).
SETTING = tuple(f for f in CELL_FIELDS if f not in ("prompt_id", "sample_seed"))


def _field(row: dict[str, Any], name: str) -> Any:
    return migrate_row(row).get(name)  # a row from before the field: raw, greedy


def cells(rows: Sequence[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """The ok rows per cell (first row of each cell key wins), in file order."""
    seen: set[tuple] = set()
    out: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status", "ok") != "ok" or cell_key(r) in seen:
            continue
        seen.add(cell_key(r))
        out.setdefault(tuple(_field(r, f) for f in SETTING), []).append(r)
    return out


def tag(setting: dict[str, Any]) -> str:
    """A folder name telling apart the cells of one (model, bench, method)."""
    form = "chat" if setting["chat_template"] else "raw"
    if setting.get("prompt_format") is not None:  # a base model's plain format (goose.harness.chat)
        form = f"format{hashlib.sha256(str(setting['prompt_format']).encode()).hexdigest()[:8]}"
    warp = (
        f"T{float(setting['temperature'] or 0):g}-p{float(setting['top_p']):g}-k{int(setting['top_k'] or 0)}"
    )
    return f"{setting['config_hash']}-n{setting['max_new_tokens']}-{setting['dtype']}-{form}-{warp}"


def cell_profile(setting: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The profile of one cell, with its measurement conditions."""
    first = rows[0]
    hardware = {(r.get("hardware") or {}).get("gpu") or (r.get("hardware") or {}).get("cpu") for r in rows}
    conditions = {
        "engine": "goose-bench",
        "dataset": setting["bench"],
        "num_requests": len(rows),
        "concurrency": 1,
        "max_new_tokens": setting["max_new_tokens"],
        "dtype": setting["dtype"],
        "chat_template": bool(setting["chat_template"]),
        "prompt_format": setting.get("prompt_format"),
        "temperature": setting["temperature"],
        "top_p": setting["top_p"],
        "top_k": setting["top_k"],
        "config_hash": setting["config_hash"],
        "method_config": first.get("method_config"),
        "hardware": sorted(str(h) for h in hardware if h),
        "git_commits": sorted({str(r.get("git_commit")) for r in rows if r.get("git_commit")}),
        "draft_tree": True,  # the accepted path is the longest accepted root path of a token tree
    }
    profile = speculation_profile(
        rows, setting["method"], setting["model"], measurement_conditions=conditions
    )
    profile["per_category"] = {
        setting["bench"]: {
            "mean_accept_length": profile["mean_accept_length"],
            "mean_accept_length_per_request": profile["mean_accept_length_per_request"],
            "num_requests": len(rows),
        }
    }
    return profile


def matches(setting: dict[str, Any], only: Sequence[str]) -> bool:
    """Whether the cell's setting has every `field=value` of `only` (booleans as true/false,
    numbers compared as numbers; a missing sampling field is greedy)."""
    for item in only:
        name, _, want = item.partition("=")
        if name not in setting:
            raise SystemExit(f"--only {item}: {name!r} is not one of {', '.join(SETTING)}")
        have = setting[name]
        if isinstance(have, bool) or want.lower() in ("true", "false"):
            ok = bool(have) == (want.lower() == "true")
        elif isinstance(have, (int, float)) or have is None:
            try:
                ok = float(have or 0) == float(want)
            except ValueError:
                ok = False
        else:
            ok = str(have) == want
        if not ok:
            return False
    return True


def show(profile: dict[str, Any]) -> str:
    """The profile's acceptance in a few lines."""
    ext = (profile.get("extensions") or {}).get("goose_bench") or {}
    cond = profile["measurement_conditions"]
    lines = [
        f"{profile['target_model']} / {cond['dataset']} / {profile['method']}: "
        f"{ext.get('num_spec_steps')} steps, {cond['num_requests']} requests, "
        f"K = {profile['num_speculative_tokens']}",
        f"  acceptance-length histogram (L = accepted + 1: steps): {profile['acceptance_length_histogram']}",
        f"  marginal    P(>= k accepted), k = 1..K: {profile['marginal_accept_rates']}",
        f"  conditional P(k | < k accepted), k = 1..K: {profile['conditional_accept_rates']}",
        f"  mean acceptance length: per step {profile['mean_accept_length']}, "
        f"per request {profile['mean_accept_length_per_request']}",
    ]
    mc = (profile.get("validation") or {}).get("mean_consistency") or {}
    lines.append(
        f"  check: 1 + Σ marginal = {mc.get('implied_mean_accept_length')} vs "
        f"{mc.get('reported_mean_accept_length')} (|Δ| {mc.get('abs_delta')} <= {mc.get('tolerance')}: "
        f"{mc.get('passed')})"
    )
    for key, label in (
        ("acceptance_by_depth", "depth d = 1.."),
        ("acceptance_by_sibling_rank", "rank r = 0.."),
    ):
        rec = ext.get(key)
        if rec:
            lines.append(f"  acceptance by {label}: {rec['rate']}")
    src = ext.get("acceptance_by_source") or {}
    lines.append(
        "  acceptance by source: " + ", ".join(f"{k} {v['accepted']}/{v['offered']}" for k, v in src.items())
    )
    return "\n".join(lines)


def export(
    results: str | Path,
    out: str | Path,
    methods: Sequence[str] | None = None,
    only: Sequence[str] = (),
    verbose: bool = False,
) -> list[dict[str, Any]]:
    """Write one profile per cell under `out` (see the module docstring); returns the index."""
    out = Path(out)
    groups = cells(read_rows(results))
    per_triple: dict[tuple, int] = {}
    for setting in groups:
        per_triple[setting[:3]] = per_triple.get(setting[:3], 0) + 1
    index = []
    for key, rows in groups.items():
        setting = dict(zip(SETTING, key, strict=True))
        if (methods and setting["method"] not in methods) or not matches(setting, only):
            continue
        folder = out / setting["model"] / setting["bench"] / setting["method"]
        if per_triple[key[:3]] > 1:
            folder = folder / tag(setting)
        profile = cell_profile(setting, rows)
        check = validate_profile(profile)
        counters = counter_check(rows)  # the rows' own counters: the informative check
        profile.setdefault("validation", {})["row_counters"] = counters
        check["passed"] = check["passed"] and counters["passed"]
        if verbose:
            print(show(profile))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "speculation_profile.json"
        path.write_text(json.dumps(profile, indent=2) + "\n")
        index.append(
            {
                **setting,
                "path": str(path.relative_to(out)),
                "mean_accept_length": profile["mean_accept_length"],
                "mean_accept_length_per_request": profile["mean_accept_length_per_request"],
                "passed": check["passed"],
                "mean_consistency": check["mean_consistency"],
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return index


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True, help="a results directory (searched for *.jsonl) or file")
    ap.add_argument("--out", required=True, help="where the profiles go")
    ap.add_argument("--methods", default="", help="comma-separated methods (default: all)")
    ap.add_argument("--only", action="append", default=[], metavar="FIELD=VALUE", help="keep matching cells")
    ap.add_argument("--show", action="store_true", help="print each profile's acceptance")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m] or None
    index = export(args.results, args.out, methods, args.only, args.show)
    failed = [e for e in index if not e["passed"]]
    for e in index:
        mc = e["mean_consistency"] or {}
        print(
            f"{e['path']}: mean acceptance length {e['mean_accept_length']} per step, "
            f"{e['mean_accept_length_per_request']} per request; 1 + Σ marginal = "
            f"{mc.get('implied_mean_accept_length')} ({'ok' if e['passed'] else 'FAILED'})"
        )
    print(f"{len(index)} profiles in {args.out}, {len(failed)} failing their checks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
