"""Hugging Face Hub checkpoints (the paper's models): the local cache first, the network only when it is
reachable, so a machine without the model fails fast with `ModelUnavailableError` saying what to do.
"""

from __future__ import annotations

import os
import socket
import ssl
from typing import Any
from urllib.parse import urlparse

import torch
from huggingface_hub import constants as hf_constants
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from goose.harness.models.devices import OFFLINE_MODELS, ModelUnavailableError


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


def unavailable(name: str, hf_id: str, cause: str) -> ModelUnavailableError:
    """The error for a checkpoint that cannot be had here: why, where to download it, the offline models."""
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


def check_hub(name: str, hf_id: str) -> bool:
    """Return True if the config is in the local HF cache, False if it must come from the network."""
    try:
        AutoConfig.from_pretrained(hf_id, local_files_only=True)
        return True
    except OSError:
        pass
    cause = _offline_cause()
    if cause:
        raise unavailable(name, hf_id, f"it is not in the local Hugging Face cache and {cause}")
    try:
        AutoConfig.from_pretrained(hf_id)
    except OSError as exc:  # gated repo, wrong id, HTTP errors
        raise unavailable(name, hf_id, f"fetching its config failed ({exc})") from exc
    return False


def load_hub(
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
            raise unavailable(name, hf_id, f"{cause} ({exc})") from exc
    try:
        return load(False)
    except OSError as exc:
        raise unavailable(
            name, hf_id, f"the local cache is incomplete and downloading failed ({exc})"
        ) from exc
