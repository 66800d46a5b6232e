"""Names the paper fixes, shared by the harness that runs its benchmarks and the analysis that orders
its figures: kept here, torch-free, so that analysis/ need not import the harness."""

from __future__ import annotations

# The paper's five benchmarks, in its order: the one list every script, preset and figure uses.
PAPER_BENCHMARKS: tuple[str, ...] = ("humaneval", "mbpp", "classeval", "gsm8k", "mtbench")
