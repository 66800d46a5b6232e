"""What a bench run loads, composed as `run.py` composes it (goose.harness.compose): the model and its
warmed-up engine, each benchmark's prompts and their tokens, a method's drafters. The other experiments that
run contenders side by side (delayed_grid, cost_curve, hw_tree_anchors) load through it too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from goose.engine.core.drafter import Drafter
from goose.engine.core.verifier import VerificationEngine
from goose.harness.chat import encode_prompt
from goose.harness.compose import (
    UserError,
    benchmark_prompts,
    chat_template_decision,
    compose_config,
    drafter_factory,
    load_engine,
    release_engines,
)
from goose.harness.models.load import LoadedModel
from goose.records.spec_bench import SPEC_BENCH, per_category_sample, question_category


def method_factory(name: str, overrides: Sequence[str] = (), *, model: str) -> Callable[[], Drafter]:
    """A factory of the drafter of conf/method/<name>.yaml (validated), composed with conf/model/<model>.yaml:
    a method's config may interpolate the model's (REST's `datastore: mbpp_nontest.${model.name}`), and
    one composed without it would get the default model's values, another tokenizer's datastore."""
    return drafter_factory(compose_config([f"model={model}", f"method={name}", *overrides]))


def model_and_engine(
    name: str,
    dtype: str | None = None,
    prepack: str = "auto",
    compile_forward: bool = False,
    device: str | None = None,
    cuda_graphs: bool = False,
) -> tuple[LoadedModel, VerificationEngine]:
    """conf/model/<name>.yaml, optionally in another dtype or on another device (None: the model config's),
    and its warmed-up engine with the config's `prepack`, `compile` and `cuda_graphs` settings, through the
    harness's loader (the one `run.py` uses); a setting the device cannot run is a UserError naming it."""
    release_engines()  # one model in memory at a time
    overrides = [f"model={name}", f"prepack={prepack}", f"compile={str(compile_forward).lower()}"]
    overrides += [f"cuda_graphs={str(cuda_graphs).lower()}"]
    overrides += [f"model.dtype={dtype}"] if dtype else []
    overrides += [f"model.device={device}"] if device else []
    return load_engine(compose_config(overrides))


@dataclass
class BenchPrompt:
    """One prompt as the runner takes it (`prompt`: prompt_id, text), with its tokens."""

    bench: str
    prompt: Any
    ids: list[int]
    chat_template: bool
    source: str

    @property
    def prompt_id(self) -> str:
        return str(self.prompt.prompt_id)


def load_prompts(
    tokenizer: Any,
    model: str,
    benches: list[str],
    limit: int,
    data_dir: str | None,
    chat_template: str,
    per_category: int | None = None,
    categories: Sequence[str] | None = None,
) -> list[BenchPrompt]:
    """The first `limit` prompts of each benchmark, composed and tokenized as run.py does it
    (goose.harness.compose), with bench.chat_template = `chat_template` (auto | true | false); for
    spec_bench with `per_category`, that many of each Spec-Bench category instead (per_category_sample).
    spec_bench with `categories`: only the questions whose `category` field is one of them (bench.filter),
    and `per_category` of each of these (goose.records.spec_bench.question_category)."""
    out = []
    for bench in benches:
        filtered = categories is not None and bench == SPEC_BENCH
        cfg = compose_config(
            [f"model={model}", f"bench={bench}", f"bench.chat_template={chat_template}"]
            + ([f"data_dir={data_dir}"] if data_dir else [])
            + ([f"bench.filter={{field: category, values: [{','.join(categories)}]}}"] if filtered else [])
        )
        by_category = per_category is not None and bench == SPEC_BENCH
        spec, prompts, source = benchmark_prompts(cfg, None if by_category else limit)
        if filtered:
            check_question_categories(prompts, categories)
        if by_category:
            grouping = question_category if filtered else None
            prompts = per_category_sample(
                prompts, per_category, **({"category": grouping} if grouping else {})
            )
        apply_chat, _ = chat_template_decision(cfg, spec, tokenizer)
        out += [
            BenchPrompt(bench, p, encode_prompt(tokenizer, p.text, apply_chat), apply_chat, source)
            for p in prompts
        ]
    return out


def check_question_categories(prompts: Sequence[Any], categories: Sequence[str]) -> None:
    """The questions the `category` filter kept lie in the id ranges of those categories
    (goose.records.spec_bench.SPEC_BENCH_QUESTION_CATEGORIES, by which the tables group them); UserError
    for a question file laid out otherwise."""
    stray = [p.prompt_id for p in prompts if question_category(p.prompt_id) not in categories]
    if stray:
        raise UserError(
            f"{SPEC_BENCH}: the questions {', '.join(stray[:5])} have a `category` in {', '.join(categories)} "
            "but lie outside those categories' id ranges (goose.records.spec_bench.SPEC_BENCH_QUESTION_CATEGORIES); "
            "this question file is not Spec-Bench's layout"
        )


def prompts_past(
    tokenizer: Any, model: str, benches: list[str], skip: int, limit: int, data_dir: str | None
) -> list[BenchPrompt]:
    """Prompts `skip` .. `skip + limit - 1` of each benchmark, raw (no chat template): calibration and
    training prompts past the ones an evaluation measures."""
    every = load_prompts(tokenizer, model, benches, skip + limit, data_dir, "false")
    return [p for b in benches for p in [q for q in every if q.bench == b][skip:]]
