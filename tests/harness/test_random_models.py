"""goose.harness.models.random_weights: the paper's shapes built from conf/shape, with their parameter counts,
and a clear error for an unknown shape."""

from __future__ import annotations

import pytest
import torch

from goose.engine.forward.choose import verification_engine
from goose.harness.models.random_weights import load_shape, random_model, shape_names


@pytest.mark.parametrize(
    "name,params",
    [
        ("vicuna-7b", 6_738_415_616),  # Llama-1 7B
        ("llama3-8b", 8_030_261_248),
        ("qwen3-8b", 8_190_735_360),
    ],
)
def test_the_paper_shapes_have_the_published_parameter_counts(name, params):
    assert load_shape(name).parameter_count() == params


def test_an_unknown_shape_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown shape 'vicuna-70b'; valid shapes are: .*vicuna-7b"):
        load_shape("vicuna-70b")
    assert {"vicuna-7b", "llama3-8b", "qwen3-8b", "toy-llama", "toy-qwen3"} <= set(shape_names())


@pytest.mark.parametrize("name", ["toy-llama", "toy-qwen3"])
def test_a_toy_shape_builds_on_the_device_and_runs_the_lean_forward(name):
    model = random_model(load_shape(name), torch.float32, "cpu")
    engine = verification_engine(model, eos_token_ids=(), context_length=256)
    assert engine.lean is not None
    logits = engine.prefill(list(range(10)))
    assert logits.shape == (10, 32000) and torch.isfinite(logits).all()


def test_model_init_random_builds_the_shape_with_a_stand_in_tokenizer_and_says_so(smollm2, tmp_path):
    """model.init=random: the shape's weights at random, the vocabulary grown to the stand-in
    tokenizer's, and a provenance that every row carries (random_weights, a cell label of its own)."""
    from goose.harness.models.load import load_model
    from tests.conftest import model_spec

    smollm2[0].tokenizer.save_pretrained(tmp_path / "tok")
    spec = {**model_spec("vicuna-7b"), "init": "random", "shape": "toy-llama", "device": "cpu"}
    loaded = load_model(**spec, tokenizer=str(tmp_path / "tok"))
    weights = loaded.provenance["weights"]
    assert loaded.provenance["random_weights"] is True
    assert loaded.label == "vicuna-7b-random"
    assert weights["shape_vocab_size"] == 32000 and weights["vocab_size"] == len(loaded.tokenizer) == 49152
    assert loaded.model.config.vocab_size == 49152 and loaded.model.config.hidden_size == 256
    with pytest.raises(ValueError, match="valid shapes are: .*toy-llama"):
        load_model(**{**spec, "shape": "vicuna-70b"}, tokenizer=str(tmp_path / "tok"))
