"""One verification budget for the whole batch (TETRIS, arXiv 2502.15197; ECHO, arXiv 2604.09603, in spirit):
a batched forward costs what its padded rows cost, so a node is worth verifying when it pays against
t(k · n_max), not against its own request's t(n). `batch_cap` picks the common cap c on every tree's size
that maximises Σ_b E_b[committed | min(n_b, c)] / t(k · c), each request's E from its own acceptance model
(goose.engine.budget.auto_budget.AutoBudget.expected_tokens) and t from the batch-1 cost curve at k · c
rows (the matrix products of a batched forward are those of one forward over all its rows).

Per-request budget=auto (the default policy, "per_request") sizes each tree alone at batch 1's t(n).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

POLICIES = ("per_request", "batch")


def batch_cap(expected: Sequence[np.ndarray], latency: Callable[[int], float]) -> int:
    """The cap c ∈ [1, max_b n_b] maximising Σ_b expected[b][min(n_b, c) − 1] / latency(k · c), with k =
    len(expected) requests and n_b = len(expected[b]); ties go to the smaller cap."""
    k = len(expected)
    largest = max(len(e) for e in expected)
    best, best_rate = 1, -1.0
    for c in range(1, largest + 1):
        tokens = sum(float(e[min(len(e), c) - 1]) for e in expected)
        rate = tokens / latency(k * c)
        if rate > best_rate * (1 + 1e-12):
            best, best_rate = c, rate
    return best
