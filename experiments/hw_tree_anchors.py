"""Where hw_tree and OPT-Tree part, anchor by anchor: both at budget=auto on one saved latency curve, greedy,
on the same prompts. A projection of which nodes each verifies, not a timing.

    python -m experiments.hw_tree_anchors --benches humaneval --limit 20 \
        --latency results/studies/selector/smollm2-135m-float32-budget_latency.json --out results/studies/hw_tree/hw_tree_anchors

At T = 0 both write AR's output, so the anchors (output positions a step drafts from) of the two runs
can be matched. At every anchor both drafted from, each tree's committed tokens are read off the output
(`gpu_cost_replay.path_labels`); where OPT-Tree commits more, the first node of its accepted path that
hw_tree did not verify is classified: absent from hw_tree's candidate pool (under a pool node that was
opened: its adjacency row lacked the token, or no source proposed it), or in the pool but not among the
b* verified. Over every step of each run: τ, mean verified tree and
Σ committed · t(1) / Σ t(tree) on the curve (the forward's share of the speed-up; drafting left out), and
the context-derived and adjacency-only nodes verified and accepted a step, the share of steps whose anchor
has a row in the drafter's adjacency table (else it has no adjacency children) and the mean rows in the
table (tokens with a row, as a step starts). `--hw-tree-set FIELD=VALUE` changes hw_tree's config.
Writes <out>/anchors.json and <out>/anchors.md.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from experiments.gpu_cost_replay import add_hw_tree_set, committed_at, path_labels, replay_fixed
from goose.engine.core.tree import SPINE

BASELINE = "opt_tree"
KINDS = ("context_verified", "context_accepted", "adjacency_verified", "adjacency_accepted")


def first_missed(
    output: Sequence[int],
    anchor_at: int,
    depth_reached: int,
    kids: Sequence[dict[int, int]],
    verified: set[int],
) -> tuple[int, int | None]:
    """Walk the output from the anchor down hw_tree's pool (`kids[node]`: token -> child) for `depth_reached`
    tokens: (the depth of the first output token hw_tree did not verify, its pool node or None if absent)."""
    node = 0
    for depth in range(1, depth_reached + 1):
        child = kids[node].get(output[anchor_at + depth])
        if child is None or child not in verified:
            return depth, child
        node = child
    return depth_reached + 1, None


class AnchorRecorder:
    """A step callback: `at[anchor's place in the output]` = keep(verified tree) for every step, and per
    kind of drafted node (context-derived SPINE, adjacency-only BRANCH) the verified and accepted ones."""

    def __init__(self, keep: Callable[[Any], Any]) -> None:
        self.keep, self.at, self.anchor = keep, {}, 0
        self.kinds: Counter = Counter()

    def __call__(self, tree: Any, outcome: Any, rec: Any) -> None:
        self.at[self.anchor] = self.keep(tree)
        self.anchor += rec.new_tokens
        accepted = set(outcome.accepted_nodes)
        for i, source in enumerate(tree.sources[1:], start=1):
            kind = "context" if source == SPINE else "adjacency"
            self.kinds[f"{kind}_verified"] += 1
            self.kinds[f"{kind}_accepted"] += int(i in accepted)


class RowProbe:
    """Wraps an adjacency drafter's `propose`: before each proposal, whether a row is there for the anchor
    (so the anchor can have adjacency children at all; for hw_tree this prompt's row, else the run's), whether
    that row is the run's, and how many tokens have a row in this prompt's table."""

    def __init__(self, drafter: Any) -> None:
        from baselines.shared.adjacency_drafter import prev_of_anchor

        self.counts: Counter = Counter()
        inner = drafter.propose

        def propose(committed: list[int]) -> Any:
            if drafter.table is not None:
                anchor, prev = committed[-1], prev_of_anchor(committed)
                row = getattr(drafter, "adjacency_row", None)
                ids = row(anchor, prev)[0] if row else drafter.successors(anchor, prev)[0]
                self.counts["probed"] += 1
                self.counts["anchor_row"] += int(bool(ids))
                self.counts["anchor_run_row"] += int(bool(ids) and not drafter.table.has_row(anchor))
                self.counts["rows"] += drafter.table.num_rows
            return inner(committed)

        drafter.propose = propose


def cause(depth: int, child: int | None) -> str:
    """The key an anchor where OPT-Tree committed more is counted under: why hw_tree missed, and where."""
    why = "absent from the pool" if child is None else "in the pool, not verified"
    return f"{why}|{min(depth, 4)}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from baselines.hw_tree import HwTreeDrafter
    from experiments.bench.load import load_prompts, method_factory, model_and_engine
    from goose.engine.budget.cost_model import LatencyTable
    from goose.engine.core.decode import generate
    from goose.harness.job import auto_budget

    torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    t = LatencyTable.load(args.latency)
    prompts = load_prompts(
        loaded.tokenizer, args.model, args.benches.split(","), args.limit, args.data_dir, "auto"
    )
    make_opt, _ = auto_budget(method_factory(BASELINE, model=args.model), engine, args.latency)
    hw_set = [f"method.drafter.{o}" for o in args.hw_tree_set]
    make_hw, _ = auto_budget(method_factory("hw_tree", hw_set, model=args.model), engine, args.latency)
    opt, hw = make_opt(), make_hw()  # one of each across prompts, as in a run
    hw_inner = hw.drafter
    assert isinstance(hw_inner, HwTreeDrafter)
    probes = {"opt_tree_auto": RowProbe(opt.drafter), "hw_tree_auto": RowProbe(hw_inner)}

    def hw_step(tree: Any) -> tuple[Any, list[dict[int, int]], list[int]]:
        pool, sel = hw_inner.last_pool, hw_inner.last_selection  # a fresh pool per step
        return tree, pool.kids, list(sel.order[: len(tree)])

    def tree_committed(output: list[int], anchor: int, tree: Any) -> int:
        return committed_at(path_labels(output, anchor, tree.tokens, tree.parents), tree.parents, len(tree))

    kinds = {m: Counter() for m in ("hw_tree_auto", "opt_tree_auto")}
    steps: dict[str, list[tuple[int, int]]] = {m: [] for m in kinds}  # (tree size, tokens committed)
    shared = Counter()
    missed = Counter()
    for p in prompts:
        opt_steps, hw_steps = AnchorRecorder(lambda tree: tree), AnchorRecorder(hw_step)
        runs = {
            "opt_tree_auto": generate(
                engine, opt.drafter, p.ids, args.max_new_tokens, on_step=opt_steps, sizer=opt.sizer
            ),
            "hw_tree_auto": generate(
                engine, hw_inner, p.ids, args.max_new_tokens, on_step=hw_steps, sizer=hw.sizer
            ),
        }
        output = list(runs["hw_tree_auto"].output_ids)
        if list(runs["opt_tree_auto"].output_ids) != output:
            raise SystemExit(
                f"{p.bench} {p.prompt_id}: the two outputs differ; the anchors cannot be matched"
            )
        kinds["opt_tree_auto"].update(opt_steps.kinds)
        kinds["hw_tree_auto"].update(hw_steps.kinds)
        for method, gen in runs.items():
            steps[method] += [(s.tree_size, s.new_tokens) for s in gen.steps]
        for anchor, otree in opt_steps.at.items():
            if anchor not in hw_steps.at:
                continue
            htree, kids, order = hw_steps.at[anchor]
            o, h = tree_committed(output, anchor, otree), tree_committed(output, anchor, htree)
            shared["anchors"] += 1
            shared["opt_committed"] += o
            shared["hw_committed"] += h
            shared["opt_nodes"] += len(otree)
            shared["hw_nodes"] += len(htree)
            if o > h:
                shared["opt_more"] += 1
                missed[cause(*first_missed(output, anchor, o - 1, kids, set(order)))] += 1
            elif h > o:
                shared["hw_more"] += 1
        print(f"compared {p.bench} {p.prompt_id}")
    summary = {}
    for m, c in kinds.items():
        res = replay_fixed(steps[m], t)  # τ, mean tree and Σ committed · t(1) / Σ t(tree) on the curve
        probed = max(probes[m].counts["probed"], 1)
        summary[m] = {
            "steps": res["steps"],
            "tau": res["tau"],
            "tree": res["tree"],
            "forward_speedup": res["speedup"],
            **{k: c[k] / res["steps"] for k in KINDS},
            "anchor_row_share": probes[m].counts["anchor_row"] / probed,
            "anchor_run_row_share": probes[m].counts["anchor_run_row"] / probed,
            "table_rows": probes[m].counts["rows"] / probed,
        }
    return {
        "model": args.model,
        "dtype": str(engine.dtype).replace("torch.", ""),
        "benches": args.benches.split(","),
        "limit": args.limit,
        "max_new_tokens": args.max_new_tokens,
        "latency": {"sizes": list(t.sizes), "seconds": list(t.seconds)},
        "hw_tree_set": list(args.hw_tree_set),
        "runs": summary,
        "shared": dict(shared),
        "opt_more_by_cause": dict(sorted(missed.items())),
    }


def markdown(rec: dict[str, Any]) -> str:
    s = rec["shared"]
    n = max(s.get("anchors", 0), 1)
    lines = [
        "# hw_tree against OPT-Tree, anchor by anchor (budget=auto, one saved curve; not a timing)",
        "",
        f"`{rec['model']}` ({rec['dtype']}), {', '.join(rec['benches'])}, {rec['limit']} prompts each, "
        f"max_new_tokens {rec['max_new_tokens']}, greedy; curve t(n) in ms: "
        + ", ".join(
            f"{a}: {b * 1e3:.1f}"
            for a, b in zip(rec["latency"]["sizes"], rec["latency"]["seconds"], strict=True)
        ),
        "",
        *([f"hw_tree with {', '.join(rec['hw_tree_set'])}.", ""] if rec.get("hw_tree_set") else []),
        "| run | steps | τ | mean tree | Σ committed · t(1) / Σ t(tree) | context nodes a step (accepted) "
        "| adjacency-only nodes a step (accepted) | steps whose anchor has a table row (the run's) "
        "| rows in the table |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m, r in rec["runs"].items():
        lines.append(
            f"| {m} | {r['steps']} | {r['tau']:.3f} | {r['tree']:.2f} | {r['forward_speedup']:.3f} "
            f"| {r['context_verified']:.2f} ({r['context_accepted']:.2f}) "
            f"| {r['adjacency_verified']:.2f} ({r['adjacency_accepted']:.2f}) "
            f"| {r['anchor_row_share']:.1%} ({r.get('anchor_run_row_share', 0.0):.1%}) "
            f"| {r['table_rows']:.0f} |"
        )
    lines += [
        "",
        f"At the {s.get('anchors', 0)} anchors both drafted from: hw_tree commits "
        f"{s.get('hw_committed', 0) / n:.2f} tokens per step from {s.get('hw_nodes', 0) / n:.2f} nodes, "
        f"OPT-Tree {s.get('opt_committed', 0) / n:.2f} from {s.get('opt_nodes', 0) / n:.2f}; hw_tree commits "
        f"more at {s.get('hw_more', 0)}, OPT-Tree at {s.get('opt_more', 0)}.",
        "",
        "Where OPT-Tree commits more, the first token of its accepted path that hw_tree did not verify:",
        "",
        "| why | at depth | anchors |",
        "|---|---|---|",
    ]
    for key, count in rec["opt_more_by_cause"].items():
        why, depth = key.split("|")
        lines.append(f"| {why} | {depth if depth != '4' else '4+'} | {count} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--benches", default="humaneval")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--latency", required=True, help="a saved latency curve (bench's budget_latency.json)")
    add_hw_tree_set(ap)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="results/studies/hw_tree/hw_tree_anchors")
    args = ap.parse_args(argv)
    if not Path(args.latency).is_file():
        raise SystemExit(f"hw_tree_anchors: no latency curve at {args.latency}")
    rec = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "anchors.json").write_text(json.dumps(rec, indent=1) + "\n")
    text = markdown(rec)
    (out / "anchors.md").write_text(text)
    print(text)
    return rec


if __name__ == "__main__":
    main()
