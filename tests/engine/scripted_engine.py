"""A stand-in for `VerificationEngine` in the cost model's tests: a tiny model's config and weights (what a
fingerprint reads) and verification steps whose seconds a script decides, on a fake clock, so that what
`calibrate` does with its timings can be checked exactly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from goose.engine.budget import calibration
from tests.tiny_models import tiny_model

Duration = Callable[[int, int], float]  # (tree size n, the k-th step of that size, warm-up = 0) -> seconds

CLOCK = {"now": 0.0}


def fake_clock(device: object) -> float:
    return CLOCK["now"]


def linear(n: int, k: int) -> float:
    """n/1024 s: a binary fraction, so that the fake clock's differences are exact."""
    return n / 1024


class ScriptedEngine:
    """The members of `VerificationEngine` that `calibrate` and the latency cache use."""

    def __init__(
        self,
        duration: Duration = linear,
        model: torch.nn.Module | None = None,
        forward_name: str = "lean+prepack",
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
    ) -> None:
        self.model = model if model is not None else tiny_model("llama")
        self.duration = duration
        self.forward_name = forward_name
        self.dtype = dtype
        self.device = torch.device(device)
        self.steps: Counter[int] = Counter()
        self.prefix_len = 0
        self.first_token: int | None = None
        self.topk_width = 0

    def prefill(self, prompt: list[int], max_new_tokens: int, **_: object) -> None:
        self.prefix_len, self.first_token = len(prompt), 1

    def verify(self, tree, budget: int) -> SimpleNamespace:
        n = len(tree)
        CLOCK["now"] += self.duration(n, self.steps[n])
        self.steps[n] += 1
        return SimpleNamespace(logits=torch.zeros(n, 8), top=None)

    def truncate(self, prefix_len: int) -> None:
        self.prefix_len = prefix_len


@pytest.fixture
def scripted_clock(monkeypatch):
    """calibration's clock is the scripted engines' fake clock for the test."""
    CLOCK["now"] = 0.0
    monkeypatch.setattr(calibration, "sync_clock", fake_clock)
    return CLOCK
