"""A toy harness for runner-level tests: a whitespace tokenizer over token ids, repetitive random
prompts, an engine on a tiny random Llama, and a one-thread fixture (import it into a test module
to apply it there)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from goose.engine.core.drafter import Drafter
from goose.engine.core.verifier import VerificationEngine
from goose.engine.forward.choose import verification_engine
from goose.harness.benchmarks.spec import Prompt
from goose.harness.config_schema import register
from goose.harness.runner import Cell
from tests.conftest import ROOT
from tests.tiny_models import VOCAB, tiny_model

POISON = VOCAB - 1  # a prompt holding this token triggers the injected fault


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run ~100x slower with 2 intra-op threads on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class ToyTokenizer:
    """Text "3 5 7" -> ids [3, 5, 7]."""

    def __call__(self, text: str) -> SimpleNamespace:
        return SimpleNamespace(input_ids=[int(t) for t in text.split()])


def toy_prompts(n: int, length: int = 12, poison_at: int | None = None, seed: int = 0) -> list[Prompt]:
    """n prompts of repetitive random text (so that drafts get accepted); prompt `poison_at` holds
    the POISON token."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        base = torch.randint(0, VOCAB - 1, (length // 2,), generator=gen).tolist()
        ids = base + base
        if i == poison_at:
            ids[0] = POISON
        out.append(Prompt(f"p{i}", " ".join(map(str, ids))))
    return out


def tiny_engine(seed: int = 0, context_length: int = 256) -> VerificationEngine:
    return verification_engine(
        tiny_model("llama", seed=seed), eos_token_ids=(), context_length=context_length
    )


def cell_of(method: str, drafter, max_new: int = 24) -> Cell:
    return Cell("tiny", "toy", method, drafter.config(), max_new, "float32")


@functools.cache
def _method_config(method: str):
    register()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return compose(config_name="config", overrides=[f"method={method}"])


def drafter_of(method: str) -> Drafter:
    """A fresh drafter of the configured method `method` (conf/method/<method>.yaml)."""
    return instantiate(_method_config(method).method.drafter, _convert_="all")


# Methods that read something the tiny random model cannot give (REST: a datastore in a real tokenizer's ids).
NEEDS_REAL_MODEL = {"rest"}
METHODS = sorted(p.stem for p in (ROOT / "conf" / "method").glob("*.yaml") if p.stem not in NEEDS_REAL_MODEL)
