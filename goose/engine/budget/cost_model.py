"""Latency calibration: the time of one verification step against the tree size n.

Speculation pays off when committed tokens grow faster than the step's cost; on a GPU a step is nearly flat
in n, on a CPU it is not, so the best budget depends on the hardware. `calibrate` prefills a synthetic
prompt of `kv_len` tokens and times `engine.verify` on trees of 1, 2, 4, …, 128 nodes (round robin, after a
warm-up), taking medians, making the table non-decreasing and interpolating piecewise linearly. The step
includes the adjacency-table top-K of its logits (`update_topk`), since every such drafter pays it per
node.
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

import torch

from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.engine.core.verifier import VerificationEngine, sync_clock

DEFAULT_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class LatencyTable:
    """Verification latency (seconds) against tree size n, root included: measured `sizes` (from 1),
    non-decreasing `seconds`, raw `samples` and `meta` (device, dtype, threads, kv_len, …).
    """

    sizes: list[int]
    seconds: list[float]
    samples: list[list[float]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.seconds):
            raise ValueError("sizes and seconds must be non-empty and of the same length")
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

    def relative(self) -> list[float]:
        return [s / self.seconds[0] for s in self.seconds]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyTable:
        return cls(
            sizes=[int(x) for x in d["sizes"]],
            seconds=[float(x) for x in d["seconds"]],
            samples=[list(map(float, s)) for s in d.get("samples", [])],
            meta=dict(d.get("meta", {})),
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


def monotone(values: Sequence[float]) -> list[float]:
    out: list[float] = []
    for v in values:
        out.append(max(v, out[-1]) if out else v)
    return out


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


@torch.inference_mode()
def calibrate(
    engine: VerificationEngine,
    sizes: Sequence[int] = DEFAULT_SIZES,
    kv_len: int = 256,
    repeats: int = 5,
    update_topk: int | None = 10,
    seed: int = 0,
) -> LatencyTable:
    """Measure verification latency against tree size on this machine. Leaves the engine with a finished
    synthetic sequence, so call it between prompts.
    """
    sizes = sorted({int(s) for s in sizes} | {1})
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
    medians = [statistics.median(samples[n]) for n in sizes]
    return LatencyTable(
        sizes=list(sizes),
        seconds=monotone(medians),
        samples=[samples[n] for n in sizes],
        meta={
            "device": str(engine.device),
            "dtype": str(engine.dtype).replace("torch.", ""),
            "threads": torch.get_num_threads(),
            "kv_len": kv_len,
            "repeats": repeats,
            "update_topk": update_topk,
            "raw_medians": medians,
            "torch": torch.__version__,
        },
    )


_CALIBRATED: weakref.WeakKeyDictionary[VerificationEngine, LatencyTable] = weakref.WeakKeyDictionary()


def engine_latency(engine: VerificationEngine, **calibrate_kwargs: Any) -> LatencyTable:
    """The engine's latency table, calibrated once per engine (again if the thread count changed)."""
    table = _CALIBRATED.get(engine)
    if table is None or table.meta.get("threads") != torch.get_num_threads():
        table = _CALIBRATED[engine] = calibrate(engine, **calibrate_kwargs)
    return table
