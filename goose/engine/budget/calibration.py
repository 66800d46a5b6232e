"""Latency calibration: measuring the time of one verification step against the tree size n.

Speculation pays off when committed tokens grow faster than the step's cost; on a GPU a step is nearly flat
in n, on a CPU it is not, so the best budget depends on the hardware. `calibrate` prefills a synthetic
prompt of `kv_len` tokens and times `engine.verify` on trees of every size from 1 to 24 nodes, then sparser up to
128 (round robin, after a warm-up), each size's t(n) taken from its
samples by a `SettleRule` (`goose.engine.budget.settle`: outliers dropped, extra rounds for the sizes still
uncertain) into a `LatencyTable` (`goose.engine.budget.cost_model`). The step
includes the adjacency-table top-K of its logits (`update_topk`, computed in the step's argmax pass and
brought to the host), since every such drafter pays it per node. A sampled run's curve is measured with its
sampling (`sampling`): each node then also pays the warp of its logits over the whole vocabulary and the
match against its draw, which a greedy step does not (on a large vocabulary, more than the forward adds
per node). Each node attends over the whole cache, so a step after a long prompt costs more per node than the
curve at KV 256 says: calibrated at more KV lengths (`more_kv_lens`), the table gives t(n, kv). What a
calibration measures is one frozen `CalibrationSettings` (its record is the table's meta and part of a
cached curve's fingerprint, `goose.engine.budget.latency_cache`).
"""

from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from goose.engine.budget.cost_model import LatencyTable
from goose.engine.budget.settle import ROBUST, SettleRule
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.engine.core.verifier import VerificationEngine, sync_clock

DEFAULT_SIZES: tuple[int, ...] = (*range(1, 25), 28, 32, 40, 48, 64, 96, 128)
# Bumped whenever `calibrate` measures differently: a cached curve of another version is never reused.
# 3: the step's top-K computed in the verification's argmax pass (`VerificationEngine.topk_width`).
MEASUREMENT_VERSION = 3


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
    sampling: SamplingParams | None = None,
) -> Timings:
    """Verification steps per tree size after a synthetic prompt of kv_len tokens (verified with `sampling`,
    None: greedy): a warm-up round, then
    `repeats` rounds over every size (round robin, alternating direction), then, with a `rule`, extra
    rounds over the sizes it does not yet call settled, within its bounds. t(n): the rule's estimate, or
    (rule None) the plain median of the `repeats` samples."""
    start = time.perf_counter()
    vocab = int(engine.model.config.get_text_config(decoder=True).vocab_size)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (kv_len,), generator=gen).tolist()
    engine.prefill(prompt, max_new_tokens=2 * max(sizes), all_logits=False, sampling=sampling, seed=seed)
    p0 = engine.prefix_len
    anchor = int(engine.first_token)
    trees = {n: calibration_tree(n, anchor, vocab) for n in sizes}
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    topk_before = engine.topk_width
    engine.topk_width = update_topk or 0  # the top-K in the argmax's pass, as a table drafter's steps take it

    def one_round(order: Sequence[int], keep: bool) -> None:
        for n in order:
            t0 = sync_clock(engine.device)
            outcome = engine.verify(trees[n], budget=n)
            if outcome.top is not None:  # to the host, as the table's update takes it
                torch.cat([outcome.top[1].float(), outcome.top[0].float()], dim=-1).cpu()
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
        engine.topk_width = topk_before
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
    engine.topk_width = topk_before
    return Timings(
        samples,
        {n: rule.estimate(samples[n]) for n in sizes},
        outliers={n: len(samples[n]) - len(rule.kept(samples[n])) for n in sizes},
        unsettled=[n for n in sizes if not rule.settled(samples[n], repeats)],
        wall_s=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class CalibrationSettings:
    """What `calibrate` measures: the tree `sizes` (1 always added), the prompt's `kv_len` and the
    `more_kv_lens` for t(n, kv), `repeats` timed rounds after a warm-up, the top-K of the step's logits
    timed with it (`update_topk`, None: none), the synthetic prompt's `seed`, the `rule` turning
    samples into t(n) (None: the plain median of `repeats` rounds, the rule before MEASUREMENT_VERSION 2),
    and the run's `sampling` (None or greedy: greedy steps; else the steps verify sampled, and the record
    names the temperature, top-p and top-k, so a sampled curve is cached apart from a greedy one).
    """

    sizes: Sequence[int] = DEFAULT_SIZES
    kv_len: int = 256
    repeats: int = 5
    update_topk: int | None = 10
    seed: int = 0
    more_kv_lens: Sequence[int] = ()
    rule: SettleRule | None = ROBUST
    sampling: SamplingParams | None = None

    def __post_init__(self) -> None:
        if self.sampling is not None and self.sampling.greedy:
            object.__setattr__(self, "sampling", None)
        object.__setattr__(self, "sizes", tuple(sorted({int(n) for n in self.sizes} | {1})))
        object.__setattr__(self, "more_kv_lens", tuple(other_kv_lens(self.more_kv_lens, self.kv_len)))
        if any(k < 1 for k in self.more_kv_lens):
            raise ValueError(f"more_kv_lens must be positive, got {list(self.more_kv_lens)}")

    def record(self) -> dict[str, Any]:
        """The settings as plain JSON values: recorded in the table's meta, compared by `engine_latency`,
        part of a cached curve's fingerprint."""
        return {
            "version": MEASUREMENT_VERSION,
            "sizes": list(self.sizes),
            "kv_len": int(self.kv_len),
            "more_kv_lens": list(self.more_kv_lens),
            "repeats": int(self.repeats),
            "update_topk": None if self.update_topk is None else int(self.update_topk),
            "seed": int(self.seed),
            "rule": "plain medians" if self.rule is None else asdict(self.rule),
            **({} if self.sampling is None else {"sampling": self._sampling_record(self.sampling)}),
        }

    @staticmethod
    def _sampling_record(sampling: SamplingParams) -> dict[str, Any]:
        """What of the sampling changes a step's cost (the verifier of drafts with q does not: the
        calibration's trees carry none)."""
        return {
            "temperature": float(sampling.temperature),
            "top_p": float(sampling.top_p),
            "top_k": int(sampling.top_k),
        }


def calibration_settings(**settings: Any) -> dict[str, Any]:
    """The record of a calibration with these `CalibrationSettings` fields (the rest at their defaults)."""
    return CalibrationSettings(**settings).record()


def calibrate(engine: VerificationEngine, **settings: Any) -> LatencyTable:
    """Measure verification latency against tree size on this machine, after kv_len cached tokens and, for
    t(n, kv), after each of `more_kv_lens` (`settings`: `CalibrationSettings` fields). Leaves the engine
    with a finished synthetic sequence, so call it between prompts. The meta records the settings and,
    per KV length, each size's rounds, dropped outliers, the sizes left unsettled and the seconds it took
    (`measurement`).
    """
    how = CalibrationSettings(**settings)
    sizes, kv_len, repeats, update_topk, seed, rule, sampling = (
        list(how.sizes),
        how.kv_len,
        how.repeats,
        how.update_topk,
        how.seed,
        how.rule,
        how.sampling,
    )
    timed = _time_sizes(engine, sizes, kv_len, repeats, update_topk, seed, rule, sampling)
    measurement = {str(kv_len): timed.record()}
    kv_seconds = {}
    for kv in how.more_kv_lens:
        at_kv_len = _time_sizes(engine, sizes, kv, repeats, update_topk, seed, rule, sampling)
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
            "calibration": how.record(),
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
