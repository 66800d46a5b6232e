"""budget=auto's cost curve, cached per machine: the first process calibrates t(n) (`calibration.calibrate`)
and saves it under a fingerprint of everything the curve depends on; later processes with the same
fingerprint load it, so that two runs on one machine size their trees on one curve (two fresh calibrations
differ by a few per cent: `experiments/calibration_spread.py`).

Where: ``<root>/<fingerprint>.json``, root = ``$GOOSE_CACHE/latency`` (default
``~/.cache/goose-bench/latency``, beside the dequantised models and REST's datastores) or the directory the
run's ``budget_cache`` names; ``budget_cache: off`` neither reads nor writes (`cache_dir`).

The fingerprint (`fingerprint`): the machine (CPU model and ISA, the CPUs this process may run on, the
host name, the GPU's name and the CUDA version), the device, torch's thread count, the torch version, the
dtype, the model (its name or path, architecture, attention implementation and a digest of a sample of
every weight, `weights_digest`), the forward backend (`engine.forward_name`: lean, prepack, compile, CUDA
graphs) and the calibration's settings (sizes, kv_len, more_kv_lens, repeats, the settle rule, the
measurement version). Its digest names the file; the file holds the components as well, and a file that
does not parse, is of another cache format, or whose fingerprint or table does not match what this process
asks for is rejected with the reason (`CacheRejected`), then calibrated again and rewritten: a stale or
mismatched curve is never used silently. A curve measured while the machine was busy (more than a quarter
of its sizes unsettled, `unsettled`) serves its own run but is not saved. Writes are atomic (a temporary file in the same directory,
fsync, rename) and serialised by an advisory lock beside the file, so that processes that start together
calibrate once and the others load that curve.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from goose.engine.budget.calibration import calibration_settings, engine_latency
from goose.engine.budget.cost_model import LatencyTable
from goose.engine.core.verifier import VerificationEngine

CACHE_FORMAT = 1  # the layout of a cache file (not of the measurement: calibration.MEASUREMENT_VERSION)
CACHE_SETTINGS = ("auto", "off")  # budget_cache's keywords; anything else is a directory
# A curve more of whose sizes than this share did not settle (settle.SettleRule: their timings stayed
# broad to the rule's bounds, as when other work shares the cores) is used by its run but not cached.
MAX_UNSETTLED = 0.25


def default_root() -> Path:
    """``$GOOSE_CACHE/latency`` (default ``~/.cache/goose-bench/latency``)."""
    return (
        Path(os.environ.get("GOOSE_CACHE", Path.home() / ".cache" / "goose-bench")).expanduser() / "latency"
    )


def cache_dir(setting: str | Path | bool | None) -> Path | None:
    """The directory of cached curves that `budget_cache` names: ``auto`` -> `default_root`; ``off``,
    False or None -> None (no cache); anything else -> that directory."""
    if setting is None or setting is False or setting == "off":
        return None
    if setting == "auto":
        return default_root()
    return Path(setting).expanduser()


def check_cache_setting(name: str, value: Any) -> Any:
    """`budget_cache` must be auto, off (false) or a directory path (not an existing file); ValueError
    naming the field, the value and what is allowed otherwise."""
    allowed = "auto (the user cache), off (false: calibrate every run) or a directory path"
    if value is False or value in CACHE_SETTINGS:
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} = {value!r}: must be {allowed}")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} = {value!r}: must be {allowed}; that path is a file, not a directory")
    return value


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux; `platform` elsewhere, often just the ISA)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: torch.device) -> dict[str, Any]:
    """What of the machine a step's time depends on: CPU model and vector ISA, the CPUs this process may
    use, the host, torch's threads and version; on CUDA the GPU's name and the CUDA version."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count()
    gpu = None
    if device.type == "cuda":
        gpu = {"name": torch.cuda.get_device_name(device), "cuda": torch.version.cuda}
    return {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpus": cpus,
        "host": platform.node(),
        "gpu": gpu,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def weights_digest(model: torch.nn.Module, per_tensor: int = 64) -> str:
    """A cheap digest of the weights: every parameter's name, shape and dtype and `per_tensor` values
    evenly spaced through it (a few milliseconds for a 135M model; another checkpoint, dtype or random
    seed gives another digest)."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(f"{name}:{tuple(p.shape)}:{p.dtype}".encode())
        if p.is_meta or p.numel() == 0:
            continue
        flat = p.detach().reshape(-1)
        step = max(1, flat.numel() // per_tensor)
        h.update(flat[::step][:per_tensor].float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def model_identity(model: torch.nn.Module) -> dict[str, Any]:
    """The model as the fingerprint sees it: its name or path, architecture, attention implementation and
    `weights_digest`."""
    cfg = getattr(model, "config", None)
    return {
        "name": str(getattr(cfg, "_name_or_path", "") or ""),
        "architecture": list(getattr(cfg, "architectures", None) or [getattr(cfg, "model_type", "")]),
        "attention": str(getattr(cfg, "_attn_implementation", "") or ""),
        "weights": weights_digest(model),
    }


def fingerprint(engine: VerificationEngine, settings: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the digest naming the cache file, its components): `machine`, the dtype, `model_identity`, the
    forward backend and the calibration `settings` (`calibration.CalibrationSettings`)."""
    components = {
        "format": CACHE_FORMAT,
        "machine": machine(engine.device),
        "dtype": str(engine.dtype).replace("torch.", ""),
        "model": model_identity(engine.model),
        "forward": engine.forward_name,
        "calibration": dict(settings),
    }
    return digest(components), components


def digest(components: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()[:20]


class CacheRejected(Exception):
    """A cache file that cannot be used; the message says why."""


def _differences(found: Any, wanted: Any, path: str = "") -> list[str]:
    """The keys (dotted) at which two JSON values differ."""
    if isinstance(found, dict) and isinstance(wanted, dict):
        keys = sorted(set(found) | set(wanted))
        return [d for k in keys for d in _differences(found.get(k), wanted.get(k), f"{path}.{k}".lstrip("."))]
    return [] if found == wanted else [path or "(the whole value)"]


def read_cached(path: Path, key: str, components: Mapping[str, Any]) -> LatencyTable:
    """The table cached at `path` if it was written for exactly this fingerprint (`key`, `components`);
    otherwise CacheRejected with the reason."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise CacheRejected(
            f"not valid JSON ({exc.msg} at character {exc.pos}): an interrupted write or a corrupt file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheRejected(f"unreadable ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise CacheRejected(f"cache format {found!r}, this code reads format {CACHE_FORMAT}")
    if data.get("fingerprint") != key:
        raise CacheRejected(f"it holds fingerprint {data.get('fingerprint')!r}, not {key!r}")
    wanted = json.loads(json.dumps(components))  # as JSON holds it (tuples as lists, str keys)
    changed = _differences(data.get("components"), wanted)
    if changed:
        raise CacheRejected(f"written for another {', '.join(changed)}")
    try:
        table = LatencyTable.from_dict(data["table"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CacheRejected(f"its table does not parse ({type(exc).__name__}: {exc})") from None
    settings = wanted["calibration"]
    if table.sizes != settings["sizes"] or sorted(table.kv_seconds) != settings["more_kv_lens"]:
        raise CacheRejected(
            f"its table has sizes {table.sizes} at KV {[table.kv_len, *sorted(table.kv_seconds)]}, "
            f"not sizes {settings['sizes']} at KV {[settings['kv_len'], *settings['more_kv_lens']]}"
        )
    values = [*table.seconds, *(s for row in table.kv_seconds.values() for s in row)]
    if not all(math.isfinite(s) and s > 0 for s in values):
        raise CacheRejected("its table holds a latency that is not a positive number")
    return table


def write_cached(path: Path, table: LatencyTable, key: str, components: Mapping[str, Any]) -> None:
    """Save `table` at `path` for the fingerprint (`key`, `components`), atomically: a temporary file in
    the same directory, flushed to disk, renamed over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CACHE_FORMAT,
        "fingerprint": key,
        "components": components,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "table": table.to_dict(),
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created if missing) for the block; none where the platform
    or the directory does not allow one."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        fh = path.open("a")
    except (ImportError, OSError):
        yield
        return
    with fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def unsettled(table: LatencyTable) -> str | None:
    """Why `table` should not be cached (more than MAX_UNSETTLED of its sizes unsettled at some KV
    length), or None."""
    for kv, measured in (table.meta.get("measurement") or {}).items():
        left, total = len(measured.get("unsettled", ())), len(measured.get("rounds", ())) or 1
        if left > MAX_UNSETTLED * total:
            return (
                f"{left} of {total} sizes did not settle at KV {kv} (their timings stayed broad: other work on "
                "the machine?); the next process calibrates again"
            )
    return None


@dataclass(frozen=True)
class CurveSource:
    """Where a run's curve came from, as rows record it: `source` "cache" (loaded from `cache`) or
    "calibrated" (measured now; saved to `cache` unless None), the `fingerprint`, and why a cache file was
    not used (`rejected`) or the curve not saved (`not_saved`)."""

    source: str
    fingerprint: str
    cache: str | None = None
    rejected: str | None = None
    not_saved: str | None = None

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "fingerprint": self.fingerprint, "cache": self.cache}
        if self.rejected:
            out["cache_rejected"] = self.rejected
        if self.not_saved:
            out["cache_not_saved"] = self.not_saved
        return out


def cached_latency(
    engine: VerificationEngine, cache: str | Path | bool | None = "auto", **calibrate_kwargs: Any
) -> tuple[LatencyTable, CurveSource]:
    """The engine's t(n) from the machine's cache (`cache`: a `budget_cache` value), else calibrated now
    (`engine_latency`, with `calibrate_kwargs`) and saved there. Returns (the table, where it came from)."""
    settings = calibration_settings(**calibrate_kwargs)
    key, components = fingerprint(engine, settings)
    # kv_len named, so that engine_latency reuses this process's curve only if it has these settings
    calibrate_kwargs = {"kv_len": settings["kv_len"], **calibrate_kwargs}
    root = cache_dir(cache)
    if root is None:
        return engine_latency(engine, **calibrate_kwargs), CurveSource("calibrated", key)
    path = root / f"{key}.json"
    with _locked(root / f".{key}.lock"):
        rejected = None
        if path.exists():
            try:
                return read_cached(path, key, components), CurveSource("cache", key, str(path))
            except CacheRejected as exc:
                rejected = str(exc)
        table = engine_latency(engine, **calibrate_kwargs)
        busy = unsettled(table)
        if busy:
            return table, CurveSource("calibrated", key, None, rejected, busy)
        try:
            write_cached(path, table, key, components)
        except OSError as exc:
            return table, CurveSource("calibrated", key, None, rejected, f"cannot write {path}: {exc}")
        return table, CurveSource("calibrated", key, str(path), rejected)
