"""Chat template on or off: per model × bench × method, how many outputs end within 3 tokens (an
instruct model answering a raw chat prompt often stops at once), τ and the speedup over AR of the
same prompt form, with the prompts in the tokenizer's chat template and raw.

Reads the cells that exist both ways (rows with `chat_template` true and false for the same model,
bench and method config, e.g. the `cpu_chat_template` preset); τ and speedup as everywhere (ratio
of sums; speedup over the AR rows of the same prompt form, on the prompts both completed).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.load import Results
from analysis.load import cells as cell_table
from analysis.names import METHOD_ORDER, bench_name, method_name, model_name, order_key
from analysis.report import Output, Skip, cli, fmt, write_table

DESCRIPTION = __doc__.splitlines()[0]
SHORT = 3  # an output of at most this many tokens "ends at once"


def build(res: Results, out: Path) -> Output:
    df = pd.concat([res.rows, res.chat_rows], ignore_index=True) if not res.chat_rows.empty else res.rows
    if df.empty or "chat_template" not in df or df["chat_template"].nunique() < 2:
        raise Skip("no cells run both with and without the chat template")
    cells = cell_table(df)
    both = cells.groupby(["model", "bench", "method", "config_hash"])["chat_template"].nunique()
    both = both[both == 2].reset_index()[["model", "bench", "method", "config_hash"]]
    if both.empty:
        raise Skip("no cell was run both with and without the chat template")
    keys = ["model", "bench", "method", "config_hash", "chat_template"]
    prompts = df.groupby(keys)["generated_tokens"]
    by_cell = cells.set_index(keys)
    rows = []
    for model, bench, method, h in both.itertuples(index=False):
        line = [model_name(model), bench_name(bench), method_name(method)]
        for chat in (False, True):
            key = (model, bench, method, h, chat)
            generated = prompts.get_group(key)
            cell = by_cell.loc[[key]].iloc[0]
            line += [
                f"{int((generated <= SHORT).sum())}/{len(generated)}",
                fmt(cell["tau"]),
                fmt(cell["speedup"]),
            ]
        rows.append(line)
    order = order_key([r[2] for r in rows], [method_name(m) for m in METHOD_ORDER])
    rows = sorted(rows, key=lambda r: (r[0], r[1], order.index(r[2])))
    header = [
        "Model",
        "Bench",
        "Method",
        f"raw: ≤{SHORT} tokens",
        "raw τ",
        "raw ×",
        f"chat: ≤{SHORT} tokens",
        "chat τ",
        "chat ×",
    ]
    files = write_table(
        out,
        "chat_template",
        header,
        rows,
        "Raw prompts vs the tokenizer's chat template",
        notes=[
            f"≤{SHORT} tokens: outputs that end (EOS) within {SHORT} tokens, of the prompts run.",
            "τ = Σ generated / Σ forward calls; × = tokens/s over AR's with the same prompt form.",
            res.scope(),
        ],
    )
    return Output(files)


if __name__ == "__main__":
    cli(build, DESCRIPTION)
