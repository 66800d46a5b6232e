"""From a configuration to the objects of a run: the one place where `run.py` and `experiments/` turn `conf/`
plus overrides into a validated config, a drafter factory, a model with its engine, and the prompts:

    cfg = compose_config(["model=smollm2-135m", "method=goose", "bench.limit=5"])
    drafter = build_drafter(cfg); loaded, engine = load_engine(cfg)
    spec, prompts, source = benchmark_prompts(cfg, effective_sizes(cfg)[0])

Errors a user can fix raise `UserError` (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from goose.engine.core.drafter import Drafter
from goose.engine.core.verifier import VerificationEngine
from goose.engine.core.verify.rules import check_verifier
from goose.harness.benchmarks import (
    BenchmarkError,
    BenchmarkSpec,
    Prompt,
    file_in_data_dir,
    load_benchmark,
    resolve_source,
)
from goose.harness.chat import PromptForm, decide_chat_template
from goose.harness.config_schema import validate_config  # also registers the schema config.yaml uses
from goose.harness.models import LoadedModel, ModelUnavailableError, load_model
from goose.harness.runner import warm_up

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
WARM_UP_TEXT = "Warm-up: the quick brown fox jumps over the lazy dog."


class UserError(Exception):
    """An error the user can fix from the command line; printed as one paragraph."""


def compose_config(overrides: Sequence[str] = (), validate: bool = True) -> DictConfig:
    """conf/config.yaml composed with Hydra command-line style `overrides`, validated like a
    `run.py` job (unknown keys, types, ranges, drafter keys) unless `validate` is False."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=list(overrides))
    if validate:
        check_config(cfg)
    return cfg


def check_config(cfg: DictConfig) -> None:
    """`validate_config`, with its ValueError turned into a UserError."""
    try:
        validate_config(cfg)
    except ValueError as exc:
        raise UserError(f"invalid configuration: {exc}") from None


def effective_sizes(cfg: DictConfig) -> tuple[int | None, int]:
    """(prompt limit, max_new_tokens) after applying the quick defaults of CPU-sized models."""
    quick = cfg.get("quick", "auto")
    limit, max_new = cfg.bench.get("limit"), cfg.get("max_new_tokens")
    has_quick = cfg.model.get("quick_limit") is not None
    if quick is True or (quick == "auto" and has_quick):
        if limit is None:
            limit = cfg.model.get("quick_limit")
        if max_new is None:
            max_new = cfg.model.get("quick_max_new_tokens")
    if max_new is None:
        max_new = int(cfg.bench.max_new_tokens)
    return (None if limit is None else int(limit)), int(max_new)


def build_drafter(cfg: DictConfig) -> Drafter:
    """The drafter of `cfg.method.drafter`, checked against `sampling.verifier`; a bad value raises a
    UserError."""
    try:
        drafter = instantiate(cfg.method.drafter, _convert_="all")
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        raise UserError(f"method={cfg.method.name}: invalid configuration: {cause}") from None
    check_drafter_verifier(cfg, drafter)
    return drafter


def check_drafter_verifier(cfg: DictConfig, drafter: Drafter) -> None:
    """`sampling.verifier` must apply to the drafter's drafts (goose.engine.core.verify.rules)."""
    node = cfg.get("sampling") or {}
    try:
        check_verifier(
            str(node.get("verifier", "auto")),
            samples_drafts=bool(drafter.samples_drafts),
            shape=drafter.draft_shape(),
            temperature=float(node.get("temperature", 0.0)),
            method=str(cfg.method.name),
        )
    except ValueError as exc:
        raise UserError(f"invalid configuration: {exc}") from None


def drafter_factory(cfg: DictConfig) -> Callable[[], Drafter]:
    """A zero-argument factory of `cfg.method.drafter`, for callers that need several fresh drafters;
    builds one drafter up front so a bad value fails before the model loads.
    """

    def make() -> Drafter:
        return build_drafter(cfg)

    make()
    return make


def benchmark_prompts(cfg: DictConfig, limit: int | None) -> tuple[BenchmarkSpec, list[Prompt], str]:
    """(the benchmark's spec, its first `limit` prompts, the source used: hub, local or file), all
    from `cfg.bench` (conf/bench/<name>.yaml plus overrides) and `cfg.data_dir`."""
    try:
        spec = BenchmarkSpec.from_config(OmegaConf.to_container(cfg.bench, resolve=True))
        data_file = spec.data_file or file_in_data_dir(spec, cfg.get("data_dir"))
        source = resolve_source(spec, data_file, spec.source)
        return spec, load_benchmark(spec, limit, data_file, source=source), source
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None


def chat_template_decision(cfg: DictConfig, spec: BenchmarkSpec, tokenizer: Any) -> tuple[PromptForm, str]:
    """(the prompt form: the tokenizer's chat template, raw, or a base model's `model.base_prompt_format`;
    why) for `bench.chat_template` = auto | true | false (goose.harness.chat.decide_chat_template); needs
    the tokenizer (does it have a template?)."""
    try:
        return decide_chat_template(
            spec.chat_template,
            model=cfg.model.name,
            instruct=bool(cfg.model.get("instruct", False)),
            bench=spec.name,
            chat_bench=spec.chat,
            tokenizer=tokenizer,
            base_format=cfg.model.get("base_prompt_format"),
        )
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None


_ENGINES: dict[str, tuple[LoadedModel, VerificationEngine]] = {}


def engine_lean(cfg: DictConfig) -> bool | None:
    """The engine's `lean` setting: False under compat=authors (the official code's `transformers` numerics),
    else None.
    """
    return False if cfg.method.drafter.get("compat") == "authors" else None


def engine_prepack(cfg: DictConfig) -> bool | None:
    """The engine's `prepack` setting (goose.engine.forward.packed_linear): `prepack: auto` -> None."""
    value = cfg.get("prepack", "auto")
    return None if value == "auto" else bool(value)


def load_engine(cfg: DictConfig) -> tuple[LoadedModel, VerificationEngine]:
    """The model of `cfg.model` and its verification engine, warmed up and cached per process (one model at a
    time), configured by `engine_lean`, `engine_prepack`, `compile` and `cuda_graphs`.
    """
    spec = OmegaConf.to_container(cfg.model, resolve=True)
    key = repr((sorted(spec.items()), *engine_settings(cfg).values()))
    if key not in _ENGINES:
        _ENGINES.clear()
        try:
            loaded = load_model(**spec)
        except (ModelUnavailableError, ValueError) as exc:
            raise UserError(str(exc)) from None
        engine = build_engine(
            loaded.model, loaded.tokenizer, loaded.eos_token_ids, loaded.context_length, cfg
        )
        _ENGINES[key] = (loaded, engine)
    return _ENGINES[key]


def engine_settings(cfg: DictConfig) -> dict[str, Any]:
    """The `VerificationEngine` keywords that `cfg` sets: lean, prepack, compile_forward, cuda_graphs."""
    return {
        "lean": engine_lean(cfg),
        "prepack": engine_prepack(cfg),
        "compile_forward": bool(cfg.get("compile", False)),
        "cuda_graphs": bool(cfg.get("cuda_graphs", False)),
    }


def build_engine(
    model: Any, tokenizer: Any, eos_token_ids: list[int], context_length: int, cfg: DictConfig
) -> VerificationEngine:
    """The verification engine of a loaded causal LM (in eval mode) with `engine_settings(cfg)`,
    warmed up on a short text."""
    try:
        engine = VerificationEngine(model, eos_token_ids, context_length, **engine_settings(cfg))
    except ValueError as exc:  # prepack, compile or cuda_graphs set where it cannot run
        raise UserError(str(exc)) from None
    warm_up(engine, tokenizer(WARM_UP_TEXT).input_ids)
    return engine


def release_engines() -> None:
    """Drop the cached model (e.g. before loading the same model in another dtype)."""
    _ENGINES.clear()
