"""Random-weight models with the exact shapes of the paper's targets, for timing where the weights
cannot be had (no Hub on the GPU machines): `conf/shape/<name>.yaml` names an architecture and the
`transformers` config fields that fix every tensor's shape (vocabulary, hidden and MLP widths,
layers, attention and KV heads, head dim).

What such a model is good for: a verification step's latency t(n) and the engine's tokens/s
against `transformers` `generate`, which depend on the shapes and the hardware, not on the values
of the weights. What it is not good for: acceptance (τ), whose every figure must come from a real
model. Every record built on one says `random_weights: true`.

Weights are initialised on the target device (a 7B model's init on a GPU takes seconds; on a CPU
it would take minutes), with the `transformers` default init (normal, std = initializer_range), in
the requested dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

SHAPE_DIR = Path(__file__).resolve().parents[2] / "conf" / "shape"
ARCHITECTURES = ("llama", "qwen3")


@dataclass(frozen=True)
class ShapeSpec:
    """One `conf/shape/*.yaml`: an architecture and the config fields that fix its shapes."""

    name: str
    architecture: str  # llama | qwen3
    config: dict[str, Any]
    paper_model: str | None = None  # the conf/model/<name>.yaml whose shape this is

    def hf_config(self):
        """The `transformers` config (LlamaConfig / Qwen3Config) with sdpa attention."""
        from transformers import LlamaConfig, Qwen3Config

        cls = {"llama": LlamaConfig, "qwen3": Qwen3Config}[self.architecture]
        cfg = cls(**self.config)
        cfg._attn_implementation = "sdpa"
        return cfg

    def parameter_count(self) -> int:
        """Parameters of the model, counted on the meta device (no memory, no init)."""
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(self.hf_config())
        return sum(p.numel() for p in model.parameters())


def shape_names() -> list[str]:
    return sorted(p.stem for p in SHAPE_DIR.glob("*.yaml"))


def load_shape(name: str) -> ShapeSpec:
    """conf/shape/<name>.yaml; an unknown name lists the valid ones."""
    path = SHAPE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown shape {name!r}; valid shapes are: {', '.join(shape_names())}")
    data = yaml.safe_load(path.read_text())
    arch = data.get("architecture")
    if arch not in ARCHITECTURES:
        raise ValueError(f"{path}: architecture {arch!r} is not one of {', '.join(ARCHITECTURES)}")
    return ShapeSpec(
        name=data["name"], architecture=arch, config=dict(data["config"]), paper_model=data.get("paper_model")
    )


def random_model(
    spec: ShapeSpec, dtype: torch.dtype, device: torch.device | str, seed: int = 0
) -> torch.nn.Module:
    """A model of `spec`'s shape with random weights, built directly on `device` in `dtype`, in eval
    mode with gradients off."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(spec.hf_config(), dtype=dtype)
    return model.eval().requires_grad_(False)
