"""A model split over two devices by a `device_map` (the 33B setting, `model.device_map=auto`) runs
through the `transformers` forward with the engine's masks and cache, and decodes exactly what the
same weights decode on one device.

The split: on a CPU-only machine the second "device" is accelerate's disk offload (layer 1's
weights live in files and are loaded by accelerate's hooks at each forward; the layer executes on
the CPU), which exercises the hooks, the per-layer placement and the per-layer cache buffers; with
`pytest --device cuda` (`make gpu-check`) the embeddings and layer 0 sit on the GPU and layer 1,
the final norm and the LM head on the CPU, so every step crosses devices for real (the logits come
back from the CPU). Not covered by either: a split over two GPUs (no machine here has two).
"""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.core.tree import DraftTree
from goose.engine.forward.choose import verification_engine
from tests.engine.test_engine import random_tree
from tests.tiny_models import VOCAB, tiny_model


def split_map(device: str) -> dict[str, int | str]:
    if torch.device(device).type == "cuda":
        first, second = torch.device(device).index or 0, "cpu"
    else:
        first, second = "cpu", "disk"
    return {
        "model.embed_tokens": first,
        "model.rotary_emb": first,
        "model.layers.0": first,
        "model.layers.1": second,
        "model.norm": second if second != "disk" else first,
        "lm_head": second if second != "disk" else first,
    }


@pytest.fixture
def split_and_whole(tmp_path, test_device):
    whole = tiny_model("llama", seed=7)
    whole.save_pretrained(tmp_path / "model")
    split = AutoModelForCausalLM.from_pretrained(
        tmp_path / "model",
        device_map=split_map(test_device),
        offload_folder=str(tmp_path / "offload"),
        dtype=torch.float32,
        attn_implementation="sdpa",
    ).eval()
    return split, whole.to(test_device)


def test_a_split_model_uses_the_transformers_forward_and_decodes_as_on_one_device(
    split_and_whole, test_device
):
    split, whole = split_and_whole
    assert len(set(split.hf_device_map.values())) == 2
    engine = verification_engine(split, eos_token_ids=(), context_length=256)
    reference = verification_engine(whole, eos_token_ids=(), context_length=256)
    assert engine.lean is None and engine.forward_name == "transformers"

    prompt = list(range(3, 17))
    assert (
        generate(engine, ARDrafter(), prompt, max_new_tokens=16).output_ids
        == generate(reference, ARDrafter(), prompt, max_new_tokens=16).output_ids
    )
    # a tree whose accepted path is not contiguous: masks, positions and the gather compaction
    rng = random.Random(3)
    prefix = [rng.randrange(VOCAB) for _ in range(12)]
    anchor = int(engine.prefill(prefix)[-1].argmax())
    assert anchor == int(reference.prefill(prefix)[-1].argmax())
    good = generate(reference, ARDrafter(), prefix, max_new_tokens=5).output_ids[1:4]
    reference.prefill(prefix)
    tree = random_tree(rng, anchor, good, n_extra=10)
    got, want = engine.verify(tree, budget=100), reference.verify(tree, budget=100)
    assert got.logits.device == engine.device
    assert got.accepted_nodes == want.accepted_nodes and got.accepted_nodes[1] == 2
    assert got.new_tokens == want.new_tokens
    torch.testing.assert_close(got.logits.cpu(), want.logits.cpu(), rtol=1e-4, atol=1e-4)
    # decoding goes on from the compacted (per-device) cache
    nxt = got.new_tokens[-1]
    assert (
        engine.verify(DraftTree.single(nxt), budget=100).predictions
        == reference.verify(DraftTree.single(nxt), budget=100).predictions
    )
