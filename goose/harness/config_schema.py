"""Structured-config schema of run.py (Hydra ConfigStore) and `validate_config`, so a typo fails before a
model loads: at composition Hydra refuses unknown keys and wrong types (conf/config.yaml's optional
``schema@_global_: goose_bench``); `validate_config` (compose_config and the job) checks ``+`` keys, the
fields' `check` ranges, ``bench`` by `BenchmarkSpec.from_config` (its own field checks, the one place they
live) and ``method.drafter`` by its config dataclass (goose.harness.drafter_schema: one structured config per
drafter). `ModelSchema` and `BenchSchema` are generated from `goose.harness.models.load.ModelConfig` and
`goose.harness.benchmarks.spec.BenchmarkSpec`, so schema and loader cannot drift.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from goose.engine.batch.serve import BATCH_STATES
from goose.engine.budget.latency_cache import check_cache_setting
from goose.engine.core.verify.rules import VERIFIERS
from goose.harness.benchmarks.spec import BenchmarkSpec, HubSource, PackageFile, RecordFilter
from goose.harness.chat import check_base_prompt_format
from goose.harness.drafter_schema import check_drafter, register_drafters
from goose.harness.models.devices import DTYPES
from goose.harness.models.load import ModelConfig
from goose.validation import check_bool, check_choice, check_float, check_int, check_int_list, check_str

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
    "base_prompt_format": check_base_prompt_format,
}


def _loose(hint: Any) -> Any:
    """An annotation OmegaConf can hold: a tuple as a list, a union of several types as Any."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = len(args) < len(typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = args[0] if len(args) == 1 else Any
    if typing.get_origin(hint) is tuple:
        hint = list[Any]
    return hint | None if optional and hint is not Any else hint


def _schema_from(
    cls: type, name: str, checks: dict[str, Any], nested: dict[type, type] | None = None, null: bool = False
) -> type:
    """A mutable copy of dataclass `cls` (OmegaConf makes frozen ones read-only) whose fields carry the
    `checks` as metadata; a field of a class in `nested` becomes that schema, an all-null mapping by
    default (an override cannot merge into a null node); `null`: every field optional, null by default."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        hint = _loose(hints[f.name])
        inner = [a for a in typing.get_args(hints[f.name]) if a in (nested or {})]
        if inner:
            node = nested[inner[0]]
            specs.append((f.name, node | None, field(default_factory=node)))
            continue
        default = MISSING if f.default is dataclasses.MISSING else f.default
        if null:
            hint, default = (
                (hint if hint is Any or type(None) in typing.get_args(hint) else hint | None),
                None,
            )
        specs.append((f.name, hint, _checked(default, checks.get(f.name))))
    schema = dataclasses.make_dataclass(name, specs)
    schema.__module__ = __name__  # picklable by reference (Hydra's joblib launcher ships the ConfigStore)
    return schema


ModelSchema = _schema_from(ModelConfig, "ModelSchema", _MODEL_CHECKS)
ModelSchema.__doc__ = "Schema of conf/model/*.yaml: goose.harness.models.load.ModelConfig with ranges."
# bench.hub / .package / .filter (goose.harness.benchmarks.spec.HubSource, PackageFile, RecordFilter):
# mappings with null leaves; their first field null = none (hub.split null = "train").
HubSchema = _schema_from(HubSource, "HubSchema", {}, null=True)
PackageSchema = _schema_from(PackageFile, "PackageSchema", {}, null=True)
FilterSchema = _schema_from(RecordFilter, "FilterSchema", {}, null=True)
_NESTED_SCHEMAS = {HubSource: HubSchema, PackageFile: PackageSchema, RecordFilter: FilterSchema}
BenchSchema = _schema_from(BenchmarkSpec, "BenchSchema", {}, _NESTED_SCHEMAS)
BenchSchema.__doc__ = """Schema of conf/bench/*.yaml: goose.harness.benchmarks.spec.BenchmarkSpec's fields and
types; the values are checked by `BenchmarkSpec.from_config` (`_check_bench`)."""


def _check_bench(name: str, value: Any) -> BenchmarkSpec:
    """The bench node, checked where its fields are defined (keys, types, ranges, the checks across fields);
    a BenchmarkError (a ValueError) names the field, the value and what is allowed."""
    return BenchmarkSpec.from_config(value)


@dataclass
class MethodSchema:
    """Schema of conf/method/*.yaml. `drafter` is the constructor call (``_target_`` plus keyword
    arguments); `validate_config` checks its keys and values against the drafter's config class."""

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
    verifier: str = _checked(
        "auto", partial(check_choice, choices=VERIFIERS, why="how drafts that carry q are verified")
    )


def _check_quick(name: str, value: Any) -> Any:
    return check_choice(name, value, ("auto", True, False), why="auto uses the model's quick_* values")


def _check_kv_lens(name: str, value: Any) -> Any:
    why = "cache lengths the cost curve is also measured at; [] = KV 256 only"
    return check_int_list(name, value, low=1, distinct=False, why=why) if len(value) else value


def _check_prepack(name: str, value: Any) -> Any:
    return check_choice(name, value, ("auto", True, False), why="auto prepacks wherever oneDNN can")


@dataclass
class GooseBenchConfig:
    """Schema of conf/config.yaml (the composed configuration of one run)."""

    model: ModelSchema = MISSING  # type: ignore[valid-type]
    bench: BenchSchema = _checked(MISSING, _check_bench)  # type: ignore[valid-type]
    method: MethodSchema = MISSING
    max_new_tokens: int | None = _checked(None, partial(check_int, low=0, why="null = the benchmark's value"))
    quick: Any = _checked("auto", _check_quick)
    out_dir: str = "results/runs"
    allow_mixed_code: Any = _checked(
        False, partial(check_bool, why="resume a results file that rows of other code wrote")
    )
    data_dir: str | None = None
    experiment: str | None = "adhoc"
    threads: int | None = _checked(None, partial(check_int, low=1, why="torch intra-op threads"))
    concurrency: int = _checked(
        1,
        partial(
            check_int, low=1, high=256, why="requests verified together (continuous batching); 1 = batch 1"
        ),
    )
    batch_state: str = _checked(
        "isolated",
        partial(check_choice, choices=BATCH_STATES, why="run-long drafter state across a batch's requests"),
    )
    wandb: str = _checked("offline", partial(check_choice, choices=("online", "offline", "disabled")))
    wandb_verbose: bool = False  # W&B's own console output; by default only a line saying where the run went
    budget: str = _checked(
        "auto",
        partial(
            check_choice, choices=("fixed", "auto"), why="auto sizes each tree to this machine's cost curve"
        ),
    )
    budget_profile: str | None = None  # budget=auto: a saved latency table (JSON) instead of calibrating
    budget_kv_lens: list[int] = field(default_factory=list, metadata={"check": _check_kv_lens})
    # budget=auto: where this machine's calibrated curves are cached (goose.engine.budget.latency_cache)
    budget_cache: Any = _checked("auto", check_cache_setting)
    budget_in_run_cost: Any = _checked(
        False, partial(check_bool, why="budget=auto: correct the cost curve by the run's measured steps")
    )
    budget_gate: Any = _checked(
        False,
        partial(check_bool, why="budget=auto: plain AR steps while drafting does not pay, probes to return"),
    )
    budget_price_bookkeeping: Any = _checked(
        True, partial(check_bool, why="budget=auto: a tree's measured bookkeeping added to its cost")
    )
    budget_acceptance_prior: Any = _checked(
        "auto",
        partial(
            check_str, why="budget=auto: auto (the model's calibrated prior), hand, or a prior's name or file"
        ),
    )
    prepack: Any = _checked("auto", _check_prepack)
    compile: Any = _checked(
        False, partial(check_bool, why="the verification steps' lean forward through torch.compile")
    )
    cuda_graphs: Any = _checked(
        False, partial(check_bool, why="the verification steps replayed from CUDA graphs (CUDA only)")
    )
    sampling: SamplingSchema = field(default_factory=SamplingSchema)


def register() -> None:
    """The run's schema, and under group `drafter` one structured config per drafter class that a method
    YAML names (config name: the class name; a method YAML pulls it in with ``/drafter@drafter: <Class>``).
    """
    ConfigStore.instance().store(group=SCHEMA_GROUP, name=SCHEMA_NAME, node=GooseBenchConfig)
    register_drafters()


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
    unknown keys, missing required keys, types, and each field's `check` metadata (which, for a node
    such as ``bench``, replaces the recursion)."""
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
        if "check" in f.metadata:
            f.metadata["check"](qual, value)
        elif len(inner) == 1 and dataclasses.is_dataclass(inner[0]):  # a node, or an optional node
            check_node(qual, value, inner[0])
        else:
            _check_type(qual, value, hint)


def validate_config(cfg: DictConfig | Mapping[str, Any]) -> None:
    """Raise ValueError (field, value, allowed range) unless the composed config is valid."""
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    plain.pop("hydra", None)
    check_node("", plain, GooseBenchConfig)
    check_drafter(str(plain["method"].get("name")), plain["method"]["drafter"])
    if plain.get("batch_state", "isolated") != "isolated" and int(plain.get("concurrency", 1)) == 1:
        raise ValueError(
            f"batch_state = {plain['batch_state']!r} needs concurrency > 1: at concurrency 1 one drafter runs "
            "the cell's prompts in turn and carries its run-long state from one to the next"
        )


register()
