"""goose.speculate (goose/api.py) on the offline SmolLM2, and the Python examples of the docs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import goose
from tests.conftest import ROOT

PROMPT = "Repeat after me: the cat sat on the mat. The cat sat on the mat. The cat"
MAX_NEW = 24
DOCS_WITH_EXAMPLES = ("docs/api.md", "docs/batching.md", "README.md")


def python_blocks(path: str) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", (ROOT / path).read_text(), flags=re.M | re.S)


@pytest.mark.parametrize("path", DOCS_WITH_EXAMPLES)
def test_doc_examples_run(path):
    """Every ```python block of the file runs, in order, in one namespace (as a reader would)."""
    blocks = python_blocks(path)
    if not blocks:
        assert path != "docs/api.md", "docs/api.md lost its example"
        pytest.skip(f"{path} has no python example")
    namespace: dict = {"__name__": "__doc_example__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{path} (python block {i + 1})", "exec"), namespace)


def test_import_goose_is_light():
    code = "import sys, goose; assert 'torch' not in sys.modules and 'hydra' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.fixture(scope="module")
def ar():
    return goose.speculate("smollm2-135m", prompt=PROMPT, method="ar", max_new_tokens=MAX_NEW)


@pytest.mark.parametrize("method", ["goose", "pld"])
def test_greedy_equals_ar(ar, method):
    out = goose.speculate("smollm2-135m", prompt=PROMPT, method=method, max_new_tokens=MAX_NEW)
    assert out.token_ids == ar.token_ids
    assert out.prompt_ids == ar.prompt_ids and out.chat_template  # SmolLM2 is an instruct model
    assert out.forward_calls == 1 + len(out.accepted_lengths) == len(out.tree_sizes) + 1
    assert out.tau == pytest.approx(len(out.token_ids) / out.forward_calls)
    assert out.tau > 1.0 and ar.tau == 1.0
    assert out.text == ar.text and out.wall_time_s > 0 and out.tokens_per_s > 0


def test_transformers_model_and_token_ids(smollm2, ar):
    loaded, _ = smollm2
    out = goose.speculate(loaded.model, loaded.tokenizer, PROMPT, method="goose", max_new_tokens=MAX_NEW)
    assert out.token_ids == ar.token_ids and out.chat_template
    raw = goose.speculate(loaded.model, loaded.tokenizer, ar.prompt_ids, method="pld", max_new_tokens=MAX_NEW)
    assert raw.prompt_ids == ar.prompt_ids and not raw.chat_template
    assert raw.token_ids == ar.token_ids


def test_overrides_reach_the_drafter():
    out = goose.speculate(
        "smollm2-135m", prompt=PROMPT, method="pld", max_new_tokens=8, num_draft=2, chat_template=False
    )
    assert out.method_config["num_draft"] == 2 and not out.chat_template
    assert max(out.tree_sizes) <= 3  # the anchor and two drafted tokens


def test_unknown_method_lists_valid_ones():
    with pytest.raises(ValueError, match=r"method='nope': unknown; valid methods: ar, .*goose.*pld"):
        goose.speculate("smollm2-135m", prompt=PROMPT, method="nope")


def test_unknown_model_lists_valid_ones():
    with pytest.raises(ValueError, match=r"model='nope': unknown; valid models: .*smollm2-135m"):
        goose.speculate("nope", prompt=PROMPT)


@pytest.mark.parametrize(
    ("method", "overrides", "message"),
    [
        ("goose", {"budget": 0}, r"budget = 0: must be an integer >= 2"),
        ("pld", {"num_draft": -1}, r"num_draft = -1: must be an integer >= 1"),
        (
            "goose",
            {"bugdet": 30},
            r"method.drafter.bugdet = 30: not a hyperparameter .* valid ones: .*budget",
        ),
        ("ar", {"temperature": -1}, r"sampling.temperature = -1: must be a number >= 0"),
        ("ar", {"chat_template": "yes"}, r"chat_template = 'yes': must be one of auto, true, false"),
    ],
)
def test_invalid_values_name_field_and_value(method, overrides, message):
    with pytest.raises(ValueError, match=message):
        goose.speculate("smollm2-135m", prompt=PROMPT, method=method, max_new_tokens=4, **overrides)


def test_sampled_deterministic_drafter_equals_ar_sample():
    """Sample-and-match (goose.engine.core.sampling): a deterministic drafter commits AR's sample
    with the same seed, token for token."""
    kw = {"prompt": PROMPT, "max_new_tokens": MAX_NEW, "temperature": 0.7, "seed": 3}
    ar = goose.speculate("smollm2-135m", method="ar", **kw)
    pld = goose.speculate("smollm2-135m", method="pld", **kw)
    assert pld.token_ids == ar.token_ids
    assert pld.forward_calls < ar.forward_calls


def test_each_sampling_option_reaches_the_computation():
    """temperature, seed, top_k and top_p change what is generated (not only validated): AR at T = 1
    differs from greedy and between seeds; top_k = 1 and a tiny top_p leave only the argmax, so they
    give the greedy output whatever the seed; a comparison of two methods alone could not tell a
    sampler that silently runs greedy."""
    kw = {"prompt": PROMPT, "max_new_tokens": MAX_NEW, "method": "ar"}
    greedy = goose.speculate("smollm2-135m", **kw).token_ids
    sampled = {
        seed: goose.speculate("smollm2-135m", temperature=1.0, seed=seed, **kw).token_ids for seed in (1, 2)
    }
    assert sampled[1] != greedy and sampled[2] != greedy
    assert sampled[1] != sampled[2]
    assert goose.speculate("smollm2-135m", temperature=1.0, seed=1, top_k=1, **kw).token_ids == greedy
    assert goose.speculate("smollm2-135m", temperature=1.0, seed=2, top_p=1e-6, **kw).token_ids == greedy


def test_a_field_depending_on_the_configured_model_follows_it_and_a_transformers_model_must_set_it():
    """REST's datastore is `mbpp_nontest.${model.name}`: a configured model gets its own; a transformers
    model, which has no conf/model entry, is refused until the field is set (not given SmolLM2's)."""
    from goose.api import method_config

    assert method_config("rest", model="gemma3-270m").method.drafter.datastore == "mbpp_nontest.gemma3-270m"
    with pytest.raises(
        ValueError, match=r"method.drafter.datastore = 'mbpp_nontest.\$\{model.name\}': depends"
    ):
        method_config("rest")
    assert method_config("rest", {"datastore": "mine.npy"}).method.drafter.datastore == "mine.npy"


def test_several_prompts_are_served_together_and_each_gets_its_output_alone():
    """A list of prompts gives a list of Speculations; at concurrency 2 through the batched engine, in
    fp32 each equals the prompt's own batch-1 run."""
    prompts = [PROMPT, "List three colours.", "Count from one to five."]
    kw = dict(method="pld", max_new_tokens=MAX_NEW, config_overrides=["model.dtype=float32"])
    alone = goose.speculate("smollm2-135m", prompt=prompts, **kw)
    served = goose.speculate("smollm2-135m", prompt=prompts, concurrency=2, **kw)
    assert [o.token_ids for o in served] == [o.token_ids for o in alone]
    assert [o.prompt_ids for o in served] == [o.prompt_ids for o in alone]
    assert len({tuple(o.token_ids) for o in served}) == 3
    with pytest.raises(ValueError, match=r"concurrency = 4: must be an integer in \[1, 3\]"):
        goose.speculate("smollm2-135m", prompt=prompts, concurrency=4, **kw)
    with pytest.raises(ValueError, match=r"concurrency = 2: must be an integer in \[1, 1\]"):
        goose.speculate("smollm2-135m", prompt=PROMPT, concurrency=2, **kw)
