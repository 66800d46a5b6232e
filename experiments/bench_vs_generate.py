"""Wall-clock comparison, measured side by side in one process on the same prompts:

- engine AR vs transformers `generate(do_sample=False)`
- engine methods (PLD, Goose, ...) vs transformers `generate(prompt_lookup_num_tokens=10)`
- every engine method vs engine AR (speedup)

Each repeat runs every contender on every prompt, interleaved prompt by prompt, so that drifts of
the machine's speed hit all contenders alike. Reported: tokens/s per contender per repeat, and
ratios as median [min, max] over the repeats.

    python -m experiments.bench_vs_generate --bench humaneval --limit 10 --max-new-tokens 128 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

from goose.benchmarks import load_benchmark
from goose.decode import generate
from goose.engine import VerificationEngine
from goose.models import load_model
from goose.runner import warm_up

CONF = Path(__file__).resolve().parents[1] / "conf"


def method_factory(name: str, overrides: list[str]) -> Callable:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="config", overrides=[f"method={name}", *overrides])
    return lambda: instantiate(cfg.method.drafter, _convert_="all")


def model_config(name: str) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="config", overrides=[f"model={name}"])
    return OmegaConf.to_container(cfg.model, resolve=True)


def hf_generate(model, ids: list[int], max_new: int, eos: list[int], **kw) -> tuple[list[int], float]:
    x = torch.tensor([ids], device=model.device)
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    out = model.generate(
        x,
        attention_mask=torch.ones_like(x),
        do_sample=False,
        max_new_tokens=max_new,
        eos_token_id=eos,
        pad_token_id=eos[0],
        **kw,
    )
    sync()
    return out[0, len(ids) :].tolist(), time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default=None, help="override the model's dtype (e.g. bfloat16)")
    ap.add_argument("--bench", default="humaneval")
    ap.add_argument("--data-file", default=None)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default="pld,goose", help="engine methods besides AR (config names)")
    ap.add_argument("--hf", default="greedy,pld", help="transformers contenders: greedy, pld")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    spec = model_config(args.model)
    if args.dtype:
        spec["dtype"] = args.dtype
    loaded = load_model(**spec)
    tok, model = loaded.tokenizer, loaded.model
    eos = loaded.eos_token_ids
    prompts = load_benchmark(args.bench, args.limit, args.data_file)
    prompt_ids = [tok(p.text).input_ids for p in prompts]
    engine = VerificationEngine(model, eos, loaded.context_length)
    warm_up(engine, prompt_ids[0])
    hf_generate(model, prompt_ids[0][:16], 4, eos)

    contenders: dict[str, Callable[[list[int]], tuple[list[int], float]]] = {}
    methods = ["ar"] + [m for m in args.methods.split(",") if m and m != "ar"]
    for m in methods:
        make = method_factory(m, [])

        def run(ids, make=make):
            g = generate(engine, make(), ids, args.max_new_tokens)
            return g.output_ids, g.wall_time_s

        contenders[f"engine:{m}"] = run
    hf_kw = {"greedy": {}, "pld": {"prompt_lookup_num_tokens": 10}}
    for h in [h for h in args.hf.split(",") if h]:
        contenders[f"hf:{h}"] = lambda ids, kw=hf_kw[h]: hf_generate(model, ids, args.max_new_tokens, eos, **kw)

    per_repeat: list[dict[str, float]] = []
    identical: dict[str, int] = dict.fromkeys(contenders, 0)
    for rep in range(args.repeats):
        tokens = dict.fromkeys(contenders, 0)
        seconds = dict.fromkeys(contenders, 0.0)
        for ids in prompt_ids:
            ref = None
            for name, fn in contenders.items():
                out, dt = fn(ids)
                tokens[name] += len(out)
                seconds[name] += dt
                if name == "engine:ar":
                    ref = out
                elif rep == 0 and out == ref:
                    identical[name] += 1
        per_repeat.append({n: tokens[n] / seconds[n] for n in contenders})
        print(f"repeat {rep + 1}: " + ", ".join(f"{n} {v:.1f} tok/s" for n, v in per_repeat[-1].items()))

    def ratio(a: str, b: str) -> tuple[float, float, float]:
        vals = [r[a] / r[b] for r in per_repeat]
        return statistics.median(vals), min(vals), max(vals)

    pairs = []
    if "hf:greedy" in contenders:
        pairs.append(("engine:ar", "hf:greedy"))
    for m in methods[1:]:
        pairs.append((f"engine:{m}", "engine:ar"))
        if "hf:pld" in contenders:
            pairs.append((f"engine:{m}", "hf:pld"))
    if "hf:pld" in contenders and "hf:greedy" in contenders:
        pairs.append(("hf:pld", "hf:greedy"))
    print(
        f"\nmodel={args.model} dtype={loaded.dtype} bench={args.bench} prompts={len(prompt_ids)} "
        f"max_new_tokens={args.max_new_tokens} repeats={args.repeats} threads={torch.get_num_threads()}"
    )
    print("tokens/s median [min, max]:")
    for n in contenders:
        vals = [r[n] for r in per_repeat]
        print(f"  {n:16s} {statistics.median(vals):7.1f} [{min(vals):.1f}, {max(vals):.1f}]")
    print("ratios median [min, max]:")
    summary = {}
    for a, b in pairs:
        med, lo, hi = ratio(a, b)
        summary[f"{a} / {b}"] = [med, lo, hi]
        print(f"  {a:16s} / {b:12s} {med:.3f} [{lo:.3f}, {hi:.3f}]")
    print("outputs identical to engine AR (repeat 1): " + ", ".join(f"{n} {identical[n]}/{len(prompt_ids)}" for n in contenders if n != "engine:ar"))
    if args.out:
        Path(args.out).write_text(
            json.dumps({"args": vars(args), "per_repeat": per_repeat, "ratios": summary, "identical": identical}, indent=1)
        )


if __name__ == "__main__":
    main()
