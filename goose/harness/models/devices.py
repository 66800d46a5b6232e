"""Where a model runs and in what precision: `model.device` checked against this machine's torch devices
before any weights load, and `model.dtype` names mapped to torch dtypes. The errors name what is here and
the fix; `ModelUnavailableError` is the one error a job prints as a paragraph (exit status 2).
"""

from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
OFFLINE_MODELS: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")


class ModelUnavailableError(RuntimeError):
    """The requested checkpoint cannot be obtained on this machine (not cached, no network, gated...)."""


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
