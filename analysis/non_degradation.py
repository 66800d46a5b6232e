"""Non-degradation, like for like: τ(Goose) against max(τ(PLD), τ(TR)) when Goose and TR draw on
the same sources (docs/paper.md, "Non-degradation": Goose's tree contains PLD's chain and TR-like branches).

In the main grid TR keeps its adjacency table across the prompts of a run (the TR paper) while
Goose starts every prompt with an empty one (the Goose paper), so TR may see more. Two fair
comparisons, per model × bench, on the prompts every listed cell completed:
- per-prompt tables: Goose vs max(PLD, TR with a per-prompt table, `tr_per_prompt`);
- run-long tables:   Goose with a run-long table (`goose_persistent`) vs max(PLD, TR).
The main grid's mixed comparison (Goose per prompt vs TR run-long) is shown beside them.
"""

from __future__ import annotations

from pathlib import Path

from analysis.load import Results, cells, common_prompts
from analysis.names import BENCH_ORDER, MODEL_NAMES, bench_name, model_name, order_key
from analysis.report import Output, Skip, cli, fmt, write_table

DESCRIPTION = __doc__.splitlines()[0]
NEEDED = ["pld", "tr", "tr_per_prompt", "goose", "goose_persistent"]


def _margin(goose: float, best: float) -> str:
    return f"{fmt(goose)} vs {fmt(best)} ({100 * (goose / best - 1):+.1f}%)" if best == best else "—"


def build(res: Results, out: Path) -> Output:
    df = res.reference(NEEDED)
    df = df[df["method"].isin(NEEDED)]
    if df.empty or not {"tr_per_prompt", "goose_persistent"} <= set(df["method"]):
        raise Skip("no tr_per_prompt / goose_persistent rows (run +experiment=cpu_like_for_like)")
    rows, holds = [], {"per-prompt": 0, "run-long": 0, "mixed": 0}
    n_settings = 0
    for model in order_key(df["model"], list(MODEL_NAMES)):
        for bench in order_key(df[df["model"] == model]["bench"], BENCH_ORDER):
            sel = df[(df["model"] == model) & (df["bench"] == bench)]
            if set(sel["method"]) != set(NEEDED):
                continue
            c = cells(common_prompts(sel)).set_index("method")["tau"]
            n = common_prompts(sel)["prompt_id"].nunique()
            per_prompt = (c["goose"], max(c["pld"], c["tr_per_prompt"]))
            run_long = (c["goose_persistent"], max(c["pld"], c["tr"]))
            mixed = (c["goose"], max(c["pld"], c["tr"]))
            for name, (g, best) in (("per-prompt", per_prompt), ("run-long", run_long), ("mixed", mixed)):
                holds[name] += int(g >= best)
            n_settings += 1
            rows.append(
                [
                    model_name(model),
                    bench_name(bench),
                    n,
                    fmt(c["pld"]),
                    fmt(c["tr_per_prompt"]),
                    fmt(c["tr"]),
                    fmt(c["goose"]),
                    fmt(c["goose_persistent"]),
                    _margin(*per_prompt),
                    _margin(*run_long),
                    _margin(*mixed),
                ]
            )
    if not rows:
        raise Skip("no model × bench has all of pld, tr, tr_per_prompt, goose, goose_persistent")
    header = [
        "Model",
        "Bench",
        "n",
        "PLD τ",
        "TR per-prompt τ",
        "TR run-long τ",
        "Goose τ",
        "Goose run-long τ",
        "per-prompt: Goose vs max(PLD, TR)",
        "run-long: Goose vs max(PLD, TR)",
        "main grid (mixed)",
    ]
    files = write_table(
        out,
        "non_degradation",
        header,
        rows,
        "Non-degradation like for like: τ(Goose) vs max(τ(PLD), τ(TR)) with the same table lifetime",
        notes=[
            f"τ(Goose) ≥ max(τ(PLD), τ(TR)) holds in {holds['per-prompt']}/{n_settings} settings with "
            f"per-prompt tables, {holds['run-long']}/{n_settings} with run-long tables, "
            f"{holds['mixed']}/{n_settings} in the main grid's mixed comparison.",
            "n = prompts every listed cell completed; τ = Σ generated / Σ forward calls.",
            res.scope(),
        ],
    )
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
