"""Tree topologies drawn from real drafts: one panel per method (PLD chain, EAGLE-2-style pruned
tree, isotropic tree, Goose spine tree), nodes coloured by source (root, spine, branch), the
accepted path highlighted.

The trees are the rows' `sample_tree` (per prompt, the largest of the first 16 trees the drafter
proposed, with the nodes the verification accepted). Per method one representative is picked
over all rows of its reference config: the tree with the longest accepted path, ties to the tree
whose size is closest to the method's median tree size; for Goose, trees holding both spine and
branch nodes come first (the anisotropic shape the paper draws). Layout: depth on x; leaves spread
on y in depth-first order with spine children first, so a spine is a straight line on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from analysis.load import Results
from analysis.names import bench_name, method_name, model_name
from analysis.report import SOURCE_COLORS, SOURCE_NAMES, Output, Skip, cli, save_figure

DESCRIPTION = __doc__.splitlines()[0]
PANELS = [
    ("pld", "PLD chain"),
    ("eagle2", "EAGLE-2-style pruned tree"),
    ("iso", "isotropic tree"),
    ("goose", "Goose spine tree"),
]
ACCEPT_COLOR = "#d62728"


def tree_layout(parents: list[int], sources: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) per node: x = depth, y = leaf slot (depth-first, spine child first); an inner node
    sits level with its spine child when it has one, else midway between its first and last
    child."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(parents):
        if p is not None and p >= 0:
            children[p].append(i)
    for ch in children:
        ch.sort(key=lambda c: (sources[c] != 1, c))
    x = np.zeros(n)
    y = np.zeros(n)
    slot = 0
    roots = [i for i, p in enumerate(parents) if p is None or p < 0]
    for root in roots:
        stack: list[tuple[int, int, bool]] = [(root, 0, False)]
        while stack:  # iterative post-order (a 100-node spine would be deep recursion)
            node, depth, done = stack.pop()
            if done:
                ch = children[node]
                if not ch:
                    y[node] = slot
                    slot += 1
                elif sources[ch[0]] == 1:
                    y[node] = y[ch[0]]
                else:
                    y[node] = (y[ch[0]] + y[ch[-1]]) / 2
                continue
            x[node] = depth
            stack.append((node, depth, True))
            for c in reversed(children[node]):
                stack.append((c, depth + 1, False))
    return x, y


def _accepted_len(tree: dict[str, Any]) -> int:
    return max(0, len(tree.get("accepted") or []) - 1)


def pick_tree(rows: list[dict[str, Any]], prefer_spine: bool = False) -> dict[str, Any] | None:
    """The representative row (see the module docstring) among rows with a ≥2-node sample tree."""
    cands = [
        r
        for r in rows
        if isinstance(r.get("sample_tree"), dict) and len(r["sample_tree"].get("tokens") or []) >= 2
    ]
    if not cands:
        return None
    median = float(np.median([len(r["sample_tree"]["tokens"]) for r in cands]))

    def score(r: dict[str, Any]) -> tuple:
        t = r["sample_tree"]
        anisotropic = prefer_spine and 1 in t["sources"] and 2 in t["sources"]
        # A Goose tree that shows both parts (a spine of a plain match, <= 20 tokens, and at
        # least 10 branch nodes) is more telling than a 90-token extended chain.
        spine, branch = t["sources"].count(1), t["sources"].count(2)
        shows_both = anisotropic and spine <= 20 and branch >= 10
        return (anisotropic, shows_both, _accepted_len(t), -abs(len(t["tokens"]) - median))

    return max(cands, key=score)


def draw_tree(ax: plt.Axes, tree: dict[str, Any]) -> None:
    parents, sources = list(tree["parents"]), list(tree["sources"])
    x, y = tree_layout(parents, sources)
    accepted = set(tree.get("accepted") or [])
    n = len(parents)
    size = 36 if n <= 20 else 18 if n <= 60 else 10
    for i, p in enumerate(parents):
        if p is not None and p >= 0:
            on_path = i in accepted and p in accepted
            ax.plot(
                [x[p], x[i]],
                [y[p], y[i]],
                color=ACCEPT_COLOR if on_path else "#b0b0b0",
                lw=2.4 if on_path else 0.7,
                zorder=1 + on_path,
                solid_capstyle="round",
            )
    colors = [SOURCE_COLORS.get(s, "#7f7f7f") for s in sources]
    edge = [ACCEPT_COLOR if i in accepted else "white" for i in range(n)]
    ax.scatter(
        x,
        y,
        s=size,
        c=colors,
        edgecolors=edge,
        linewidths=[1.4 if i in accepted else 0.4 for i in range(n)],
        zorder=3,
    )
    ax.invert_yaxis()
    span = max(1.0, float(y.max() - y.min()))
    ax.set_ylim(y.max() + 0.05 * span + 0.5, y.min() - 0.05 * span - 0.5)
    ax.set_xlim(-0.5, x.max() + 0.5)
    ax.set_yticks([])
    ax.set_xlabel("depth below the anchor (tokens)")
    ax.spines[["left"]].set_visible(False)
    ax.xaxis.get_major_locator().set_params(integer=True)


def build(res: Results, out: Path) -> Output:
    df = res.reference()
    if df.empty or "sample_tree" not in df.columns:
        raise Skip("no rows with sample trees")
    output = Output()
    chosen = []
    for key, title in PANELS:
        methods = ["iso3", "iso5"] if key == "iso" else [key]
        row = None
        for m in methods:
            row = pick_tree(df[df["method"] == m].to_dict("records"), prefer_spine=(key == "goose"))
            if row is not None:
                break
        if row is None:
            output.notes.append(f"topology: no {title} in the results (panel left out)")
            continue
        if key == "goose" and 1 not in row["sample_tree"]["sources"]:
            output.notes.append(
                "topology: no Goose sample tree has a spine; the panel shows a pure branch tree"
            )
        chosen.append((title, row))
    if not chosen:
        raise Skip("no sample trees of PLD, EAGLE-2, isotropic or Goose rows")
    ncols = 2 if len(chosen) > 1 else 1
    nrows = (len(chosen) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(chosen) :]:
        ax.set_axis_off()
    for ax, (title, row) in zip(axes.flat, chosen, strict=False):
        t = row["sample_tree"]
        draw_tree(ax, t)
        counts = {s: t["sources"].count(s) for s in (1, 2)}
        ax.set_title(
            f"{title} ({method_name(row['method'])}): {len(t['tokens'])} nodes "
            f"({counts[1]} spine, {counts[2]} branch), {_accepted_len(t)} accepted\n"
            f"{model_name(row['model'])} · {bench_name(row['bench'])} · {row['prompt_id']}",
            fontsize=9,
        )
    handles = [
        Line2D([], [], marker="o", ls="", color=SOURCE_COLORS[s], label=SOURCE_NAMES[s]) for s in (0, 1, 2)
    ]
    handles.append(Line2D([], [], color=ACCEPT_COLOR, lw=2.4, label="accepted path"))
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, bbox_to_anchor=(0.5, -0.01))
    fig.suptitle("Draft tree topologies from real runs (one recorded tree per method)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    output.files += save_figure(fig, out, "topology")
    return output


if __name__ == "__main__":
    cli(build, DESCRIPTION)
