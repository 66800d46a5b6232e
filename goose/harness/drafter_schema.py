"""One structured config per drafter class, generated from its frozen config class (`config_class`:
GooseDrafter's GooseConfig, PromptLookupDrafter's PldConfig, ...) and registered in Hydra's ConfigStore
under ``drafter/<Class>``: a method YAML pulls it in (``/drafter@drafter: <Class>``) and names only its
``_target_`` and what differs. `check_drafter` checks ``method.drafter``'s keys, and its values through the
config class, when the config is composed (goose.harness.config_schema.validate_config).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Mapping
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from goose.engine.core.drafter import Drafter

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
DRAFTER_GROUP = "drafter"


def _plain_default(value: Any) -> bool:
    """A default a YAML node can hold and give back unchanged: a scalar, None or a flat list of scalars."""
    scalar = (str, int, float, bool, type(None))
    return isinstance(value, scalar) or (
        isinstance(value, (tuple, list)) and all(isinstance(v, scalar) for v in value)
    )


def default_label(cls: type) -> str | None:
    """The row label a drafter class declares as its class attribute `name` (GooseDrafter: "goose"), which
    its constructor's `name` keyword replaces (the ablation YAMLs do); None where the constructor names the
    drafter itself (PLD: "pld", iso3 from `branching`)."""
    label = getattr(cls, "name", Drafter.name)
    return label if isinstance(label, str) and label != Drafter.name else None


def drafter_keys(cls: type) -> tuple[str, ...]:
    """The keywords a drafter class takes: `name` where it declares a default label, then its config
    class's fields."""
    config_class = getattr(cls, "config_class", None)
    fields = config_class.field_names() if config_class is not None else ()
    return (("name",) if default_label(cls) is not None else ()) + fields


def drafter_schema(cls: type, target: str) -> type:
    """The structured config of a drafter class: `_target_`, `name` (at its default label) and one field per
    field of its config class at that field's default, so that a method YAML names only what differs and a
    command line can override any field. Fields are typed Any: the config class checks the values, naming
    the field, the value and the allowed range (`check_drafter`). A field without a plain default (TR's
    template) is left out (`+method.drafter.<key>` still sets it); one without a default (iso's branching,
    REST's datastore) must be set.
    """
    specs: list[tuple[str, Any, Any]] = [("_target_", str, field(default=target))]
    label = default_label(cls)
    if label is not None:
        specs.append(("name", Any, field(default=label)))
    config_class = getattr(cls, "config_class", None)
    for f in dataclasses.fields(config_class) if config_class is not None else ():
        default = MISSING if f.default is dataclasses.MISSING else f.default
        if not _plain_default(default):
            continue
        if isinstance(default, (tuple, list)):
            specs.append((f.name, Any, field(default_factory=partial(list, default))))
        else:
            specs.append((f.name, Any, field(default=default)))
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


def _import_class(target: str) -> type:
    module_name, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module_name), name) if module_name else None
    if not isinstance(cls, type):
        raise ImportError(f"{target} is not a class")
    return cls


def check_drafter(method: str, drafter: Mapping[str, Any]) -> None:
    """`method.drafter` must name a drafter class (`_target_`) and pass only the keywords it takes
    (`drafter_keys`), every field of its config class without a default among them, with values that config
    class accepts (its own checks and messages)."""
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
    allowed = drafter_keys(cls)
    for key, value in drafter.items():
        if not str(key).startswith("_") and key not in allowed:
            raise ValueError(
                f"method.drafter.{key} = {value!r}: not a hyperparameter of {cls.__name__} (method={method}); "
                f"valid ones: {', '.join(allowed) or 'none'}"
            )
    config_class = getattr(cls, "config_class", None)
    if config_class is None:
        return
    for f in dataclasses.fields(config_class):
        if f.default is dataclasses.MISSING and f.name not in drafter:
            raise ValueError(f"method.drafter.{f.name} is missing: {cls.__name__} has no default for it")
    config_class(**{key: value for key, value in drafter.items() if key in config_class.field_names()})


def register_drafters() -> None:
    """Under group `drafter`, the structured config of every drafter class a method YAML names (config
    name: the class name)."""
    store = ConfigStore.instance()
    for target in method_targets():
        cls = _import_class(target)
        store.store(group=DRAFTER_GROUP, name=cls.__name__, node=drafter_schema(cls, target))
