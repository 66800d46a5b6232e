"""The figures stage of `make gpu-check`, drawn from the record beside it on the host that ran it (the
record, its figure and its tables travel back together): <out>/cost_curve.png (t(n)/t(1) per shape and KV
length), <out>/gpu_summary.md (the timing tables) and <out>/projection.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.gpu.projection import markdown
from experiments.gpu.record import ratio


def stage_figures(record: dict[str, Any], out: Path) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    timing = record["stages"].get("timing") or {}
    if timing:
        fig, axes = plt.subplots(1, len(timing), figsize=(4.2 * len(timing), 3.5), squeeze=False)
        for ax, (name, shape) in zip(axes[0], timing.items(), strict=True):
            for kv, curve in shape["cost_curve"].items():
                ax.plot(curve["sizes"], curve["relative"], marker="o", ms=3, label=f"KV {kv}")
            for kv, curve in (shape.get("compile", {}).get("cost_curve") or {}).items():
                ax.plot(curve["sizes"], curve["relative"], ls="--", label=f"KV {kv}, compiled")
            for kv, curve in (shape.get("graphs", {}).get("cost_curve") or {}).items():
                ax.plot(curve["sizes"], curve["relative"], ls=":", label=f"KV {kv}, CUDA graphs")
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("tree size n (nodes)")
            ax.set_ylabel("t(n) / t(1)")
            ax.set_title(f"{name} ({shape['dtype']}, random weights)", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        device = record["environment"]["hardware"]["gpu"] or "CPU (no GPU found: toy shapes)"
        fig.suptitle(f"Verification cost curve on {device}", fontsize=10)
        fig.tight_layout()
        path = out / "cost_curve.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        written.append(str(path))
    if timing:
        path = out / "gpu_summary.md"
        path.write_text(timing_table(record))
        written.append(str(path))
    projection = record["stages"].get("projection", {}).get("shapes") or {}
    if projection:
        text = "\n".join(markdown(p["table"], p["caption"]) for p in projection.values())
        path = out / "projection.md"
        path.write_text(text)
        written.append(str(path))
    return {"written": written}


def timing_table(record: dict[str, Any]) -> str:
    """The timing stage as markdown: per shape and KV length, t(1) against its bandwidth floor and
    the cost-curve ratios, eager and with CUDA graphs; then AR tokens/s against `generate`."""
    env = record["environment"]
    head = (
        f"Measured by `make gpu-check` on {env['hardware']['gpu'] or 'a CPU (toy shapes)'} (torch "
        f"{env['versions']['torch']}, transformers {env['versions']['transformers']}), random weights "
        "of each shape in its dtype: timing only, no acceptance.\n\n"
        "| shape | KV | floor (ms) | engine | t(1) (ms) | t(1) / floor | t(16)/t(1) | t(64)/t(1) | t(128)/t(1) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines, race = [], []
    for name, shape in record["stages"]["timing"].items():
        floor = shape.get("bandwidth_floor", {}).get("seconds", {})
        engines = [("eager", shape["cost_curve"])]
        if (shape.get("graphs") or {}).get("cost_curve"):
            engines.append(("CUDA graphs", shape["graphs"]["cost_curve"]))
        for kv in shape["cost_curve"]:
            for label, curves in engines:
                c = curves[kv]
                t1 = c["seconds"][0]
                ratios = " | ".join(f"{ratio(c, n):.2f}" if ratio(c, n) else "-" for n in (16, 64, 128))
                over = f"{t1 / floor[kv]:.2f}" if kv in floor else "-"
                low = f"{1e3 * floor[kv]:.2f}" if kv in floor else "-"
                lines.append(f"| {name} | {kv} | {low} | {label} | {1e3 * t1:.2f} | {over} | {ratios} |")
        ar = shape["ar_vs_generate"]
        tps = ar["tokens_per_s"]
        race.append(
            f"| {name} | "
            + " | ".join(
                f"{tps[k]['median']:.1f} [{tps[k]['min']:.1f}, {tps[k]['max']:.1f}]" if k in tps else "-"
                for k in ("engine:ar", "engine:ar+graphs", "hf:generate")
            )
            + f" | {ar['engine:ar_over_generate']['median']:.2f} | "
            + (
                f"{ar['engine:ar+graphs_over_generate']['median']:.2f} |"
                if "engine:ar+graphs_over_generate" in ar
                else "- |"
            )
        )
    first = next(iter(record["stages"]["timing"].values()))["ar_vs_generate"]
    tail = (
        f"\n\nAR, {first['prompt_tokens']}-token random prompt, {first['new_tokens']} new tokens, "
        f"median [min, max] of {first['rounds']} interleaved rounds (tokens/s, prefill included):\n\n"
        "| shape | engine AR | engine AR, CUDA graphs | transformers generate | engine / generate "
        "| graphs / generate |\n|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(lines) + tail + "\n".join(race) + "\n"
