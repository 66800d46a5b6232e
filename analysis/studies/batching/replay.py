"""A replay of continuous batching (issue 58, item 6): each request's recorded steps (nodes verified,
tokens committed, its own draft + update time; `make batching` with --traces, concurrency 1) replayed in a
closed loop at concurrency c on a cost surface t(k, n_max) (the batched forward's seconds for k requests
padded to n_max nodes). Outputs and steps do not depend on the batch (each request's drafter is its own), so
a request's steps at concurrency c are its steps at 1; what batching changes is the forward each step waits
for. A step of k requests costs t(k, n_max) plus every request's own draft + update (they run one after
another on the host); a joining request's prefill costs its recorded seconds.

Validated against the measured runs (predicted against measured tokens/s per method and concurrency, the
error stated), then projected onto another surface: a GPU's batch-1 curve t(n) with t(k, n) = t(k · n) (the
matrix products of a batched forward are those of one forward over its rows; attention is ignored), the
host's draft time kept as measured here. Labelled a projection wherever it appears.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Surface = Callable[[int, int], float]


@dataclass(frozen=True)
class Trace:
    """One request's recording: prefill seconds and per step (nodes, tokens, host ms)."""

    prefill_s: float
    steps: tuple[tuple[int, int, float], ...]
    prompt_tokens: int = 0

    @property
    def tokens(self) -> int:
        return 1 + sum(t for _, t, _ in self.steps)


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise-linear y(x) through the points, extended linearly past both ends."""
    if len(xs) == 1:
        return ys[0]
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def grid_surface(nodes: Sequence[int], seconds: dict[int, Sequence[float]]) -> Surface:
    """t(k, n) from a measured grid: linear in n for each measured k, then linear in k."""
    ks = sorted(seconds)

    def t(k: int, n: int) -> float:
        per_k = [interpolate(nodes, seconds[kk], n) for kk in ks]
        return max(interpolate(ks, per_k, k), 0.0)

    return t


def rows_surface(sizes: Sequence[int], seconds: Sequence[float]) -> Surface:
    """t(k, n) = t1(k · n) from a batch-1 curve t1 (a projection: attention ignored)."""

    def t(k: int, n: int) -> float:
        return interpolate(sizes, seconds, k * n)

    return t


def replay(
    traces: Sequence[Trace],
    concurrency: int,
    surface: Surface,
    prefill: Callable[[Trace], float] | None = None,
) -> float:
    """Output tokens per second of the closed loop serving `traces` in order, `concurrency` at a time;
    `prefill(trace)`: a joining request's prefill seconds (None: as recorded)."""
    pending = list(range(len(traces)))[::-1]
    active: list[list[int]] = []  # [request, next step]
    clock, tokens = 0.0, 0
    while pending or active:
        while pending and len(active) < concurrency:
            i = pending.pop()
            clock += traces[i].prefill_s if prefill is None else prefill(traces[i])
            tokens += 1
            active.append([i, 0])
        active = [a for a in active if a[1] < len(traces[a[0]].steps)]
        if not active:
            continue
        steps = [traces[i].steps[s] for i, s in active]
        clock += surface(len(steps), max(n for n, _, _ in steps)) + sum(ms for _, _, ms in steps) / 1e3
        tokens += sum(t for _, t, _ in steps)
        for a in active:
            a[1] += 1
        active = [a for a in active if a[1] < len(traces[a[0]].steps)]
    return tokens / clock if clock else 0.0


def traces_of(row: dict) -> list[Trace]:
    return [
        Trace(
            float(t["prefill_s"]),
            tuple((int(n), int(k), float(ms)) for n, k, ms in t["steps"]),
            int(t.get("prompt_tokens", 0)),
        )
        for t in row.get("traces") or []
    ]
