"""Measured verification cost curves as records hold them: t(n, kv), the seconds of one verification step of
n nodes after kv cached tokens (`make gpu-check`'s timing stage, a row's `budget_latency`), and the seconds
of a prefill of L tokens; piecewise linear between the measured points. Torch-free: the GPU check's
projection, the GPU-cost replay and analysis/ read the same curves through it."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _interp(xs: Sequence[float], ys: Sequence[float], x: float, extrapolate: bool) -> float:
    """Piecewise-linear y(x) through the points (xs ascending); beyond the last point the last
    segment is extended when `extrapolate`, else (and always below the first point) clamped."""
    if len(xs) == 1 or x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        if not extrapolate:
            return float(ys[-1])
        x0, x1, y0, y1 = xs[-2], xs[-1], ys[-2], ys[-1]
        return float(y1 + (y1 - y0) * (x - x1) / (x1 - x0))
    i = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return float(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


@dataclass(frozen=True)
class CostCurve:
    """t(n, kv): seconds of one verification step of n nodes after kv cached tokens, measured at a
    few KV lengths (`seconds[kv][i]` for `sizes[i]`)."""

    sizes: list[int]
    seconds: dict[int, list[float]]

    def __post_init__(self) -> None:
        if not self.seconds:
            raise ValueError("a cost curve needs at least one KV length")
        for kv, row in self.seconds.items():
            if len(row) != len(self.sizes):
                raise ValueError(f"KV length {kv}: {len(row)} timings for {len(self.sizes)} sizes")

    @property
    def kv_lens(self) -> list[int]:
        return sorted(self.seconds)

    def t(self, n: int, kv: float) -> float:
        """Linear in n (extended beyond the largest measured n), linear in kv between the measured
        KV lengths and clamped outside them."""
        kvs = self.kv_lens
        per_kv = [_interp(self.sizes, self.seconds[k], n, extrapolate=True) for k in kvs]
        return _interp(kvs, per_kv, kv, extrapolate=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostCurve:
        """{"sizes": [...], "seconds": {"512": [...], ...}} (JSON keys are strings)."""
        return cls(list(data["sizes"]), {int(k): list(v) for k, v in data["seconds"].items()})


@dataclass(frozen=True)
class PrefillCurve:
    """Seconds of a prefill of L prompt tokens, measured at a few lengths."""

    lengths: list[int]
    seconds: list[float]

    def t(self, length: int) -> float:
        return _interp(self.lengths, self.seconds, length, extrapolate=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrefillCurve:
        return cls(list(data["lengths"]), list(data["seconds"]))
