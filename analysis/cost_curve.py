"""The cost curve: verification latency against tree size, per dtype, from the records that
`make cost-curve` (experiments/cost_curve.py) writes to results/cost_curve/<name>.json; one figure
per record (<name>.png / .pdf): latency in ms with the min-max band over repeats, and relative to
a one-token step.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import ScalarFormatter

from analysis.load import Results
from analysis.report import Output, Skip, cli, save_figure

DESCRIPTION = __doc__.splitlines()[0]


def title(record: dict) -> str:
    """Model, device, CPU, threads, KV length and repeats of a record, as the caption."""
    args = record.get("args", {})
    hw = record.get("environment", {}).get("hardware", {})
    device = hw.get("gpu") or "cpu"
    return (
        f"{args.get('model')} on {device} ({hw.get('cpu')}, {hw.get('torch_threads')} threads), "
        f"KV length {args.get('kv_len')}, {args.get('repeats')} repeats"
    )


def plot(record: dict, out: Path, name: str) -> list[Path]:
    """One record's latency tables, in ms and relative to n = 1."""
    tables = record["tables"]
    fig, (ax_ms, ax_rel) = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    for dtype, table in tables.items():
        sizes, seconds = table["sizes"], table["seconds"]
        ms = [s * 1e3 for s in seconds]
        (line,) = ax_ms.plot(sizes, ms, marker="o", label=dtype)
        if table.get("samples"):
            lo = [min(s) * 1e3 for s in table["samples"]]
            hi = [max(s) * 1e3 for s in table["samples"]]
            ax_ms.fill_between(sizes, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax_rel.plot(sizes, [s / seconds[0] for s in seconds], marker="o", label=dtype)
    for ax in (ax_ms, ax_rel):
        ax.set_xscale("log", base=2)
        ax.set_xticks([n for n in next(iter(tables.values()))["sizes"] if n & (n - 1) == 0])  # powers of 2
        ax.get_xaxis().set_major_formatter(ScalarFormatter())
        ax.set_xlabel("tree size n (nodes, anchor included)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    ax_ms.set_ylabel("verification step (ms), median; band = min-max")
    ax_rel.set_ylabel("latency / latency(n = 1)")
    ax_rel.axhline(1.0, color="grey", linewidth=0.8)
    fig.suptitle(title(record), fontsize=10)
    return save_figure(fig, out, name)


def build(res: Results, out: Path) -> Output:
    folder = res.records_dir() / "cost_curve"
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise Skip(f"no cost-curve record (make cost-curve) in {folder}")
    output = Output()
    for path in paths:
        output.files += plot(json.loads(path.read_text()), out, path.stem)
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
