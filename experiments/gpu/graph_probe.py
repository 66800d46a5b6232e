"""Would CUDA graphs shorten a verification step? (the GPU issue, item 3; run by `make gpu-check`)

A 7B step in fp16 launches a few hundred kernels (32 layers x ~12 ops, plus the LM head); where
the host cannot queue them as fast as the GPU runs them, part of the step is launch overhead. A
CUDA graph replays the whole forward with one launch. This probe measures, at one KV length and
for a few tree sizes n (the one-node step and padded tree sizes), the step's forward run eagerly
and the same forward replayed from a graph captured on the same buffers
(`VerificationEngine.replayable_forward`: inputs built once, the written cache rows dropped after
each call), interleaved, median [min, max]; and whether the replay's logits equal the eager ones
bit for bit (same kernels, so they must).

What it measures is the saving a graphed step could have (`helps`: > 5% of the eager step at
n = 1), on the eager step's own shapes. The graphed engine (`cuda_graphs`,
goose.engine.forward.static_step) pays for static shapes: trees padded to a bucket, attention over a span
of up to 511 more cache rows; `make gpu-check` times it beside the eager engine, so the two
figures together say what the padding costs and what the launches cost.

Without CUDA there is nothing to capture: the eager part runs (the CPU run of `make gpu-check`
keeps the code path working) and the record says why no graph was timed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

from goose.engine.budget.calibration import calibration_tree
from goose.engine.core.verifier import VerificationEngine, sync_clock

HELPS = 0.05  # a graph "helps" where it saves more than this fraction of the eager one-node step


def capture(forward: Callable[[], torch.Tensor], warm_up: int = 3) -> tuple[Callable[[], Any], torch.Tensor]:
    """`forward` captured into a CUDA graph after `warm_up` calls on a side stream (as torch's
    graph docs ask); returns the graph's replay and the tensor its replays write the logits into."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warm_up):
            forward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = forward()
    return graph.replay, logits


def timed(fn: Callable[[], Any], device: torch.device | str, calls: int) -> float:
    """Seconds per call of `fn`, over `calls` back-to-back calls (the device drained at both ends)."""
    t0 = sync_clock(device)
    for _ in range(calls):
        fn()
    return (sync_clock(device) - t0) / calls


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max (the record's form of a repeated timing; make gpu-check's too)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def probe(
    engine: VerificationEngine,
    vocab: int,
    kv_len: int,
    sizes: Sequence[int] = (1, 16, 64),
    rounds: int = 5,
    calls: int = 10,
) -> dict[str, Any]:
    """Eager against graph-replayed forward per tree size n (module docstring), after a prefill of
    `kv_len` random tokens; `rounds` interleaved rounds of `calls` calls each."""
    gen = torch.Generator().manual_seed(kv_len)
    prompt = torch.randint(0, vocab, (kv_len,), generator=gen).tolist()
    engine.prefill(prompt, max_new_tokens=2 * max(sizes), all_logits=False)
    anchor = int(engine.first_token)
    cuda = torch.device(engine.device).type == "cuda"
    result: dict[str, Any] = {
        "kv_len": kv_len,
        "rounds": rounds,
        "calls_per_round": calls,
        "graphs": cuda,
        "sizes": {},
    }
    if not cuda:
        result["why_no_graphs"] = f"no CUDA device (the engine runs on {engine.device}): nothing to capture"
    for n in sizes:
        forward = engine.replayable_forward(calibration_tree(n, anchor, vocab))
        eager_logits = forward().clone()
        contenders: dict[str, Callable[[], Any]] = {"eager": forward}
        row: dict[str, Any] = {}
        if cuda:
            replay, graph_logits = capture(forward)
            replay()
            row["identical_logits"] = bool(torch.equal(graph_logits, eager_logits))
            contenders["graph"] = replay
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        for r in range(rounds + 1):  # round 0 warms up; the order alternates
            for name in list(contenders)[:: 1 if r % 2 else -1]:
                s = timed(contenders[name], engine.device, calls)
                if r:
                    seconds[name].append(s)
        row.update({f"{name}_s": spread(v) for name, v in seconds.items()})
        if cuda:
            eager, graph = row["eager_s"]["median"], row["graph_s"]["median"]
            row["saved_s"] = eager - graph
            row["graph_over_eager"] = graph / eager
        result["sizes"][str(n)] = row
    first = result["sizes"][str(min(sizes))]
    result["helps"] = bool(cuda and first["saved_s"] > HELPS * first["eager_s"]["median"])
    return result


def summary(result: dict[str, Any]) -> str:
    """One line for `make gpu-check`'s summary."""
    if not result.get("graphs"):
        return f"  CUDA graphs: not timed: {result.get('why_no_graphs') or result.get('error')}"
    parts = [
        f"n={n}: eager {row['eager_s']['median'] * 1e3:.2f} ms, graph {row['graph_s']['median'] * 1e3:.2f} ms "
        f"({row['graph_over_eager']:.2f}x{'' if row['identical_logits'] else ', LOGITS DIFFER'})"
        for n, row in result["sizes"].items()
    ]
    verdict = "would help: worth a graphed engine" if result["helps"] else "does not help: no graphed engine"
    return f"  CUDA graphs (KV {result['kv_len']}): " + "; ".join(parts) + f" -> {verdict}"
