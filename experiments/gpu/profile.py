"""What one run of `make gpu-check` measures, and where: the `GPU` profile (the issue's protocol at 7B shape)
and the `CPU` one (toy sizes, the same code paths), the stages, the record's name and the targets a GPU run
is checked against. No torch and nothing of goose: experiments/gpu/carry.py reads the profile on a host
that has not unpacked its packages yet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("tests", "usedby", "timing", "lossless", "sidebyside", "projection", "figures")
GRAPHED_FP32 = "float32+graphs"  # the lossless run with cuda_graphs=true (CUDA only)
RECORD = "gpu_check.json"
# the real-weight model the lossless and sidebyside stages run (its GGUF travels: carry.GGUF)
REAL_MODEL = "smollm2-135m"
# The targets at 7B shape in fp16 (checked on a GPU run only).
TARGET_T64 = 1.3  # t(64)/t(1) at most
TARGET_FLOOR = 1.6  # t(1) over its bandwidth floor, at most (tuned engines reach 1.3-1.6 at batch 1)
TARGET_AR_OVER_GENERATE = 2.0  # engine AR tokens/s over eager transformers generate, at least
SAMPLED = "float32@T"  # the lossless run at a temperature: deterministic drafters equal AR's sample


@dataclasses.dataclass(frozen=True)
class Profile:
    """The sizes of one run: `GPU` (the issue's protocol) or `CPU` (toy sizes, same code paths)."""

    device: str
    out: str
    shapes: tuple[str, ...]
    dtype: str  # of the timing models
    kv_lens: tuple[int, ...]
    sizes: tuple[int, ...]
    repeats: int  # cost curve: timed steps per size and KV length (median)
    prefill_lengths: tuple[int, ...]
    prompt_len: int  # AR vs generate: random prompt length
    new_tokens: int
    ar_repeats: int  # interleaved rounds (median [min, max] over them)
    compile: bool
    lossless_dtypes: tuple[str, ...]
    lossless_methods: str | None  # comma-separated; None = every method
    lossless_benches: tuple[str, ...]
    lossless_limit: int
    lossless_tokens: int
    lossless_graphs: bool  # one more fp32 run with every step replayed from CUDA graphs (cuda_graphs)
    lossless_temperature: float | None  # one more fp32 run sampled at this temperature (same seed as AR)
    half_methods: str | None  # the methods of the fp16/bf16 lossless runs (None: lossless_methods)
    lossless_jobs: int  # lossless_stress processes run side by side (the runs' methods dealt over them)
    usedby_model: str  # `python run.py model=<this> model.init=random ...`: the used-by command
    usedby_overrides: tuple[str, ...]
    usedby_methods: str
    usedby_limit: int
    usedby_tokens: int
    # sidebyside: SmolLM2-135M's real weights, every contender in wall clock (experiments/gpu/side_by_side.py)
    side_dtypes: tuple[str, ...]
    side_methods: str  # engine contenders besides AR (experiments.bench --methods)
    side_hf: str  # transformers contenders (experiments.bench --hf; "" none)
    side_benches: tuple[str, ...]
    side_limit: int
    side_tokens: int
    side_repeats: int
    side_graphs: bool  # cuda_graphs=true (CUDA only)


GPU = Profile(
    device="cuda",
    out="results/gpu/{gpu}",  # {gpu}: the device's name, e.g. nvidia-h100-80gb-hbm3
    shapes=("vicuna-7b", "llama3-8b"),
    dtype="float16",
    kv_lens=(512, 2048),
    sizes=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256),
    repeats=5,
    prefill_lengths=(128, 512, 2048),
    prompt_len=128,
    new_tokens=128,
    ar_repeats=3,
    compile=False,
    lossless_dtypes=("float32", "bfloat16"),
    lossless_methods=None,
    lossless_benches=("humaneval", "mtbench", "gsm8k"),
    lossless_limit=3,
    lossless_tokens=128,
    lossless_graphs=False,
    lossless_temperature=0.7,
    half_methods=None,
    lossless_jobs=9,
    usedby_model="vicuna-7b",
    usedby_overrides=(),
    usedby_methods="ar,pld,goose",
    usedby_limit=2,
    usedby_tokens=128,
    side_dtypes=("float32", "bfloat16"),
    side_methods="pld,goose:auto,hw_tree:auto,suffix:auto,opt_tree:auto,tr:auto",
    side_hf="greedy,pld",
    side_benches=("humaneval", "gsm8k", "mtbench"),
    side_limit=5,
    side_tokens=128,
    side_repeats=2,
    side_graphs=True,
)


CPU = Profile(
    device="cpu",
    out="outputs/gpu-check-cpu",
    shapes=("toy-llama", "toy-qwen3"),
    dtype="float32",
    kv_lens=(64, 128),
    sizes=(1, 2, 4, 8, 16, 32),
    repeats=2,
    prefill_lengths=(32, 128),
    prompt_len=32,
    new_tokens=16,
    ar_repeats=2,
    compile=False,
    lossless_dtypes=("float32", "bfloat16"),
    lossless_methods="pld,goose",
    lossless_benches=("humaneval",),
    lossless_limit=1,
    lossless_tokens=16,
    lossless_graphs=False,
    lossless_temperature=0.7,
    half_methods=None,
    lossless_jobs=3,
    usedby_model="vicuna-7b",
    usedby_overrides=("model.shape=toy-llama", "model.device=cpu", "model.dtype=float32"),
    usedby_methods="ar,pld,goose",
    usedby_limit=1,
    usedby_tokens=16,
    side_dtypes=("float32",),
    side_methods="pld,hw_tree:auto",
    side_hf="",
    side_benches=("humaneval",),
    side_limit=1,
    side_tokens=16,
    side_repeats=2,
    side_graphs=False,
)


def relative(path: Path) -> str:
    """`path` relative to the repository where it lies inside it (records travel between machines)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path.resolve())


def folder_name(gpu: str) -> str:
    """A GPU's name as a folder name (`NVIDIA H100 80GB HBM3` -> `nvidia-h100-80gb-hbm3`), so that records
    of different GPUs sit side by side under results/gpu/."""
    return "-".join("".join(c if c.isalnum() else " " for c in gpu.lower()).split()) or "cuda"
