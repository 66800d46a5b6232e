"""LogitSpec, Hierarchy Drafting and source selection are identical to AR on a tiny model, over two prompts
(their run-long tables carried over), and a run-state snapshot resumes to the same output."""

from __future__ import annotations

import pytest

from baselines.hierarchy import HierarchyDrafter
from baselines.logitspec import LogitSpecDrafter
from baselines.source_select import SourceSelectDrafter

MAKERS = {
    "logitspec": LogitSpecDrafter,
    "hierarchy": HierarchyDrafter,
    "source_select": SourceSelectDrafter,
    "source_select_llamacpp": lambda: SourceSelectDrafter(rule="rate_times_length"),
}
PROMPTS = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 10, 11, 9, 10, 11, 9, 10], [5, 6, 7, 9, 10, 11]]


@pytest.mark.parametrize("name", list(MAKERS))
def test_generation_is_identical_to_ar(name: str) -> None:
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("llama", seed=3)
    drafter = MAKERS[name]()
    resumed = MAKERS[name]()
    drafted = 0
    for i, prompt in enumerate(PROMPTS):
        ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
        if i == len(PROMPTS) - 1 and drafter.carries_run_state:
            resumed.restore_run_state(drafter.run_state())
            again = generate(verification_engine(model, eos_token_ids=()), resumed, prompt, max_new_tokens=40)
            assert again.output_ids == ref.output_ids
        gen = generate(verification_engine(model, eos_token_ids=()), drafter, prompt, max_new_tokens=40)
        assert gen.output_ids == ref.output_ids
        drafted += sum(1 for s in gen.steps if s.tree_size > 1)
        if i == len(PROMPTS) - 1 and drafter.carries_run_state:
            assert [s.tree_size for s in again.steps] == [s.tree_size for s in gen.steps]
    assert drafted > 0
