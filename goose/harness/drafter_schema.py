"""One structured config per drafter class, generated from its config dataclass (`config_class`: Goose's
GooseConfig, the baselines' Eagle2Config, IsotropicConfig, ...) or its signature, registered in Hydra's
ConfigStore under ``drafter/<Class>``: a method YAML pulls it in (``/drafter@drafter: <Class>``) and names
only its ``_target_`` and what differs, and `check_drafter` checks ``method.drafter``'s keys and ranges when
the config is composed (goose.harness.config_schema.validate_config).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Mapping
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
DRAFTER_GROUP = "drafter"


def _plain_default(value: Any) -> bool:
    """A default a YAML node can hold and give back unchanged: a scalar, None or a flat list of scalars."""
    scalar = (str, int, float, bool, type(None))
    return isinstance(value, scalar) or (
        isinstance(value, (tuple, list)) and all(isinstance(v, scalar) for v in value)
    )


def drafter_schema(cls: type, target: str) -> type | None:
    """The structured config of a drafter class: `_target_` and one field per keyword it accepts, with the
    default of its config dataclass (`config_class`) or signature, so that a method YAML names only what
    differs and a command line can override any field. Fields are typed Any: values are checked, with the
    field, the value and the allowed range, by `validate_config` and the drafter's config. Parameters
    without a plain default (e.g. TR's template) are left out (`+method.drafter.<key>` still sets them).
    """
    allowed = drafter_parameters(cls)
    if allowed is None:
        return None
    config_class = getattr(cls, "config_class", None)
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)} if config_class else {}
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.default is not p.empty:
            defaults[p.name] = p.default
    specs: list[tuple[str, Any, Any]] = [("_target_", str, field(default=target))]
    for name in allowed:
        default = defaults.get(name, MISSING)
        if default is dataclasses.MISSING:
            default = MISSING
        if not _plain_default(default):
            continue
        if isinstance(default, (tuple, list)):
            specs.append((name, Any, field(default_factory=partial(list, default))))
        else:
            specs.append((name, Any, field(default=default)))
    schema = dataclasses.make_dataclass(f"{cls.__name__}Schema", specs)
    schema.__module__ = __name__  # picklable by reference (Hydra's joblib launcher ships the ConfigStore)
    globals()[schema.__name__] = schema
    return schema


def method_targets(conf_dir: Path = CONF_DIR) -> list[str]:
    """The drafter classes the shipped method YAMLs name (`_target_:` lines of conf/method/)."""
    found = re.findall(
        r"^\s*_target_:\s*([\w.]+)",
        "\n".join(p.read_text() for p in sorted((conf_dir / "method").glob("*.yaml"))),
        flags=re.MULTILINE,
    )
    return sorted(set(found))


def drafter_parameters(cls: type) -> tuple[str, ...] | None:
    """Keyword arguments the drafter class accepts, or None if it takes arbitrary ones (which the
    constructor then checks itself). A drafter with a `config_class` (GooseDrafter: GooseConfig) takes that
    dataclass's fields besides its named parameters."""
    params = inspect.signature(cls.__init__).parameters.values()
    named = tuple(
        p.name for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    )
    if any(p.kind is p.VAR_KEYWORD for p in params):
        config_class = getattr(cls, "config_class", None)
        if config_class is not None:
            return named + tuple(f for f in config_class.field_names() if f not in named)
        return None
    return named


def _import_class(target: str) -> type:
    module_name, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module_name), name) if module_name else None
    if not isinstance(cls, type):
        raise ImportError(f"{target} is not a class")
    return cls


def check_drafter(method: str, drafter: Mapping[str, Any]) -> None:
    """`method.drafter` must name a class (`_target_`), pass only keywords it accepts and, where the class
    has a `config_class`, values that config accepts."""
    target = drafter.get("_target_")
    if not isinstance(target, str) or not target:
        raise ValueError(
            f"method.drafter._target_ = {target!r}: must name a drafter class, e.g. goose.method.drafter.GooseDrafter"
        )
    try:
        cls = _import_class(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(
            f"method.drafter._target_ = {target!r}: cannot be imported ({type(exc).__name__}: {exc})"
        ) from None
    allowed = drafter_parameters(cls)
    if allowed is None:
        return
    for key, value in drafter.items():
        if not str(key).startswith("_") and key not in allowed:
            raise ValueError(
                f"method.drafter.{key} = {value!r}: not a hyperparameter of {cls.__name__} (method={method}); "
                f"valid ones: {', '.join(allowed)}"
            )
    config_class = getattr(cls, "config_class", None)
    if config_class is not None:  # the ranges, with the drafter's own messages (its config's checks)
        names = config_class.field_names()
        config_class(**{key: value for key, value in drafter.items() if key in names})


def register_drafters() -> None:
    """Under group `drafter`, the structured config of every drafter class a method YAML names (config
    name: the class name)."""
    store = ConfigStore.instance()
    for target in method_targets():
        cls = _import_class(target)
        schema = drafter_schema(cls, target)
        if schema is not None:
            store.store(group=DRAFTER_GROUP, name=cls.__name__, node=schema)
