"""From a configuration to the objects of a run: the one place where `run.py` and `experiments/` turn `conf/`
plus overrides into a validated config, a drafter factory, a model with its engine, and the prompts:

    cfg = compose_config(["model=smollm2-135m", "method=goose", "bench.limit=5"])
    drafter = build_drafter(cfg); loaded, engine = load_engine(cfg)
    spec, prompts, source = benchmark_prompts(cfg, effective_sizes(cfg)[0])

Each of those reads its part of the config and hands plain values to its twin (`new_drafter`, `engine_for`,
`load_prompts`, `prompt_form`). A run.py job reads its config once, into `RunSettings`, and calls the twins
with its values, so that the config goes no further than the job's edge.
Errors a user can fix raise `UserError` (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from goose.engine.budget.auto_budget import AutoBudgetSettings
from goose.engine.budget.draft_gate import DraftGateConfig
from goose.engine.core.acceptance_prior import AUTO
from goose.engine.core.drafter import Drafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.verifier import VerificationEngine
from goose.engine.core.verify.rules import check_verifier
from goose.engine.forward.choose import verification_engine
from goose.harness.benchmarks.load import load_benchmark
from goose.harness.benchmarks.sources import file_in_data_dir, resolve_source
from goose.harness.benchmarks.spec import BenchmarkError, BenchmarkSpec, Prompt
from goose.harness.cells import SamplingPlan
from goose.harness.chat import PromptForm, decide_chat_template
from goose.harness.config_schema import validate_config  # also registers the schema config.yaml uses
from goose.harness.models.devices import ModelUnavailableError
from goose.harness.models.load import LoadedModel, load_model
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


def auto_budget_settings(cfg: DictConfig) -> AutoBudgetSettings:
    """budget=auto's switches from the run config (budget_in_run_cost, budget_price_bookkeeping, budget_gate,
    budget_acceptance_prior: auto = the model's name); a key the config leaves out keeps AutoBudgetSettings'
    default."""
    default = AutoBudgetSettings()
    gate = bool(cfg.get("budget_gate", default.gate is not None))  # on: the gate's default settings
    prior = str(cfg.get("budget_acceptance_prior", default.acceptance_prior))
    if prior == "auto":  # the prior calibrated on this model (or its family), where one is shipped
        prior = str(cfg.model.name)
    return AutoBudgetSettings(
        in_run_cost=bool(cfg.get("budget_in_run_cost", default.in_run_cost)),
        price_bookkeeping=bool(cfg.get("budget_price_bookkeeping", default.price_bookkeeping)),
        gate=DraftGateConfig() if gate else None,
        acceptance_prior=prior,
    )


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


def drafter_spec(cfg: DictConfig) -> Any:
    """`cfg.method.drafter` with the run's model put in place of an `acceptance_prior` of "auto" (OPT-Tree's
    default, hw_tree's on request: the drafter's estimator starts from the prior calibrated on the model
    being run, goose.engine.core.acceptance_prior; none shipped for it: the hand prior)."""
    spec = cfg.method.drafter
    if spec.get("acceptance_prior") != AUTO or not cfg.get("model") or not cfg.model.get("name"):
        return spec
    resolved = OmegaConf.to_container(spec, resolve=True)
    resolved["acceptance_prior"] = str(cfg.model.name)
    return OmegaConf.create(resolved)


def build_drafter(cfg: DictConfig) -> Drafter:
    """The drafter of `cfg.method.drafter` (`drafter_spec`), checked against `sampling.verifier`
    (`new_drafter`)."""
    node = cfg.get("sampling") or {}
    return new_drafter(
        cfg.method.name, drafter_spec(cfg), node.get("verifier", "auto"), node.get("temperature", 0.0)
    )


def new_drafter(method: str, spec: Any, verifier: str = "auto", temperature: float = 0.0) -> Drafter:
    """The drafter that `spec` (a method's `drafter` node) instantiates, checked against the sampling's
    `verifier` at `temperature`; a bad value raises a UserError."""
    try:
        drafter = instantiate(spec, _convert_="all")
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        raise UserError(f"method={method}: invalid configuration: {cause}") from None
    check_drafter_verifier(str(method), drafter, verifier, temperature)
    return drafter


def check_drafter_verifier(method: str, drafter: Drafter, verifier: str, temperature: float) -> None:
    """`sampling.verifier` must apply to the drafter's drafts (goose.engine.core.verify.rules)."""
    try:
        check_verifier(
            str(verifier),
            samples_drafts=bool(drafter.samples_drafts),
            shape=drafter.draft_shape(),
            temperature=float(temperature),
            method=method,
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
    from `cfg.bench` (conf/bench/<name>.yaml plus overrides) and `cfg.data_dir` (`load_prompts`)."""
    return load_prompts(OmegaConf.to_container(cfg.bench, resolve=True), cfg.get("data_dir"), limit)


def load_prompts(
    bench: dict[str, Any], data_dir: str | None, limit: int | None
) -> tuple[BenchmarkSpec, list[Prompt], str]:
    """`benchmark_prompts` of the `bench` group's values and `data_dir`."""
    try:
        spec = BenchmarkSpec.from_config(bench)
        data_file = spec.data_file or file_in_data_dir(spec, data_dir)
        source = resolve_source(spec, data_file, spec.source)
        return spec, load_benchmark(spec, limit, data_file, source=source), source
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None


def chat_template_decision(cfg: DictConfig, spec: BenchmarkSpec, tokenizer: Any) -> tuple[PromptForm, str]:
    """(the prompt form: the tokenizer's chat template, raw, or a base model's `model.base_prompt_format`;
    why) for `bench.chat_template` = auto | true | false (goose.harness.chat.decide_chat_template); needs
    the tokenizer (does it have a template?)."""
    return prompt_form(spec, tokenizer, OmegaConf.to_container(cfg.model, resolve=True))


def prompt_form(spec: BenchmarkSpec, tokenizer: Any, model: dict[str, Any]) -> tuple[PromptForm, str]:
    """`chat_template_decision` of the `model` group's values (name, instruct, base_prompt_format)."""
    try:
        return decide_chat_template(
            spec.chat_template,
            model=model["name"],
            instruct=bool(model.get("instruct", False)),
            bench=spec.name,
            chat_bench=spec.chat,
            tokenizer=tokenizer,
            base_format=model.get("base_prompt_format"),
        )
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None


_ENGINES: dict[str, tuple[LoadedModel, VerificationEngine]] = {}


def engine_lean(cfg: DictConfig) -> bool | None:
    """The engine's `lean` setting: False under compat=authors (the official code's `transformers` numerics),
    else None.
    """
    return False if cfg.method.drafter.get("compat") == "authors" else None


def load_engine(cfg: DictConfig) -> tuple[LoadedModel, VerificationEngine]:
    """The model of `cfg.model` and its verification engine, warmed up and cached per process (one model at a
    time), configured by `engine_settings(cfg)` (`engine_for`).
    """
    return engine_for(OmegaConf.to_container(cfg.model, resolve=True), engine_settings(cfg))


def engine_for(model: dict[str, Any], settings: dict[str, Any]) -> tuple[LoadedModel, VerificationEngine]:
    """The model of the `model` group's values (`load_model`'s keywords) and its verification engine built
    with `settings` (`engine_settings`), warmed up and cached per process (one model at a time)."""
    key = repr((sorted(model.items()), *settings.values()))
    if key not in _ENGINES:
        _ENGINES.clear()
        try:
            loaded = load_model(**model)
        except (ModelUnavailableError, ValueError) as exc:
            raise UserError(str(exc)) from None
        engine = build_engine(
            loaded.model, loaded.tokenizer, loaded.eos_token_ids, loaded.context_length, settings
        )
        _ENGINES[key] = (loaded, engine)
    return _ENGINES[key]


def engine_settings(cfg: DictConfig) -> dict[str, Any]:
    """The `verification_engine` keywords (goose.engine.forward.choose) that `cfg` sets: lean
    (`engine_lean`), prepack (`prepack: auto` -> None, goose.engine.forward.packed_linear), compile_forward,
    cuda_graphs."""
    prepack = cfg.get("prepack", "auto")
    return {
        "lean": engine_lean(cfg),
        "prepack": None if prepack == "auto" else bool(prepack),
        "compile_forward": bool(cfg.get("compile", False)),
        "cuda_graphs": bool(cfg.get("cuda_graphs", False)),
    }


def build_engine(
    model: Any, tokenizer: Any, eos_token_ids: list[int], context_length: int, settings: dict[str, Any]
) -> VerificationEngine:
    """The verification engine of a loaded causal LM (in eval mode) with `settings` (`engine_settings`),
    warmed up on a short text."""
    try:
        engine = verification_engine(model, eos_token_ids, context_length, **settings)
    except ValueError as exc:  # prepack, compile or cuda_graphs set where it cannot run
        raise UserError(str(exc)) from None
    warm_up(engine, tokenizer(WARM_UP_TEXT).input_ids)
    return engine


def release_engines() -> None:
    """Drop the cached model (e.g. before loading the same model in another dtype)."""
    _ENGINES.clear()


def sampling_settings(cfg: DictConfig) -> tuple[SamplingParams, SamplingPlan]:
    """The `sampling` group as the engine's warp and the runner's seeds (a config composed
    without the group is greedy)."""
    node = cfg.get("sampling") or {}
    try:
        params = SamplingParams(
            float(node.get("temperature", 0.0)),
            float(node.get("top_p", 1.0)),
            int(node.get("top_k", 0)),
            str(node.get("verifier", "auto")),
        )
    except ValueError as exc:
        raise UserError(f"invalid configuration: {exc}") from None
    return params, SamplingPlan(int(node.get("seed", 0)), int(node.get("num_samples", 1)))


@dataclass(frozen=True)
class Tracking:
    """W&B logging of a job (goose.harness.tracking): mode (`wandb`: online, offline or disabled), the run's
    group (the experiment), the folder of its files (`out_dir`), W&B's own console output (`wandb_verbose`)
    and the config it logs."""

    mode: str = "offline"
    group: str = "adhoc"
    directory: Path = Path("results/runs")
    verbose: bool = False
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSettings:
    """What one job reads of its config (the keys of conf/config.yaml; see there for their meaning)."""

    method: str  # method.name
    drafter: Any  # method.drafter: the node each of the job's drafters is instantiated from
    model: dict[str, Any]  # the model group: `load_model`'s keywords
    engine: dict[str, Any]  # the VerificationEngine keywords the config sets (compose.engine_settings)
    bench: dict[str, Any]  # the bench group: `BenchmarkSpec`'s fields
    data_dir: str | None
    limit: int | None  # prompts, after the quick defaults (compose.effective_sizes)
    max_new_tokens: int
    sampling: SamplingParams
    plan: SamplingPlan
    threads: int | None
    concurrency: int  # requests verified together (1: batch 1)
    batch_state: str  # with concurrency > 1: isolated or shared run-long drafter state
    budget: str  # fixed or auto
    budget_profile: str | None
    budget_kv_lens: tuple[int, ...]
    budget_cache: str | bool  # auto, off (or false) or a directory of cached curves
    auto_budget: AutoBudgetSettings  # budget=auto's switches (budget_in_run_cost, budget_gate, ...)
    out_dir: Path
    experiment: str | None  # as rows record it
    allow_mixed_code: bool
    tracking: Tracking

    @classmethod
    def from_config(cls, cfg: DictConfig) -> RunSettings:
        """The settings of a composed config (checked by `compose.check_config` first); a bad sampling value
        raises a UserError."""
        limit, max_new = effective_sizes(cfg)
        sampling, plan = sampling_settings(cfg)
        return cls(
            method=str(cfg.method.name),
            drafter=drafter_spec(cfg),
            model=OmegaConf.to_container(cfg.model, resolve=True),
            engine=engine_settings(cfg),
            bench=OmegaConf.to_container(cfg.bench, resolve=True),
            data_dir=cfg.get("data_dir"),
            limit=limit,
            max_new_tokens=max_new,
            sampling=sampling,
            plan=plan,
            threads=int(cfg.threads) if cfg.get("threads") else None,
            concurrency=int(cfg.get("concurrency", 1)),
            batch_state=str(cfg.get("batch_state", "isolated")),
            budget=str(cfg.get("budget", "fixed")),
            budget_profile=cfg.get("budget_profile"),
            budget_kv_lens=tuple(cfg.get("budget_kv_lens") or ()),
            budget_cache=cfg.get("budget_cache", "auto"),
            auto_budget=auto_budget_settings(cfg),
            out_dir=Path(cfg.out_dir),
            experiment=cfg.get("experiment"),
            allow_mixed_code=bool(cfg.get("allow_mixed_code", False)),
            tracking=Tracking(
                mode=str(cfg.get("wandb", "offline")),
                group=str(cfg.get("experiment", "adhoc")),
                directory=Path(cfg.out_dir),
                verbose=bool(cfg.get("wandb_verbose", False)),
                config=OmegaConf.to_container(cfg, resolve=True),
            ),
        )
