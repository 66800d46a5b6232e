"""Bad prompts and edge cases, on tiny random models through the runner and the decode loop.

Documented behaviour:
- empty prompt (0 tokens after tokenization): the AR and method rows are "failed" with
  "ValueError: empty prompt ..."; the sweep goes on. A prompt the tokenizer cannot handle likewise.
- prompt longer than the context window: "failed" with "ContextLengthError: prompt has N tokens;
  the model's context window is M", raised before any forward pass.
- max_new_tokens = 0: no forward pass, a row with generated_tokens = forward_calls = 0.
- EOS as the first generated token: one token, one forward call (the prefill), stop.
- a draft tree that would cross the context window near the end of a generation: the decode loop
  cuts it to the depth that fits (DraftTree.truncate_depth), and a generation that reaches the
  window stops there with stop = "context", keeping what it generated.
"""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from transformers import AutoModelForCausalLM

from baselines.pld import PromptLookupDrafter
from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.tree import BRANCH, DraftTree
from goose.engine.forward.choose import verification_engine
from goose.harness.benchmarks.spec import Prompt
from goose.harness.compose import compose_config
from goose.harness.runner import run_cell
from tests.tiny_models import VOCAB, sequential_greedy, tiny_config
from tests.toy_harness import ToyTokenizer, cell_of, one_thread, tiny_engine, toy_prompts  # noqa: F401

WINDOW = 64
METHODS = ("ar", "pld", "tr", "iso3", "iso5", "eagle2", "goose")


def drafter(method: str) -> Drafter:
    cfg = compose_config([f"method={method}"], validate=False)
    return instantiate(cfg.method.drafter, _convert_="all")


def small_window_model(seed: int = 0) -> torch.nn.Module:
    """tests.tiny_models' Llama with max_position_embeddings = WINDOW."""
    torch.manual_seed(seed)
    cfg = tiny_config("llama")
    cfg.max_position_embeddings = WINDOW
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    return model.eval().requires_grad_(False)


class ForwardCounter:
    def __init__(self, model: torch.nn.Module):
        self.n = 0
        model.register_forward_hook(self)

    def __call__(self, *args):
        self.n += 1


# ------------------------------------------------------------------ bad prompts
def test_empty_and_untokenizable_prompts_are_failed_rows(tmp_path):
    prompts = [Prompt("empty", ""), Prompt("none", None), *toy_prompts(1)]
    rows = run_cell(
        tiny_engine(),
        ToyTokenizer(),
        prompts,
        cell_of("pld", PromptLookupDrafter()),
        PromptLookupDrafter,
        tmp_path / "r",
    )
    by = {(r["method"], r["prompt_id"]): r for r in rows}
    for method in ("ar", "pld"):
        assert by[(method, "empty")]["status"] == "failed"
        assert "empty prompt" in by[(method, "empty")]["error"]
        assert by[(method, "none")]["status"] == "failed"
        assert "cannot be tokenized" in by[(method, "none")]["error"]
        assert by[(method, "p0")]["status"] == "ok"


def test_prompt_longer_than_the_window_fails_before_any_forward(tmp_path):
    model = small_window_model()
    engine = verification_engine(model, eos_token_ids=())
    assert engine.context_length == WINDOW
    counter = ForwardCounter(model)
    long_prompt = Prompt("long", " ".join(str(i % VOCAB) for i in range(WINDOW + 16)))
    rows = run_cell(
        engine,
        ToyTokenizer(),
        [long_prompt],
        cell_of("goose", drafter("goose")),
        lambda: drafter("goose"),
        tmp_path / "r",
    )
    assert counter.n == 0
    for r in rows:
        assert r["status"] == "failed"
        assert (
            r["error"]
            == f"ContextLengthError: prompt has {WINDOW + 16} tokens; the model's context window is {WINDOW}"
        )


# ------------------------------------------------------------------ generation limits
def test_max_new_tokens_zero_runs_no_forward_and_says_so(tmp_path):
    engine = tiny_engine()
    counter = ForwardCounter(engine.model)
    rows = run_cell(
        engine,
        ToyTokenizer(),
        toy_prompts(2),
        cell_of("goose", drafter("goose"), max_new=0),
        lambda: drafter("goose"),
        tmp_path / "r",
    )
    assert counter.n == 0
    assert len(rows) == 4
    for r in rows:
        assert r["status"] == "ok" and r["max_new_tokens"] == 0
        assert (r["generated_tokens"], r["forward_calls"], r["output_ids"], r["tau"]) == (0, 0, [], 0.0)
        assert r["lossless"] is True


@pytest.mark.parametrize("method", METHODS)
def test_eos_as_first_token_stops_after_one(method):
    engine = tiny_engine(seed=2)
    prompt = [int(t) for t in toy_prompts(1, seed=2)[0].text.split()]
    first = sequential_greedy(engine.model, prompt, 1)[0]
    engine.eos_token_ids = (first,)
    gen = generate(engine, drafter(method), prompt, max_new_tokens=32)
    assert gen.output_ids == [first] and gen.forward_calls == 1 and gen.steps == []


@pytest.mark.parametrize("method", METHODS)
def test_eos_inside_an_accepted_path_is_cut_there(method):
    """EOS = the 9th greedy token: every method stops right after it, whatever its tree holds."""
    engine = tiny_engine(seed=4)
    prompt = [int(t) for t in toy_prompts(1, length=24, seed=4)[0].text.split()]
    greedy = sequential_greedy(engine.model, prompt, 12)
    eos = greedy[8]
    engine.eos_token_ids = (eos,)
    expected = greedy[: greedy.index(eos) + 1]
    assert generate(engine, drafter(method), prompt, max_new_tokens=64).output_ids == expected


# ------------------------------------------------------------------ the context window
class DeepChain(Drafter):
    """Always proposes an 8-deep chain (plus a side branch) under the anchor."""

    def propose(self, committed):
        self.route = "tree"
        tree = DraftTree.chain(committed[-1], [(committed[-1] + i) % VOCAB for i in range(1, 9)], BRANCH)
        tree.add((committed[-1] + 50) % VOCAB, 0, BRANCH)
        return tree


def test_generation_that_fits_with_deep_trees():
    model = small_window_model(seed=1)
    engine = verification_engine(model, eos_token_ids=())
    prompt = list(range(3, 23))  # 20 tokens: 20 + 24 + 8 < WINDOW
    out = generate(engine, DeepChain(), prompt, max_new_tokens=24).output_ids
    assert out == sequential_greedy(model, prompt, 24)


def test_tree_near_the_window_is_trimmed_to_fit():
    model = small_window_model(seed=1)
    engine = verification_engine(model, eos_token_ids=())
    prompt = list(range(3, 43))  # 40 tokens: the generation fits (40 + 24 = WINDOW), 8-deep trees do not
    expected = sequential_greedy(model, prompt, 24)
    assert generate(engine, ARDrafter(), prompt, max_new_tokens=24).output_ids == expected
    assert generate(engine, DeepChain(), prompt, max_new_tokens=24).output_ids == expected


@pytest.mark.parametrize("method", ["ar", "goose"])
def test_generation_stops_at_the_window(method):
    model = small_window_model(seed=1)
    engine = verification_engine(model, eos_token_ids=())
    prompt = list(range(3, 43))
    gen = generate(engine, drafter(method) if method != "ar" else ARDrafter(), prompt, max_new_tokens=100)
    out = gen.output_ids
    assert gen.stop == "context"
    assert WINDOW <= len(prompt) + len(out) <= WINDOW + 1  # every position of the window used
    assert out == sequential_greedy(model, prompt, len(out))


def test_prompt_filling_the_whole_window_gives_one_token():
    model = small_window_model(seed=1)
    engine = verification_engine(model, eos_token_ids=())
    prompt = [3 + i % 50 for i in range(WINDOW)]
    gen = generate(engine, ARDrafter(), prompt, max_new_tokens=10)
    assert gen.output_ids == sequential_greedy(model, prompt, 1) and gen.stop == "context"


def test_truncate_depth_keeps_an_ancestor_closed_prefix():
    tree = DraftTree.single(1)
    a = tree.add(2, 0, BRANCH)
    tree.add(3, 0, BRANCH)
    b = tree.add(4, a, BRANCH)
    tree.add(5, b, BRANCH)
    tree.add(6, a, BRANCH)
    cut = tree.truncate_depth(1)
    assert cut.tokens == [1, 2, 3] and cut.parents == [-1, 0, 0] and cut.depths == [0, 1, 1]
    two = tree.truncate_depth(2)
    assert two.tokens == [1, 2, 3, 4, 6] and two.parents == [-1, 0, 0, 1, 1]
    two.validate()
    assert tree.truncate_depth(3) is tree
    with pytest.raises(ValueError):
        tree.truncate_depth(-1)
