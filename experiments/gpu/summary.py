"""What `make gpu-check` prints at the end and whether it fails: one summary line per stage and shape read
from the record, the targets of a GPU run met or not, and the failures (a failed device test, an fp32
output that differs from AR's, a half-precision divergence that is not a near-tie, a failed prompt)."""

from __future__ import annotations

from typing import Any

from experiments.gpu import graph_probe
from experiments.gpu.profile import TARGET_AR_OVER_GENERATE, TARGET_FLOOR, TARGET_T64
from experiments.gpu.record import ratio


def summary_lines(record: dict[str, Any]) -> list[str]:
    env = record["environment"]
    gpu = env["hardware"]["gpu"]
    lines = [
        f"make gpu-check on {gpu} (torch {env['versions']['torch']}, transformers {env['versions']['transformers']})"
        if gpu
        else "NO GPU FOUND: this is the CPU run of make gpu-check (the same code paths at toy sizes); "
        "none of these figures describes a GPU."
    ]
    st = record["stages"]
    if "tests" in st:
        t = st["tests"]
        lines.append(
            f"device tests ({t['device']}): {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped"
        )
        lines += [f"  FAILED {f}" for f in t["failed_tests"]]
    if "lossless" in st:
        lo = st["lossless"]
        lines.append(
            f"lossless, {lo['model']} on the device, first {lo['limit']} prompts of {', '.join(lo['benches'])}, "
            f"{lo['max_new_tokens']} tokens:"
        )
        for dtype in (d for d in lo if isinstance(lo[d], dict)):
            r = lo[dtype]
            if "error" in r:
                lines.append(f"  {dtype}: not run: {r['error']}")
                continue
            tot = r["totals"]
            if not tot:
                lines.append(f"  {dtype}: no method row was written (the run was cut short)")
                continue
            benches = f" ({', '.join(r['benches'])})" if r.get("benches") else ""
            lines.append(
                f"  {dtype}{benches}: {len(r['methods'])} methods, {tot['identical']}/{tot['prompts']} "
                f"outputs identical to AR; mismatches: {tot['near_tie']} near-tie, {tot['real']} real; "
                f"{tot['failed']} failed"
                + (
                    f"; {tot['no_verdict']} sampled-draft outputs (exact in distribution only)"
                    if tot.get("no_verdict")
                    else ""
                )
            )
            cross = r.get("ar_identical_to_eager")
            if cross:
                lines.append(
                    f"  {dtype}: AR through CUDA graphs identical to eager AR on "
                    f"{cross['identical']}/{cross['prompts']} prompts"
                )
    used = st.get("usedby")
    if used:
        lines.append(f"used-by command (rc {used['returncode']}, {used['seconds']:.0f} s): {used['command']}")
        for m, s in (used.get("summary") or {}).items():
            lines.append(
                f"  {used.get('model')} {m}: {s['prompts']} prompts, tau {s['tau']:.2f}, "
                f"{s['tokens_per_s']:.1f} tok/s, lossless {s['lossless_share']}, "
                f"random_weights {used.get('random_weights')}"
            )
    for name, shape in (st.get("timing") or {}).items():
        parts = []
        for kv, curve in shape["cost_curve"].items():
            rel = ", ".join(f"t({n})/t(1) {ratio(curve, n):.2f}" for n in (16, 64, 128) if ratio(curve, n))
            parts.append(f"KV {kv}: t(1) {curve['seconds'][0] * 1e3:.1f} ms, {rel}")
        lines.append(
            f"{name} ({shape['dtype']}, random weights, {shape['parameters'] / 1e9:.2f}B): "
            + "; ".join(parts)
        )
        floor = shape.get("bandwidth_floor")
        if floor:
            lines.append(
                f"  t(1) over its bandwidth floor ({floor['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s copy, "
                f"{floor['weight_bytes_read'] / 2**30:.2f} GiB of weights): "
                + ", ".join(
                    f"KV {kv}: {1e3 * floor['seconds'][kv]:.2f} ms floor, {x:.2f}x"
                    for kv, x in floor["t1_over_floor"].items()
                )
            )
        ar = shape["ar_vs_generate"]
        tps = ar["tokens_per_s"]
        lines.append(
            "  AR tokens/s: "
            + ", ".join(f"{n} {v['median']:.1f}" for n, v in tps.items())
            + f"; engine AR / generate {ar['engine:ar_over_generate']['median']:.2f}x "
            f"[{ar['engine:ar_over_generate']['min']:.2f}, {ar['engine:ar_over_generate']['max']:.2f}]"
        )
        comp = shape.get("compile")
        if comp:
            lines.append(
                f"  torch.compile: {comp['error']}"
                if "error" in comp
                else f"  torch.compile: AR {comp['ar_speedup_over_eager']:.2f}x eager -> "
                f"{'keep (flag compile_forward)' if comp['keep'] else 'off (does not help)'}"
            )
        if "cuda_graphs" in shape:
            lines.append(graph_probe.summary(shape["cuda_graphs"]))
        lines.append(graphed_summary(shape.get("graphs")))
        if gpu:
            first = next(iter(shape["cost_curve"].values()))
            t64 = ratio(first, 64)
            ok_t64 = t64 is not None and t64 <= TARGET_T64
            ok_ar = ar["engine:ar_over_generate"]["median"] >= TARGET_AR_OVER_GENERATE
            graphed = ar.get("engine:ar+graphs_over_generate")
            with_graphs = (
                f" (with CUDA graphs {graphed['median']:.2f}x: "
                f"{'met' if graphed['median'] >= TARGET_AR_OVER_GENERATE else 'NOT met'})"
                if graphed
                else ""
            )
            over_floor = max((floor or {}).get("t1_over_floor", {}).values(), default=float("inf"))
            lines.append(
                f"  targets: t(1) <= {TARGET_FLOOR}x floor: {'met' if over_floor <= TARGET_FLOOR else 'NOT met'}; "
                f"t(64)/t(1) <= {TARGET_T64}: {'met' if ok_t64 else 'NOT met'}; "
                f"engine AR >= {TARGET_AR_OVER_GENERATE}x generate: {'met' if ok_ar else 'NOT met'}"
                + with_graphs
            )
    if st.get("sidebyside"):
        lines += side_by_side_lines(st["sidebyside"])
    for name, proj in ((st.get("projection") or {}).get("shapes") or {}).items():
        by_method: dict[str, list[float]] = {}
        for r in proj["table"]:
            by_method.setdefault(r["method"], []).append(r["projected_speedup"])
        lines.append(
            f"projected speed-up over AR at the {name} shape (from SmolLM2's acceptance; mean over benchmarks): "
            + ", ".join(f"{m} {sum(v) / len(v):.2f}x" for m, v in sorted(by_method.items()) if m != "ar")
        )
    for path in (st.get("figures") or {}).get("written", []):
        lines.append(f"wrote {path}")
    return lines


def graphed_summary(graphs: dict[str, Any] | None) -> str:
    """One line on the engine with CUDA graphs (`time_graphed`)."""
    if not graphs or "error" in graphs:
        return f"  engine with CUDA graphs: not timed: {(graphs or {}).get('error', 'not in this record')}"
    curves = "; ".join(
        f"KV {kv}: t(1) {c['seconds'][0] * 1e3:.1f} ms, "
        + ", ".join(f"t({n})/t(1) {ratio(c, n):.2f}" for n in (16, 64, 128) if ratio(c, n))
        for kv, c in graphs["cost_curve"].items()
    )
    speedup = graphs.get("ar_speedup_over_eager")
    if not graphs["graphs"]:
        return f"  engine with CUDA graphs: not timed: {graphs['why_no_graphs']} ({curves})"
    verdict = "keep (flag cuda_graphs)" if graphs.get("keep") else "off (does not help)"
    race = f"AR {speedup:.2f}x eager -> {verdict}; " if speedup is not None else ""
    return f"  engine with CUDA graphs ({graphs['captures']} captures): {race}{curves}"


def side_by_side_lines(side: dict[str, Any]) -> list[str]:
    """The sidebyside stage: per dtype its run's summary (tokens/s over engine AR, identity to AR)."""
    graphs = ", CUDA graphs" if side.get("cuda_graphs") else ""
    lines = [
        f"side by side, {side['model']} (real weights{graphs}), {side['limit']} prompts each of "
        f"{', '.join(side['benches'])}, {side['max_new_tokens']} tokens, {side['repeats']} interleaved repeats:"
    ]
    for dtype in (d for d in side if isinstance(side[d], dict)):
        r = side[dtype]
        if r.get("returncode"):
            lines.append(
                f"  {dtype}: the bench exited with {r['returncode']} ({r.get('rows', 0)} rows written)"
            )
        lines += [f"  {dtype}: {line}" for line in r.get("summary", []) if line.strip()]
    return lines


def failures(record: dict[str, Any]) -> list[str]:
    """What makes the check fail: a failed device test, an fp32 output that differs from AR's (lossless or
    side by side), a half-precision divergence that is not a near-tie, a prompt that failed."""
    st = record["stages"]
    bad = [f"device test {t}" for t in st.get("tests", {}).get("failed_tests", [])]
    for dtype, r in st.get("lossless", {}).items():
        tot = r.get("totals") if isinstance(r, dict) else None
        if not tot:
            continue
        if dtype.startswith("float32") and tot["identical"] < tot["prompts"]:
            bad.append(f"{dtype}: {tot['prompts'] - tot['identical']} output(s) differ from AR")
        if tot["real"] or tot["failed"]:
            bad.append(f"{dtype}: {tot['real']} real mismatch(es), {tot['failed']} failed prompt(s)")
        cross = r.get("ar_identical_to_eager")
        if cross and cross["identical"] < cross["prompts"]:
            bad.append(
                f"{dtype}: AR through CUDA graphs differs from eager AR on "
                f"{cross['prompts'] - cross['identical']} prompt(s)"
            )
    for dtype, r in st.get("sidebyside", {}).items():
        same = r.get("identical_to_engine_ar") if isinstance(r, dict) else None
        if dtype.startswith("float32") and same:
            bad += [
                f"sidebyside {dtype}: {name} {e['prompts'] - e['identical']} output(s) differ from AR"
                for name, e in same.items()
                if e["identical"] < e["prompts"]
            ]
    return bad
