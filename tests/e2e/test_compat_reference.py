"""compat=authors against the official Goose code's counters (../shared/reference/, README there):
the same SmolLM2-135M fp32, raw prompts, 128 tokens, greedy; forward calls per prompt must equal the
official ones. The smoke test takes a HumanEval prompt on which the harness's own Goose differs from
the official code (HumanEval/2: 24 vs 23 forward calls), so it fails if compat breaks; the
slow test covers goose, iso3 and iso5 on the first prompts of each benchmark. The full 60-prompt
comparison is `python -m experiments.compat_reference`."""

from __future__ import annotations

import pytest

from experiments.compat_reference import REFERENCE, make_drafter, read_reference, reference_prompts
from goose.engine.core.decode import generate
from goose.engine.forward.choose import verification_engine

pytestmark = pytest.mark.needs_shared(REFERENCE)


@pytest.fixture(scope="module")
def reference_setup(smollm2):
    loaded, _ = smollm2
    engine = verification_engine(loaded.model, loaded.eos_token_ids, loaded.context_length, lean=False)
    return engine, reference_prompts(loaded.tokenizer, limit=3), read_reference()


def forward_calls(engine, method, compat, prompts, wanted):
    drafter = make_drafter(method, compat)
    return {
        (bench, task): generate(engine, drafter, ids, 128).forward_calls
        for bench, task, ids in prompts
        if (bench, task) in wanted
    }


def test_goose_authors_matches_official_counters_smoke(reference_setup):
    engine, prompts, ref = reference_setup
    wanted = {("humaneval", "HumanEval/2")}
    got = forward_calls(engine, "goose", "authors", prompts, wanted)
    assert got == {key: ref[(key[0], "goose", key[1])]["forward_calls"] for key in wanted}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["goose", "iso3", "iso5"])
def test_authors_matches_official_counters(reference_setup, method):
    engine, prompts, ref = reference_setup
    wanted = {(bench, task) for bench, task, _ in prompts}
    got = forward_calls(engine, method, "authors", prompts, wanted)
    want = {key: ref[(key[0], method, key[1])]["forward_calls"] for key in wanted}
    assert got == want
