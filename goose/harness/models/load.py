"""Load a target model and its tokenizer (`load_model(**cfg.model)`, fields of `conf/model/*.yaml`) from
its source: a Hub checkpoint (goose.harness.models.hub), an offline GGUF file (goose.harness.models.gguf), or
random weights in a paper model's shape, for timing only (goose.harness.models.random_weights). Devices and
dtypes are checked before any weights load (goose.harness.models.devices).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from transformers import AutoTokenizer

from goose.harness.models.devices import parse_dtype, resolve_device
from goose.harness.models.gguf import load_gguf
from goose.harness.models.hub import check_hub, load_hub, unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelConfig:
    """Schema of a `conf/model/*.yaml` file (the Hydra group `model`)."""

    name: str  # short name used on the command line and in result rows, e.g. vicuna-7b
    hf_id: str  # Hub id; for GGUF models the upstream checkpoint the file was converted from
    source: str = "hub"  # hub | gguf
    dtype: str = "float16"  # one of DTYPES
    device: str = "cuda"  # torch device the model runs on (its input embeddings with device_map)
    device_map: str | None = None  # e.g. "auto" to shard across GPUs (vicuna-33b)
    gguf_package: str | None = None  # import name of the pip package holding the GGUF file
    gguf_file: str | None = None  # file name inside that package (or written by its assemble())
    attn_implementation: str = "sdpa"  # tree verification needs custom 4-D masks: sdpa or eager
    quick_limit: int | None = None  # CPU-sized default prompt count for `python run.py` (quick=auto)
    quick_max_new_tokens: int | None = None  # CPU-sized default max_new_tokens (quick=auto)
    # Instruction-tuned: bench.chat_template=auto applies its chat template on chat benchmarks.
    instruct: bool = False
    # A base model's plain instruction format (goose.harness.chat.BASE_PROMPT_FORMATS, e.g.
    # instruction_response), which bench.chat_template=auto puts its chat benchmarks' prompts in; null: raw.
    base_prompt_format: str | None = None
    # init=random: random weights in conf/shape/<shape or name>.yaml's shape, for timing only (its rows say
    # random_weights: true). `tokenizer`: a tokenizer folder or Hub id used instead of hf_id's.
    init: str = "pretrained"  # pretrained | random
    shape: str | None = None
    tokenizer: str | None = None


@dataclass
class LoadedModel:
    """A causal LM ready for verification; eos_token_ids: the tokenizer's first, then the generation and
    model configs' others (e.g. Llama-3-Instruct's <|end_of_text|> and <|eot_id|>)."""

    model: Any
    tokenizer: Any
    name: str
    hf_id: str
    dtype: torch.dtype
    device: torch.device
    eos_token_ids: list[int]
    context_length: int
    provenance: dict[str, Any] = field(default_factory=dict)  # into every row (random weights)
    label: str = ""  # the rows' model: `name` (the default), or `<name>-random` (never a real model's cell)

    def __post_init__(self) -> None:
        self.label = self.label or self.name


def load_model(
    name: str,
    hf_id: str,
    source: str = ModelConfig.source,
    dtype: str | torch.dtype = ModelConfig.dtype,
    device: str = ModelConfig.device,
    device_map: str | None = ModelConfig.device_map,
    gguf_package: str | None = ModelConfig.gguf_package,
    gguf_file: str | None = ModelConfig.gguf_file,
    attn_implementation: str = ModelConfig.attn_implementation,
    cache: bool = True,
    init: str = ModelConfig.init,
    shape: str | None = ModelConfig.shape,
    tokenizer: str | None = ModelConfig.tokenizer,
    **_: Any,
) -> LoadedModel:
    """Load model `name` as configured (a conf/model YAML's fields; defaults: `ModelConfig`); `cache=False`
    forces a fresh GGUF dequantisation."""
    torch_dtype = parse_dtype(dtype)
    start = time.perf_counter()
    provenance: dict[str, Any] = {}
    if init == "random":
        dev = resolve_device(device, name)
        model, tokenizer, provenance = _random_init(name, shape or name, tokenizer or hf_id, torch_dtype, dev)
    elif init != "pretrained":
        raise ValueError(f"model.init = {init!r}; valid values are: pretrained, random")
    elif source == "hub":
        local = check_hub(name, hf_id)
        resolve_device(device, name)
        model, tokenizer = load_hub(
            name, hf_id, local, torch_dtype, device_map or device, attn_implementation
        )
    elif source == "gguf":
        dev = resolve_device(device, name)
        if not (gguf_package and gguf_file):
            raise ValueError(f"model {name}: source gguf needs gguf_package and gguf_file")
        model, tokenizer = load_gguf(name, gguf_package, gguf_file, attn_implementation, cache)
        model = model.to(device=dev, dtype=torch_dtype)
    else:
        raise ValueError(f"model {name}: unknown source {source!r}; valid sources are: hub, gguf")
    model.eval().requires_grad_(False)
    log.info("loaded model %s (%s) in %.1f s", name, hf_id, time.perf_counter() - start)
    config = model.config
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=name,
        hf_id=hf_id,
        dtype=torch_dtype,
        device=model.get_input_embeddings().weight.device,
        eos_token_ids=eos_ids(tokenizer, model),
        context_length=int(getattr(config, "max_position_embeddings", None) or tokenizer.model_max_length),
        provenance=provenance,
        label=f"{name}-random" if init == "random" else name,
    )


def _random_init(
    name: str, shape: str, tokenizer_id: str, dtype: torch.dtype, device: torch.device
) -> tuple[Any, Any, dict[str, Any]]:
    """Random weights in `shape`'s shape and the tokenizer `tokenizer_id` (a folder or a cached Hub id).
    The vocabulary grows to the tokenizer's where it is larger (a stand-in tokenizer); the record
    says by how much."""
    from goose.harness.models.random_weights import load_shape, random_model

    try:
        spec = load_shape(shape)
    except ValueError as exc:
        raise ValueError(f"model.init=random (model={name}): {exc} (set model.shape)") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_id, local_files_only=True)
    except OSError as exc:
        raise unavailable(
            name, tokenizer_id, f"its tokenizer is not local ({exc}); set model.tokenizer=<folder>"
        ) from None
    shape_vocab = int(spec.config["vocab_size"])
    vocab = max(shape_vocab, len(tokenizer))
    spec = replace(spec, config={**spec.config, "vocab_size": vocab})
    model = random_model(spec, dtype, device)
    provenance = {
        "random_weights": True,
        "weights": {
            "init": "random",
            "shape": spec.name,
            "tokenizer": tokenizer_id,
            "vocab_size": vocab,
            "shape_vocab_size": shape_vocab,
            "parameters": sum(p.numel() for p in model.parameters()),
        },
    }
    return model, tokenizer, provenance


def eos_ids(tokenizer: Any, model: Any) -> list[int]:
    """The end-of-sequence ids: the tokenizer's first, then the generation and model configs' others."""
    ids: list[int] = []
    for value in (
        tokenizer.eos_token_id,
        getattr(model.generation_config, "eos_token_id", None),
        model.config.eos_token_id,
    ):
        for i in value if isinstance(value, (list, tuple)) else [value]:
            if i is not None and int(i) not in ids:
                ids.append(int(i))
    return ids
