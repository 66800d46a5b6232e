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

**Robust timings (`SettleRule`).** Two fresh processes on one machine do not time a step alike: a burst of
other work (another process, a page-cache flush) slows a few steps several-fold, and the first timed round
after the warm-up is sometimes still slow. Each size's samples farther than k·σ̂ from their median
(σ̂ = 1.4826·MAD, the normal-consistent MAD, floored at `floor` of the median so that sub-percent jitter is
never an outlier) are dropped and t(n) is the median of the rest (`inliers`); a size keeps being timed in
extra rounds (round robin over the unsettled sizes only) until it has `repeats` inliers and its median's
relative standard error (1.2533·σ̂/√m, `median_error`) is at most `target`, bounded by `max_rounds` rounds
and by extra time of at most `extra_time` × the first `repeats` rounds' steps; a size whose error could
not reach the target within `max_rounds` samples (`hopeless`: the machine is busy) is not retimed. Why
this rule: the median of 5 already outvotes two bad rounds, but an outlier still shifts it by one rank,
and a size whose timings are somewhat broad is where the curves of two processes part; more samples of
that size (not of every size) fix it, and dropping outliers before the median keeps a burst from moving
it. On a quiet machine most sizes settle in their first `repeats` rounds and the rest within a few more,
so the start-up cost stays about the same; on a busy one the broad sizes are given up (marked
`unsettled`) instead of doubling the start-up. What no rule within one process removes is a shift of the
whole curve between processes (a few per cent on a 2-core CPU: memory placement, the machine's load over
the whole calibration), nor the slowness of a calibration on a machine that other work keeps busy:
budget=auto therefore reuses one settled curve per machine (`goose.engine.budget.latency_cache`).
`experiments/calibration_spread.py` measures the spread under both rules.
"""

from __future__ import annotations

import json
import math
import statistics
import time
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
# Bumped whenever `calibrate` measures differently: a cached curve of another version is never reused.
MEASUREMENT_VERSION = 2
MAD_TO_SIGMA = 1.4826  # σ of a normal distribution per unit of its median absolute deviation
MEDIAN_SE = 1.2533  # the standard error of a normal sample's median per σ/√m (√(π/2))


def _mad(xs: Sequence[float], centre: float) -> float:
    return statistics.median(abs(x - centre) for x in xs)


def inliers(samples: Sequence[float], k: float = 3.0, floor: float = 0.01) -> list[float]:
    """`samples` without the outliers: those farther than k·σ̂ from their median, σ̂ = 1.4826·MAD but at
    least `floor` × the median (so that jitter below that is never an outlier; also when MAD = 0)."""
    if not samples:
        return []
    med = statistics.median(samples)
    scale = max(MAD_TO_SIGMA * _mad(samples, med), floor * abs(med))
    return [x for x in samples if abs(x - med) <= k * scale]


def median_error(samples: Sequence[float]) -> float:
    """The relative standard error of the median of `samples`: 1.2533·σ̂/√m / median, σ̂ = 1.4826·MAD
    (0 for one sample; inf for an empty list or a median of 0)."""
    if not samples:
        return math.inf
    med = statistics.median(samples)
    if med == 0:
        return math.inf
    return MEDIAN_SE * MAD_TO_SIGMA * _mad(samples, med) / math.sqrt(len(samples)) / abs(med)


@dataclass(frozen=True)
class SettleRule:
    """When a size's timings are enough, and what t(n) is made of them (module docstring, "Robust
    timings"): outliers beyond `k`·σ̂ of the median dropped (σ̂ floored at `floor` of the median); a size is
    settled once it has `repeats` inliers and its median's relative standard error is at most `target`;
    a size that could not settle within `max_rounds` rounds at its error (`hopeless`) is not timed again;
    extra rounds stop at `max_rounds` rounds per size or when they would exceed `extra_time` × the time of
    the first `repeats` rounds' steps."""

    k: float = 3.0
    floor: float = 0.01
    target: float = 0.015
    max_rounds: int = 15
    extra_time: float = 1.0

    def __post_init__(self) -> None:
        if not (self.k > 0 and self.floor >= 0 and self.target > 0 and self.max_rounds >= 1):
            raise ValueError(f"SettleRule needs k > 0, floor >= 0, target > 0, max_rounds >= 1: {self}")
        if self.extra_time < 0:
            raise ValueError(f"SettleRule.extra_time = {self.extra_time}: must be >= 0")

    def kept(self, samples: Sequence[float]) -> list[float]:
        return inliers(samples, self.k, self.floor)

    def estimate(self, samples: Sequence[float]) -> float:
        """t(n) from one size's samples: the median of the inliers."""
        return statistics.median(self.kept(samples))

    def settled(self, samples: Sequence[float], repeats: int) -> bool:
        kept = self.kept(samples)
        return len(kept) >= repeats and median_error(kept) <= self.target

    def hopeless(self, samples: Sequence[float]) -> bool:
        """Whether the median's error, falling as 1/√m, would reach `target` only past `max_rounds`
        samples (m·(error / target)² of them): timings that broad come from a busy machine, and more
        rounds would only lengthen the start-up."""
        kept = self.kept(samples)
        return len(kept) * (median_error(kept) / self.target) ** 2 > self.max_rounds


ROBUST = SettleRule()


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


@dataclass
class Timings:
    """One KV length's timings: every sample per size (outliers included), what became of them (the
    outliers dropped, the sizes still unsettled when the bound was hit) and the seconds it took."""

    samples: dict[int, list[float]]
    seconds: dict[int, float]
    outliers: dict[int, int] = field(default_factory=dict)
    unsettled: list[int] = field(default_factory=list)
    wall_s: float = 0.0

    def record(self) -> dict[str, Any]:
        return {
            "rounds": {str(n): len(v) for n, v in self.samples.items()},
            "outliers": {str(n): c for n, c in self.outliers.items() if c},
            "unsettled": list(self.unsettled),
            "wall_s": round(self.wall_s, 3),
        }


@torch.inference_mode()
def _time_sizes(
    engine: VerificationEngine,
    sizes: Sequence[int],
    kv_len: int,
    repeats: int,
    update_topk: int | None,
    seed: int,
    rule: SettleRule | None = ROBUST,
) -> Timings:
    """Verification steps per tree size after a synthetic prompt of kv_len tokens: a warm-up round, then
    `repeats` rounds over every size (round robin, alternating direction), then, with a `rule`, extra
    rounds over the sizes it does not yet call settled, within its bounds. t(n): the rule's estimate, or
    (rule None) the plain median of the `repeats` samples."""
    start = time.perf_counter()
    vocab = int(engine.model.config.get_text_config(decoder=True).vocab_size)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (kv_len,), generator=gen).tolist()
    engine.prefill(prompt, max_new_tokens=2 * max(sizes))
    p0 = engine.prefix_len
    anchor = int(engine.first_token)
    trees = {n: calibration_tree(n, anchor, vocab) for n in sizes}
    samples: dict[int, list[float]] = {n: [] for n in sizes}

    def one_round(order: Sequence[int], keep: bool) -> None:
        for n in order:
            t0 = sync_clock(engine.device)
            outcome = engine.verify(trees[n], budget=n)
            if update_topk:
                vals, idx = torch.topk(outcome.logits, min(update_topk, outcome.logits.shape[-1]), dim=-1)
                torch.cat([idx.float(), vals.float()], dim=-1).cpu()
            t1 = sync_clock(engine.device)
            engine.truncate(p0)
            if keep:
                samples[n].append(t1 - t0)

    sizes = list(sizes)
    one_round(sizes, keep=False)  # round 0: the warm-up
    for r in range(1, repeats + 1):
        one_round(sizes if r % 2 == 0 else sizes[::-1], keep=True)
    if rule is None:
        seconds = {n: statistics.median(samples[n]) for n in sizes}
        return Timings(samples, seconds, wall_s=time.perf_counter() - start)
    # The bound in timed step seconds (the clock of the samples): extra rounds may add at most
    # extra_time x what the first `repeats` rounds' steps took; a round is run only if it fits.
    budget = rule.extra_time * sum(sum(v) for v in samples.values())
    spent, r = 0.0, repeats
    while r < rule.max_rounds:
        todo = [n for n in sizes if not rule.settled(samples[n], repeats) and not rule.hopeless(samples[n])]
        expected = sum(statistics.median(samples[n]) for n in todo)  # this round's time, as timed so far
        if not todo or spent + expected > budget:
            break
        r += 1
        one_round(todo if r % 2 == 0 else todo[::-1], keep=True)
        spent += sum(samples[n][-1] for n in todo)  # this round's timed steps
    return Timings(
        samples,
        {n: rule.estimate(samples[n]) for n in sizes},
        outliers={n: len(samples[n]) - len(rule.kept(samples[n])) for n in sizes},
        unsettled=[n for n in sizes if not rule.settled(samples[n], repeats)],
        wall_s=time.perf_counter() - start,
    )


def calibration_settings(
    sizes: Sequence[int] = DEFAULT_SIZES,
    kv_len: int = 256,
    repeats: int = 5,
    update_topk: int | None = 10,
    seed: int = 0,
    more_kv_lens: Sequence[int] = (),
    rule: SettleRule | None = ROBUST,
) -> dict[str, Any]:
    """What a calibration with these arguments measures, as plain JSON values (`calibrate`'s defaults):
    recorded in the table's meta, compared by `engine_latency`, part of a cached curve's fingerprint."""
    return {
        "version": MEASUREMENT_VERSION,
        "sizes": sorted({int(s) for s in sizes} | {1}),
        "kv_len": int(kv_len),
        "more_kv_lens": other_kv_lens(more_kv_lens, kv_len),
        "repeats": int(repeats),
        "update_topk": None if update_topk is None else int(update_topk),
        "seed": int(seed),
        "rule": "plain medians" if rule is None else asdict(rule),
    }


def calibrate(
    engine: VerificationEngine,
    sizes: Sequence[int] = DEFAULT_SIZES,
    kv_len: int = 256,
    repeats: int = 5,
    update_topk: int | None = 10,
    seed: int = 0,
    more_kv_lens: Sequence[int] = (),
    rule: SettleRule | None = ROBUST,
) -> LatencyTable:
    """Measure verification latency against tree size on this machine, after kv_len cached tokens and, for
    t(n, kv), after each of `more_kv_lens`; each size's t(n) from its timings by `rule` (None: the plain
    median of `repeats` rounds, the rule before MEASUREMENT_VERSION 2). Leaves the engine with a finished
    synthetic sequence, so call it between prompts. The meta records the settings
    (`calibration_settings`) and, per KV length, each size's rounds, dropped outliers, the sizes left
    unsettled and the seconds it took (`measurement`).
    """
    settings = calibration_settings(sizes, kv_len, repeats, update_topk, seed, more_kv_lens, rule)
    sizes = settings["sizes"]
    extra = settings["more_kv_lens"]
    if any(k < 1 for k in extra):
        raise ValueError(f"more_kv_lens must be positive, got {list(more_kv_lens)}")
    timed = _time_sizes(engine, sizes, kv_len, repeats, update_topk, seed, rule)
    measurement = {str(kv_len): timed.record()}
    kv_seconds = {}
    for kv in extra:
        at_kv_len = _time_sizes(engine, sizes, kv, repeats, update_topk, seed, rule)
        kv_seconds[kv] = [at_kv_len.seconds[n] for n in sizes]
        measurement[str(kv)] = at_kv_len.record()
    return LatencyTable(
        sizes=list(sizes),
        seconds=[timed.seconds[n] for n in sizes],
        samples=[timed.samples[n] for n in sizes],
        meta={
            "device": str(engine.device),
            "dtype": str(engine.dtype).replace("torch.", ""),
            "threads": torch.get_num_threads(),
            "kv_len": kv_len,
            "repeats": repeats,
            "update_topk": update_topk,
            "torch": torch.__version__,
            "calibration": settings,
            "measurement": measurement,
            "calibration_s": round(sum(m["wall_s"] for m in measurement.values()), 3),
        },
        kv_len=kv_len,
        kv_seconds=kv_seconds,
    )


_CALIBRATED: weakref.WeakKeyDictionary[VerificationEngine, LatencyTable] = weakref.WeakKeyDictionary()


def engine_latency(engine: VerificationEngine, **calibrate_kwargs: Any) -> LatencyTable:
    """The engine's latency table, calibrated once per engine: again if the thread count changed or the
    `calibrate_kwargs` given ask for other settings (`calibration_settings`); with none given, whatever
    this engine was calibrated with."""
    table = _CALIBRATED.get(engine)
    wanted = calibration_settings(**calibrate_kwargs)
    if (
        table is None
        or table.meta.get("threads") != torch.get_num_threads()
        or (calibrate_kwargs and table.meta.get("calibration") != wanted)
    ):
        table = _CALIBRATED[engine] = calibrate(engine, **calibrate_kwargs)
    return table
