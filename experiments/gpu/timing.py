"""The timing stage of `make gpu-check`, per random-weight shape: the verification cost curve t(n)/t(1) at
each KV length, the bandwidth floor of a one-token step, prefill times, what CUDA graphs would save per step
(experiments/gpu/graph_probe.py), the engine with its steps replayed from CUDA graphs, optionally
torch.compile, and the engine's AR against `transformers` `generate` in interleaved rounds. Random weights:
timing only, never acceptance."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from experiments.gpu import graph_probe
from experiments.gpu.graph_probe import spread
from experiments.gpu.profile import Profile
from experiments.gpu.record import save_record
from goose.engine.budget.calibration import calibrate
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.verifier import VerificationEngine, sync_clock
from goose.engine.forward.choose import verification_engine
from goose.engine.forward.static_step import StaticStep
from goose.harness.models.devices import parse_dtype
from goose.harness.models.random_weights import load_shape, random_model


def release(device: str) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def random_prompt(vocab: int, length: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def time_prefill(engine: VerificationEngine, vocab: int, lengths: tuple[int, ...], repeats: int = 3) -> dict:
    """Median seconds of a prefill (last row only, as for drafters that do not harvest it)."""
    seconds = []
    for length in lengths:
        prompt = random_prompt(vocab, length, seed=length)
        samples = []
        for r in range(repeats + 1):
            t0 = sync_clock(engine.device)
            engine.prefill(prompt, max_new_tokens=16, all_logits=False)
            t1 = sync_clock(engine.device)
            if r:
                samples.append(t1 - t0)
        seconds.append(statistics.median(samples))
    return {"lengths": list(lengths), "seconds": seconds}


def hf_generate(model: Any, device: str) -> Callable[[list[int], int], list[int]]:
    """transformers greedy `generate` with its default (dynamic) cache, exactly `new` tokens."""
    model.generation_config.eos_token_id = None

    def run(prompt: list[int], new: int) -> list[int]:
        x = torch.tensor([prompt], device=device)
        out = model.generate(
            x, attention_mask=torch.ones_like(x), max_new_tokens=new, do_sample=False, pad_token_id=0
        )
        return out[0, len(prompt) :].tolist()

    return run


def ar_against_generate(
    model: Any, engines: dict[str, VerificationEngine], profile: Profile, vocab: int
) -> dict[str, Any]:
    """Tokens/s of each engine's AR and of `generate` on one random prompt, `ar_repeats` interleaved
    rounds after a warm-up round (the order rotates from round to round); prefill included."""
    prompt = random_prompt(vocab, profile.prompt_len, seed=1)
    contenders: dict[str, Callable[[], list[int]]] = {
        name: (lambda e=engine: generate(e, ARDrafter(), prompt, profile.new_tokens).output_ids)
        for name, engine in engines.items()
    }
    gen = hf_generate(model, profile.device)
    contenders["hf:generate"] = lambda: gen(prompt, profile.new_tokens)
    names = list(contenders)
    tps: dict[str, list[float]] = {n: [] for n in names}
    outputs: dict[str, list[int]] = {}
    for r in range(profile.ar_repeats + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = sync_clock(profile.device)
            outputs[name] = contenders[name]()
            t1 = sync_clock(profile.device)
            if r:
                tps[name].append(len(outputs[name]) / (t1 - t0))
    result: dict[str, Any] = {
        "prompt_tokens": profile.prompt_len,
        "new_tokens": profile.new_tokens,
        "rounds": profile.ar_repeats,
        "tokens_per_s": {n: spread(v) for n, v in tps.items()},
        "identical_to_generate": {n: outputs[n] == outputs["hf:generate"] for n in engines},
    }
    for n in engines:
        result[f"{n}_over_generate"] = spread(
            [a / b for a, b in zip(tps[n], tps["hf:generate"], strict=True)]
        )
    return result


def copy_bandwidth(device: str) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting the bytes read and written (median of
    10 copies of 1 GiB on a GPU, 64 MiB elsewhere)."""
    size = (1 << 30) if torch.device(device).type == "cuda" else (64 << 20)
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    samples = []
    for _ in range(10):
        t0 = sync_clock(device)
        dst.copy_(src)
        samples.append(sync_clock(device) - t0)
    del src, dst
    return 2 * size / statistics.median(samples)


def bandwidth_floor(model: Any, config: dict[str, Any], kv_lens: tuple[int, ...], bandwidth: float) -> dict:
    """The least time a one-token step can take: every weight it reads (all but the input
    embedding, which is only indexed, unless tied to the output head) plus the KV cache at each
    length, over the measured copy bandwidth."""
    embed = model.get_input_embeddings().weight
    tied = model.get_output_embeddings().weight.data_ptr() == embed.data_ptr()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    read = weights - (0 if tied else embed.numel() * embed.element_size())
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    per_token = 2 * int(config["num_hidden_layers"]) * int(config.get("num_key_value_heads") or heads)
    per_token *= head_dim * embed.element_size()
    return {
        "bandwidth_bytes_per_s": bandwidth,
        "weight_bytes_read": read,
        "kv_bytes_per_token": per_token,
        "seconds": {str(kv): (read + per_token * kv) / bandwidth for kv in kv_lens},
    }


def curve_record(table: LatencyTable) -> dict[str, Any]:
    """One calibrated cost curve as the record holds it (t(n), t(n)/t(1), the raw samples)."""
    return {
        "sizes": table.sizes,
        "seconds": table.seconds,
        "relative": table.relative(),
        "samples": table.samples,
    }


def time_shape(name: str, profile: Profile) -> dict[str, Any]:
    """Cost curves, prefill and AR against generate for one random-weight shape."""
    spec = load_shape(name)
    dtype = parse_dtype(profile.dtype)
    t0 = time.perf_counter()
    model = random_model(spec, dtype, profile.device)
    vocab = int(spec.config["vocab_size"])
    # Room for the longest KV length plus the largest tree even where the model's own window is
    # shorter (Vicuna's 2048): RoPE has no limit and the weights are random anyway.
    context = max(
        int(spec.config["max_position_embeddings"]), max(profile.kv_lens) + 2 * max(profile.sizes) + 64
    )
    engine = verification_engine(model, eos_token_ids=(), context_length=context)
    result: dict[str, Any] = {
        "shape": name,
        "paper_model": spec.paper_model,
        "architecture": spec.architecture,
        "config": spec.config,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": profile.dtype,
        "random_weights": True,
        "forward": engine.forward_name,
        "build_seconds": time.perf_counter() - t0,
    }
    curves = {}
    for kv in profile.kv_lens:
        table = calibrate(engine, sizes=profile.sizes, kv_len=kv, repeats=profile.repeats)
        curves[str(kv)] = curve_record(table)
    result["cost_curve"] = curves
    floor = bandwidth_floor(model, spec.config, profile.kv_lens, copy_bandwidth(profile.device))
    floor["t1_over_floor"] = {kv: curves[kv]["seconds"][0] / sec for kv, sec in floor["seconds"].items()}
    result["bandwidth_floor"] = floor
    try:  # launch overhead: what a CUDA graph would save per step (graph_probe)
        sizes = [n for n in (1, 16, 64) if n <= max(profile.sizes)]
        result["cuda_graphs"] = graph_probe.probe(engine, vocab, profile.kv_lens[0], sizes, profile.repeats)
    except Exception as exc:  # a forward that cannot be captured: record why
        result["cuda_graphs"] = {"graphs": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    result["prefill"] = time_prefill(engine, vocab, tuple(x for x in profile.prefill_lengths if x < context))
    engines = {"engine:ar": engine}
    if profile.compile:
        try:
            t1 = time.perf_counter()
            compiled = verification_engine(
                model, eos_token_ids=(), context_length=context, compile_forward=True
            )
            generate(compiled, ARDrafter(), random_prompt(vocab, profile.prompt_len, 2), 8)  # compile
            table = calibrate(
                compiled,
                sizes=[s for s in profile.sizes if s <= 64],
                kv_len=profile.kv_lens[0],
                repeats=profile.repeats,
            )
            result["compile"] = {
                "compile_seconds": time.perf_counter() - t1,
                "cost_curve": {str(profile.kv_lens[0]): curve_record(table)},
            }
            engines["engine:ar+compile"] = compiled
        except Exception as exc:  # torch.compile is optional: record why it did not run
            result["compile"] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    result["graphs"], graphed = time_graphed(model, context, profile)
    if graphed is not None:
        engines["engine:ar+graphs"] = graphed
    result["ar_vs_generate"] = ar_against_generate(model, engines, profile, vocab)
    if graphed is not None:
        over = result["ar_vs_generate"]["tokens_per_s"]
        speedup = over["engine:ar+graphs"]["median"] / over["engine:ar"]["median"]
        result["graphs"]["ar_speedup_over_eager"] = speedup
        result["graphs"]["keep"] = result["graphs"]["graphs"] and speedup > 1.05
        result["graphs"]["steps"] = graphed.static.stats()
    if "engine:ar+compile" in engines:
        over = result["ar_vs_generate"]["tokens_per_s"]
        result["compile"]["ar_speedup_over_eager"] = (
            over["engine:ar+compile"]["median"] / over["engine:ar"]["median"]
        )
        result["compile"]["keep"] = result["compile"]["ar_speedup_over_eager"] > 1.05
    del engines, engine, model
    if profile.compile:
        torch._dynamo.reset()  # the compiled graphs hold the model's weights
    release(profile.device)
    return result


def time_graphed(
    model: Any, context: int, profile: Profile
) -> tuple[dict[str, Any], VerificationEngine | None]:
    """The engine with its steps replayed from CUDA graphs (`cuda_graphs=True`,
    goose.engine.forward.static_step): its cost curve at every KV length (tree sizes up to the largest
    bucket; a size between two buckets pays for the larger one, as the graphed engine does) and
    the engine itself for the AR race. Without CUDA the same padded static steps run eagerly
    (nothing to capture), which keeps the code path working; `graphs: false` says so."""
    cuda = torch.device(profile.device).type == "cuda"
    try:
        t0 = time.perf_counter()
        graphed = verification_engine(model, eos_token_ids=(), context_length=context, cuda_graphs=cuda)
        if not cuda:
            graphed.static = StaticStep(graphed, capture=False)
        sizes = [s for s in profile.sizes if s <= graphed.static.largest]
        curves = {
            str(kv): curve_record(calibrate(graphed, sizes=sizes, kv_len=kv, repeats=profile.repeats))
            for kv in profile.kv_lens
        }
    except Exception as exc:  # a forward that cannot be captured: record why
        return {"graphs": cuda, "error": f"{type(exc).__name__}: {exc}"[:2000]}, None
    result = {
        "graphs": cuda,
        "forward": graphed.forward_name,
        "seconds": time.perf_counter() - t0,
        "captures": graphed.static.captures,
        "cost_curve": curves,
    }
    if not cuda:
        result["why_no_graphs"] = (
            f"no CUDA device (the run is on {profile.device}): the padded static steps ran eagerly"
        )
    return result, graphed


def stage_timing(profile: Profile, record: dict[str, Any], path: Path) -> dict[str, Any]:
    """Each shape of the profile timed and merged into the record's timing section (the shapes of
    earlier invocations stay), the record saved after each: a call cut short keeps its shapes."""
    timing = record["stages"].setdefault("timing", {})
    for name in profile.shapes:
        timing[name] = time_shape(name, profile)
        save_record(record, path)
    return timing
