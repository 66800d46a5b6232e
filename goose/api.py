"""The Python API: `speculate` runs any configured method (hyperparameters by keyword, validated as a run's)
on a configured model or a transformers causal LM, through the harness's decode loop. Example: docs/api.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from goose.method.config import AUTO, HAND
from goose.validation import check_choice, check_int


@dataclass(frozen=True)
class Speculation:
    """One generation and its statistics, as a result row has them: τ = generated tokens per target
    forward call, prefill counted (docs/paper.md); accepted_lengths excludes the bonus token."""

    text: str  # the generated tokens decoded, special tokens skipped
    token_ids: list[int]  # the generated tokens (EOS kept)
    prompt_ids: list[int]  # the prompt as the model saw it (in the chat template where applied)
    method: str
    method_config: dict[str, Any]  # the drafter's full configuration, overrides included
    tau: float
    accepted_lengths: list[int]
    tree_sizes: list[int]  # nodes verified at each step, anchor included
    forward_calls: int  # target forward passes, prefill included
    wall_time_s: float  # from before the prefill to the last token
    tokens_per_s: float
    stop: str  # max_new_tokens, eos or context
    chat_template: bool  # whether the prompt was put in the tokenizer's chat template

    @property
    def mean_accepted_length(self) -> float:
        """Mean drafted tokens accepted per verification step."""
        steps = self.accepted_lengths
        return sum(steps) / len(steps) if steps else 0.0


def available(group: str) -> list[str]:
    """The configured names of a config group (`method` or `model`): conf/<group>/*.yaml."""
    from goose.harness.compose import CONF_DIR

    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def method_config(
    method: str,
    overrides: dict[str, Any] | None = None,
    model: str | None = None,
    config_overrides: Sequence[str] = (),
) -> DictConfig:
    """The run config of `method` (and configured `model`, if given) with the drafter's
    hyperparameters set from `overrides`, validated like a `run.py` job. ValueError names an
    unknown method or model with the valid ones, and a bad key or value with its field; without
    `model` (a transformers model), also a method field that the overrides leave interpolating the
    configured model's config (`check_model_free`)."""
    from goose.harness.compose import UserError, check_config, compose_config

    for group, name in (("method", method), ("model", model)):
        if name is not None and name not in available(group):
            raise ValueError(f"{group}={name!r}: unknown; valid {group}s: {', '.join(available(group))}")
    args = [f"method={method}", "budget=fixed", *([f"model={model}"] if model else []), *config_overrides]
    try:
        cfg = compose_config(args, validate=False)
    except Exception as exc:  # Hydra's override and composition errors
        raise ValueError(f"cannot compose the configuration {args}: {exc}") from None
    drafter = cfg.method.drafter
    valid = sorted(k for k in drafter if k != "_target_")
    for key in overrides or {}:
        if key not in drafter:  # the drafter's structured schema would refuse it less clearly
            raise ValueError(
                f"method.drafter.{key} = {overrides[key]!r}: not a hyperparameter of method {method!r}; "
                f"valid ones: {', '.join(valid)}"
            )
    with open_dict(cfg):
        for key, value in (overrides or {}).items():
            drafter[key] = value
    if model is None:
        check_model_free(cfg.method)
        if drafter.get("acceptance_prior") == AUTO:  # no configured model: no calibrated prior to take
            drafter.acceptance_prior = HAND
    try:
        check_config(cfg)
    except UserError as exc:
        raise ValueError(str(exc)) from None
    return cfg


def model_dependent(node: Any, path: str = "method") -> dict[str, str]:
    """{dotted key: raw value} of the strings under `node` (unresolved) that interpolate `${model...}`, the
    configured model's config, e.g. REST's `method.drafter.datastore: mbpp_nontest.${model.name}`."""
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False)
    if isinstance(node, dict | list):
        out: dict[str, str] = {}
        for key, value in node.items() if isinstance(node, dict) else enumerate(node):
            out |= model_dependent(value, f"{path}.{key}")
        return out
    return {path: node} if isinstance(node, str) and "${model." in node else {}


def check_model_free(method: DictConfig) -> None:
    """A transformers model has no conf/model/*.yaml, so a method field that interpolates one would silently
    take the default model's value (REST would search SmolLM2's token ids with another tokenizer): ValueError
    naming the field, its value and how to set it, unless the caller's overrides replaced it."""
    for key, value in model_dependent(method).items():
        drafter_key = key.removeprefix("method.drafter.")
        how = (
            f"speculate(..., {drafter_key}=...)" if drafter_key != key else f'config_overrides=["{key}=..."]'
        )
        raise ValueError(
            f"{key} = {value!r}: depends on a configured model (conf/model/*.yaml), and a transformers model "
            f"has none; set it for your model, e.g. {how}, or pass a configured model name"
        )


_USER_ENGINE: dict[str, Any] = {}  # the engine of the last transformers model passed in


def _user_engine(model: Any, tokenizer: Any, cfg: DictConfig) -> Any:
    """The verification engine of a transformers model (set to eval mode), built once per model."""
    from goose.harness.compose import build_engine, engine_settings
    from goose.harness.models.load import eos_ids

    settings = engine_settings(cfg)
    key = repr((id(model), *settings.values()))
    if _USER_ENGINE.get("key") != key or _USER_ENGINE["engine"].model is not model:
        _USER_ENGINE.clear()
        model.eval()
        context = getattr(model.config, "max_position_embeddings", None) or tokenizer.model_max_length
        engine = build_engine(model, tokenizer, eos_ids(tokenizer, model), int(context), settings)
        _USER_ENGINE.update(key=key, engine=engine)
    return _USER_ENGINE["engine"]


def _chat_template(setting: bool | str, instruct: bool | None, tokenizer: Any) -> bool:
    """bench.chat_template's rule for one free prompt (goose.harness.chat); "auto" on a transformers model,
    whose instruct flag is unknown, applies any template its tokenizer has."""
    from goose.harness.chat import has_chat_template

    check_choice("chat_template", setting, ("auto", True, False), why="auto: instruct models only")
    if setting is True and not has_chat_template(tokenizer):
        raise ValueError("chat_template = True: the tokenizer has no chat template")
    if setting == "auto":
        return instruct is not False and has_chat_template(tokenizer)
    return bool(setting)


def speculate(
    model: Any,
    tokenizer: Any = None,
    prompt: str | Sequence[int] | Sequence[str | Sequence[int]] | None = None,
    method: str = "goose",
    max_new_tokens: int = 128,
    *,
    concurrency: int = 1,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    chat_template: bool | str = "auto",
    auto_budget: bool = False,
    config_overrides: Sequence[str] = (),
    **overrides: Any,
) -> Speculation | list[Speculation]:
    """Generate up to `max_new_tokens` tokens after `prompt` with `method`'s drafter verified by
    the target model: lossless, so the tokens are the target's own (greedy: AR's output; sampled:
    with a deterministic drafter, AR's sample with the same `seed`).

    model, tokenizer: a transformers causal LM and its tokenizer, or a configured model name
        (conf/model/*.yaml, e.g. "smollm2-135m") and tokenizer None.
    prompt: text (put in the chat template as `chat_template` says) or token ids (used as given); a list of
        texts or of token-id lists: several requests, answered by a list of Speculations in their order.
    concurrency: requests verified together in one forward (continuous batching, docs/batching.md); each
        request's output is what it gets alone. 1: one after another. Only for several prompts.
    method: a configured method (conf/method/*.yaml: ar, pld, goose, tr, ...).
    temperature, top_p, top_k: 0 / 1 / 0 = greedy; else lossless speculative sampling.
    seed: the sequence's seed when sampling.
    chat_template: "auto" (an instruct model's template around text prompts), True or False.
    auto_budget: size each tree to this machine's verification cost curve, calibrated once per
        engine (run.py's budget=auto); False verifies the method's fixed budget B (budget=fixed).
    config_overrides: further run.py-style overrides, e.g. ["model.device=cuda", "prepack=false"].
    **overrides: the method's hyperparameters, e.g. budget=30, max_depth=8 for goose.
    """
    from goose.engine.core.decode import generate
    from goose.engine.core.sampling import SamplingParams
    from goose.engine.core.sizing import Speculator
    from goose.harness.chat import encode_prompt
    from goose.harness.compose import UserError, drafter_factory, load_engine

    if prompt is None:
        raise TypeError("speculate() needs a prompt: text or a list of token ids")
    named = isinstance(model, str)
    if named and tokenizer is not None:
        raise ValueError(
            f"model={model!r} is a configured name: it brings its own tokenizer; pass tokenizer=None"
        )
    if not named and tokenizer is None:
        raise ValueError("a transformers model needs its tokenizer")
    check_int("max_new_tokens", max_new_tokens, low=0)
    check_int("seed", seed, low=0)
    many = _several(prompt)
    check_int(
        "concurrency", concurrency, low=1, high=len(prompt) if many else 1, why="requests served together"
    )
    sampling = SamplingParams(temperature, top_p, top_k)
    cfg = method_config(method, overrides, model if named else None, config_overrides)
    try:
        make_drafter = drafter_factory(cfg)
        if named:
            loaded, engine = load_engine(cfg)
            tokenizer, instruct = loaded.tokenizer, bool(cfg.model.get("instruct", False))
        else:
            engine, instruct = _user_engine(model, tokenizer, cfg), None
    except UserError as exc:
        raise ValueError(str(exc)) from None
    if auto_budget and cfg.method.name != "ar":
        from goose.engine.budget.auto_budget import auto_budget_factory

        make_drafter = auto_budget_factory(make_drafter, engine)  # calibrated once per engine
    chat = False
    encoded = []
    for one in prompt if many else [prompt]:
        if isinstance(one, str):
            chat = _chat_template(chat_template, instruct, tokenizer)
            encoded.append(encode_prompt(tokenizer, one, chat))
        else:
            encoded.append([int(t) for t in one])
        if not encoded[-1]:
            raise ValueError(
                f"prompt {len(encoded) - 1}: empty (no tokens)" if many else "prompt: empty (no tokens)"
            )
    if concurrency > 1:
        gens, config = _served(engine, make_drafter, encoded, max_new_tokens, concurrency, sampling, seed)
    else:
        gens = []
        for i, prompt_ids in enumerate(encoded):
            speculator = Speculator.of(make_drafter())  # the drafter and the sizer of its trees
            config = speculator.config()
            gens.append(
                generate(
                    engine,
                    speculator.drafter,
                    prompt_ids,
                    max_new_tokens,
                    sampling=sampling,
                    seed=seed + i,
                    sizer=speculator.sizer,
                )
            )
    name = str(cfg.method.name) + ("_auto" if auto_budget and cfg.method.name != "ar" else "")
    out = [
        _speculation(gen, ids, tokenizer, name, config, chat) for gen, ids in zip(gens, encoded, strict=True)
    ]
    return out if many else out[0]


def _several(prompt: Any) -> bool:
    """Whether `prompt` is several requests: a non-empty list of texts or of token-id lists."""
    return isinstance(prompt, (list, tuple)) and bool(prompt) and not isinstance(prompt[0], int)


def _served(
    engine: Any,
    make_drafter: Any,
    encoded: list[list[int]],
    max_new: int,
    concurrency: int,
    sampling,
    seed: int,
):
    """Several requests through the batched engine (goose.engine.batch), request i with seed `seed` + i."""
    from goose.engine.batch.engine import BatchEngine
    from goose.engine.batch.serve import Request, serve
    from goose.engine.core.sizing import Speculator

    configs = []

    def make():
        speculator = Speculator.of(make_drafter())
        configs.append(speculator.config())
        return speculator

    requests = [Request(tuple(ids), max_new, seed + i) for i, ids in enumerate(encoded)]
    served = serve(BatchEngine(engine, concurrency), make, requests, concurrency, sampling)
    return served.generations, configs[0]


def _speculation(
    gen, prompt_ids: list[int], tokenizer: Any, method: str, config: dict, chat: bool
) -> Speculation:
    from goose.harness.runner import generation_row

    row = generation_row(gen)
    return Speculation(
        text=tokenizer.decode(gen.output_ids, skip_special_tokens=True),
        token_ids=list(gen.output_ids),
        prompt_ids=prompt_ids,
        method=method,
        method_config=config,
        tau=row["tau"],
        accepted_lengths=row["step_accepted"],
        tree_sizes=row["step_tree_size"],
        forward_calls=row["forward_calls"],
        wall_time_s=row["wall_time_s"],
        tokens_per_s=row["tokens_per_s"],
        stop=row["stop"],
        chat_template=chat,
    )
