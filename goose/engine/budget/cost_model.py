"""Latency calibration: the time of one verification step against the tree size n.

Speculation pays off when committed tokens grow faster than the step's cost; on a GPU a step is nearly flat
in n, on a CPU it is not, so the best budget depends on the hardware. `calibrate` prefills a synthetic
prompt of `kv_len` tokens and times `engine.verify` on trees of every size from 1 to 24 nodes, then sparser up to
128 (round robin, after a warm-up), taking medians as measured and interpolating piecewise linearly between
them. The medians are not forced non-decreasing: on a CPU a step of a few rows can cost less than one of fewer
(the matmul kernels work in tiles of rows), and a size rule that maximises E[committed | b] / t(b) never
picks a size that a larger and cheaper one dominates, so the dips are worth knowing. The step
includes the adjacency-table top-K of its logits (`update_topk`), since every such drafter pays it per
node. Each node attends over the whole cache, so a step after a long prompt costs more per node than the
curve at KV 256 says: calibrated at more KV lengths (`more_kv_lens`), the table gives t(n, kv), linear in kv
between them and extended past the largest (`curves`).
"""

from __future__ import annotations

import json
import statistics
import weakref
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.engine.core.verifier import VerificationEngine, sync_clock

DEFAULT_SIZES: tuple[int, ...] = (*range(1, 25), 28, 32, 40, 48, 64, 96, 128)


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
        """A table saved by `save`, or the `dtype` entry of an experiments/cost_curve.py record."""
        data = json.loads(Path(path).read_text())
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


def calibration_tree(n: int, anchor: int, vocab_size: int, spine: int = 20, branching: int = 3) -> DraftTree:
    """A Goose-like tree of n nodes: a spine chain and breadth-first branches, all tokens distinct."""
    tree = DraftTree.single(anchor)
    token = (anchor + 1) % vocab_size
    length = min(spine, n - 1)
    for i in range(length):
        tree.add(token, i, SPINE)
        token = (token + 1) % vocab_size
    parent, width = 0, 0
    while len(tree) < n:
        tree.add(token, parent, BRANCH)
        token = (token + 1) % vocab_size
        width += 1
        if width == branching:
            parent, width = parent + 1, 0
    return tree


def other_kv_lens(more_kv_lens: Sequence[int], kv_len: int) -> list[int]:
    """The KV lengths `calibrate` measures besides kv_len: `more_kv_lens` without kv_len, ascending."""
    return sorted({int(k) for k in more_kv_lens} - {int(kv_len)})


@torch.inference_mode()
def _time_sizes(
    engine: VerificationEngine,
    sizes: Sequence[int],
    kv_len: int,
    repeats: int,
    update_topk: int | None,
    seed: int,
) -> dict[int, list[float]]:
    """Seconds of `repeats` verification steps per tree size after a synthetic prompt of kv_len tokens."""
    vocab = int(engine.model.config.get_text_config(decoder=True).vocab_size)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (kv_len,), generator=gen).tolist()
    engine.prefill(prompt, max_new_tokens=2 * max(sizes))
    p0 = engine.prefix_len
    anchor = int(engine.first_token)
    trees = {n: calibration_tree(n, anchor, vocab) for n in sizes}
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(repeats + 1):  # round 0 is the warm-up
        order = sizes if r % 2 == 0 else sizes[::-1]
        for n in order:
            t0 = sync_clock(engine.device)
            outcome = engine.verify(trees[n], budget=n)
            if update_topk:
                vals, idx = torch.topk(outcome.logits, min(update_topk, outcome.logits.shape[-1]), dim=-1)
                torch.cat([idx.float(), vals.float()], dim=-1).cpu()
            t1 = sync_clock(engine.device)
            engine.truncate(p0)
            if r:
                samples[n].append(t1 - t0)
    return samples


def calibrate(
    engine: VerificationEngine,
    sizes: Sequence[int] = DEFAULT_SIZES,
    kv_len: int = 256,
    repeats: int = 5,
    update_topk: int | None = 10,
    seed: int = 0,
    more_kv_lens: Sequence[int] = (),
) -> LatencyTable:
    """Measure verification latency against tree size on this machine, after kv_len cached tokens and, for
    t(n, kv), after each of `more_kv_lens`. Leaves the engine with a finished synthetic sequence, so call
    it between prompts.
    """
    sizes = sorted({int(s) for s in sizes} | {1})
    extra = other_kv_lens(more_kv_lens, kv_len)
    if any(k < 1 for k in extra):
        raise ValueError(f"more_kv_lens must be positive, got {list(more_kv_lens)}")
    samples = _time_sizes(engine, sizes, kv_len, repeats, update_topk, seed)
    medians = [statistics.median(samples[n]) for n in sizes]
    kv_seconds = {}
    for kv in extra:
        timed = _time_sizes(engine, sizes, kv, repeats, update_topk, seed)
        kv_seconds[kv] = [statistics.median(timed[n]) for n in sizes]
    return LatencyTable(
        sizes=list(sizes),
        seconds=medians,
        samples=[samples[n] for n in sizes],
        meta={
            "device": str(engine.device),
            "dtype": str(engine.dtype).replace("torch.", ""),
            "threads": torch.get_num_threads(),
            "kv_len": kv_len,
            "repeats": repeats,
            "update_topk": update_topk,
            "torch": torch.__version__,
        },
        kv_len=kv_len,
        kv_seconds=kv_seconds,
    )


_CALIBRATED: weakref.WeakKeyDictionary[VerificationEngine, LatencyTable] = weakref.WeakKeyDictionary()


def engine_latency(engine: VerificationEngine, **calibrate_kwargs: Any) -> LatencyTable:
    """The engine's latency table, calibrated once per engine (again if the thread count changed or other
    KV lengths are asked for)."""
    table = _CALIBRATED.get(engine)
    more = other_kv_lens(calibrate_kwargs.get("more_kv_lens", ()), calibrate_kwargs.get("kv_len", 256))
    if (
        table is None
        or table.meta.get("threads") != torch.get_num_threads()
        or ("more_kv_lens" in calibrate_kwargs and sorted(table.kv_seconds) != more)
    ):
        table = _CALIBRATED[engine] = calibrate(engine, **calibrate_kwargs)
    return table
