"""Random-weight models in the exact shapes of the paper's targets (`conf/shape/<name>.yaml`), for timing
where the weights cannot be had: a step's latency t(n) depends on shapes, not weights. Acceptance (τ) does
depend on them, so it must come from a real model; every record built on one says `random_weights: true`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

SHAPE_DIR = Path(__file__).resolve().parents[3] / "conf" / "shape"
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
    """A model of `spec`'s shape with random weights, built on `device` (fast on a GPU), in eval mode."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(spec.hf_config(), dtype=dtype)
    return model.eval().requires_grad_(False)
