"""The verification latency table t(n) (and t(n, kv)): what budget=auto and the hardware-aware size rules
read to price a tree of n nodes (Sequoia, arXiv 2402.12374, §3.3).

`LatencyTable` holds a step's median seconds at measured sizes and interpolates piecewise linearly between
them (the medians are not forced non-decreasing: on a CPU a step of a few rows can cost less than one of
fewer, since matmul kernels work in tiles of rows, and a size rule that maximises E[committed | b] / t(b)
never picks a size a larger and cheaper one dominates). Each node attends over the whole cache, so a table
calibrated at more KV lengths gives t(n, kv), linear in kv between them and extended past the largest
(`curves`, `at_kv`). Measured by `goose.engine.budget.calibration`.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class LatencyTable:
    """Verification latency (seconds) against tree size n, root included: measured `sizes` (from 1), the
    median `seconds` at each (not necessarily non-decreasing), raw `samples` and `meta` (device, dtype,
    threads, kv_len, …).
    """

    sizes: list[int]
    seconds: list[float]
    samples: list[list[float]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    kv_len: int | None = None  # the KV length `seconds` was measured at (None: not recorded)
    kv_seconds: dict[int, list[float]] = field(default_factory=dict)  # the same sizes at other KV lengths

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.seconds):
            raise ValueError("sizes and seconds must be non-empty and of the same length")
        self.kv_seconds = {int(k): [float(x) for x in v] for k, v in self.kv_seconds.items()}
        if self.kv_seconds and self.kv_len is None:
            raise ValueError("a table with kv_seconds needs the kv_len of its seconds")
        for kv, row in self.kv_seconds.items():
            if len(row) != len(self.sizes) or kv == self.kv_len or kv < 1:
                raise ValueError(
                    f"kv_seconds[{kv}]: needs {len(self.sizes)} timings at a KV length >= 1 other than "
                    f"kv_len = {self.kv_len}"
                )
        if any(b <= a for a, b in zip(self.sizes, self.sizes[1:], strict=False)):
            raise ValueError(f"sizes must be strictly increasing, got {self.sizes}")
        if self.sizes[0] < 1:
            raise ValueError("tree sizes start at 1 (the anchor alone)")

    def __call__(self, n: float) -> float:
        """Latency of a tree of n nodes (piecewise-linear interpolation / extrapolation)."""
        xs, ys = self.sizes, self.seconds
        if n <= xs[0] or len(xs) == 1:
            return ys[0]
        i = min(bisect_right(xs, n), len(xs) - 1)  # segment [xs[i-1], xs[i]]
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (n - x0) / (x1 - x0)

    def curve(self, n_max: int) -> list[float]:
        return [self(n) for n in range(1, n_max + 1)]

    def curves(self, n_max: int) -> tuple[np.ndarray, np.ndarray]:
        """(KV lengths ascending, t(n) for n = 1..n_max at each): the rows `at_kv` interpolates; one row of
        `curve` when the table has no other KV length."""
        if not self.kv_seconds:
            return np.asarray([self.kv_len or 0], dtype=np.float64), np.asarray([self.curve(n_max)])
        tables = {
            self.kv_len: self,
            **{kv: LatencyTable(self.sizes, row) for kv, row in self.kv_seconds.items()},
        }
        kvs = sorted(tables)
        return np.asarray(kvs, dtype=np.float64), np.asarray([tables[kv].curve(n_max) for kv in kvs])

    def relative(self) -> list[float]:
        return [s / self.seconds[0] for s in self.seconds]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyTable:
        kv_len = d.get("kv_len", (d.get("meta") or {}).get("kv_len"))
        return cls(
            sizes=[int(x) for x in d["sizes"]],
            seconds=[float(x) for x in d["seconds"]],
            samples=[list(map(float, s)) for s in d.get("samples", [])],
            meta=dict(d.get("meta", {})),
            kv_len=None if kv_len is None else int(kv_len),
            kv_seconds={int(k): list(v) for k, v in (d.get("kv_seconds") or {}).items()},
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path, dtype: str | None = None) -> LatencyTable:
        """A table saved by `save`, a cached curve (goose.engine.budget.latency_cache; not checked against
        this machine: a profile is used as given), or the `dtype` entry of an experiments/cost_curve.py
        record."""
        data = json.loads(Path(path).read_text())
        if "fingerprint" in data and "table" in data:
            data = data["table"]
        if "tables" in data:
            tables = data["tables"]
            if dtype not in tables:
                raise ValueError(
                    f"{path} holds latency tables for {', '.join(tables)}, not for dtype {dtype!r}: "
                    f"run `make cost-curve` with that dtype or pick another profile"
                )
            data = tables[dtype]
        return cls.from_dict(data)


def at_kv(kvs: np.ndarray, rows: np.ndarray, kv: float) -> np.ndarray:
    """t(n) at cache length kv from `LatencyTable.curves`: linear in kv between the measured lengths,
    extended past the largest along the last two (attention grows linearly in kv), clamped below the
    smallest."""
    if kvs.shape[0] == 1 or kv <= kvs[0]:
        return rows[0]
    i = min(int(np.searchsorted(kvs, kv, side="right")), kvs.shape[0] - 1)
    w = (kv - kvs[i - 1]) / (kvs[i] - kvs[i - 1])
    return rows[i - 1] + w * (rows[i] - rows[i - 1])
