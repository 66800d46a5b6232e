"""Does a one-token verification step cost more after a wider step, or after work on the host, than after a
one-token step? An empty draft verifies the anchor alone, as AR does, yet in `experiments.failed_step` its
forward runs slower than AR's at the same positions; this times that step alone, on the engine, with no
drafter.

Per round a fresh prefill of a fixed synthetic prompt, then pairs (what comes before, one-token step) in a
shuffled order, the one-token step timed alone: after a one-token step (the reference), after a failed
chain of n nodes (random tokens: nothing accepted; `--widths`), after a stretch of pure-Python work or a
sleep of about the given microseconds (`--host-us`); each pair with the step's top-K off and on (`topk_width`
0 and `--topk`, as an adjacency-table drafter's steps run). Median per kind and its ratio over the reference.

    python -m experiments.step_history --model smollm2-135m --dtype bfloat16 --threads 2 \
        --out results/studies/step_history
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from experiments.bench.load import model_and_engine
from experiments.interleaved import write_record
from goose.engine.core.tree import ROOT, SPINE, DraftTree
from goose.engine.core.verifier import VerificationEngine


def failed_chain(anchor: int, width: int, rng: random.Random, vocab: int) -> DraftTree:
    """The anchor and `width` − 1 random tokens in a chain: a draft the target rejects at its first node."""
    tokens = [anchor] + [rng.randrange(vocab) for _ in range(width - 1)]
    return DraftTree(tokens, list(range(-1, width - 1)), [ROOT] + [SPINE] * (width - 1))


_TABLE = {i: i for i in range(4096)}


def host_work(micros: float) -> None:
    """About `micros` µs of pure-Python work (dict reads), what a drafter does between two steps."""
    end = time.perf_counter() + micros / 1e6
    s = 0
    while time.perf_counter() < end:
        for i in range(0, 4096, 64):
            s += _TABLE[i]


def run(engine: VerificationEngine, args: argparse.Namespace) -> dict[str, Any]:
    vocab = int(engine.model.config.get_text_config(decoder=True).vocab_size)
    kinds = ["after 1", *(f"after {w}" for w in args.widths), f"after {args.host_us} us host", "after sleep"]
    times: dict[str, dict[int, list[float]]] = {k: {0: [], args.topk: []} for k in kinds}
    prompt = random.Random(0).choices(range(100, vocab), k=args.prompt_len)
    for r in range(args.rounds):
        rng = random.Random(r)
        engine.prefill(prompt, max_new_tokens=4 * args.pairs * max(args.widths))
        anchor = int(engine.first_token)
        pairs = [(k, t) for k in kinds for t in (0, args.topk)] * args.pairs
        rng.shuffle(pairs)
        for kind, topk in pairs:
            engine.topk_width = topk
            if kind.startswith("after sleep"):
                time.sleep(args.host_us / 1e6)
            elif kind.endswith("host"):
                host_work(args.host_us)
            else:
                width = int(kind.split()[1])
                before = DraftTree.single(anchor) if width == 1 else failed_chain(anchor, width, rng, vocab)
                anchor = engine.verify(before, budget=1 << 20).new_tokens[-1]
            t0 = time.perf_counter()
            anchor = engine.verify(DraftTree.single(anchor), budget=1 << 20).new_tokens[-1]
            times[kind][topk].append(time.perf_counter() - t0)
        print(f"round {r + 1}/{args.rounds} done")
    out: dict[str, Any] = {"kinds": {}}
    for topk in (0, args.topk):
        ref = statistics.median(times["after 1"][topk])
        for kind in kinds:
            med = statistics.median(times[kind][topk])
            out["kinds"][f"{kind}, top-K {topk}"] = {
                "median_ms": 1e3 * med,
                "over_after_1": med / ref,
                "steps": len(times[kind][topk]),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--widths", type=lambda s: [int(x) for x in s.split(",")], default=[4, 8, 16])
    ap.add_argument("--host-us", type=int, default=400, help="host work and sleep before a step (µs)")
    ap.add_argument("--topk", type=int, default=10, help="the step's top-K when on (an adjacency table's K)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--pairs", type=int, default=10, help="pairs of each kind and top-K per round")
    ap.add_argument("--prompt-len", type=int, default=300)
    ap.add_argument("--out", default="results/studies/step_history")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    _, engine = model_and_engine(args.model, dtype=args.dtype)
    summary = run(engine, args)
    print("\n| one-token step | median ms | over after a one-token step |\n|---|---|---|")
    for kind, v in summary["kinds"].items():
        print(f"| {kind} | {v['median_ms']:.3f} | {v['over_after_1']:.3f} ({v['steps']} steps) |")
    cpu = torch.backends.cpu.get_cpu_capability()
    write_record(summary, args, [], cpu, Path(args.out) / f"{args.model}-{args.dtype}.json")


if __name__ == "__main__":
    main()
