"""SuffixDecoding drafter: hand-built drafts, the global cache across prompts (only when enabled, and
restored from a run-state snapshot), hyperparameter checks, the YAMLs, and losslessness on a tiny
random model."""

from __future__ import annotations

import pytest
import torch

from baselines.suffix import SuffixDecodingDrafter
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import ROOT, SPINE, DraftTree
from tests.conftest import method_config

LOGITS = torch.zeros(1, 8)


def outcome(new_tokens: list[int]) -> VerifyOutcome:
    """What observe() reads: the committed tokens (the rest is unused by this drafter)."""
    return VerifyOutcome(torch.zeros(1, 8), [0], [0], new_tokens)


def run_prompt(drafter: SuffixDecodingDrafter, prompt: list[int], output: list[int]) -> None:
    """Drive the drafter through one prompt whose output is `output` (first token from the
    prefill, then one committed token per step), as the decode loop would."""
    drafter.begin(prompt, LOGITS)
    committed = [*prompt, output[0]]
    for token in output[1:]:
        tree = drafter.propose(committed)
        drafter.observe(tree, outcome([token]))
        committed.append(token)
    drafter.end()


# ---------------------------------------------------------------- drafts
def test_tree_draft_on_the_small_string():
    d = SuffixDecodingDrafter()
    d.begin([1, 2, 3, 1, 2, 4, 1], LOGITS)
    tree = d.propose([1, 2, 3, 1, 2, 4, 1, 2])  # 2: the prefill's token
    tree.validate()
    # the suffix tree's best draft (tests/sources): match [1, 2], tokens 3 and 4 under the anchor
    assert tree.tokens == [2, 3, 4] and tree.parents == [-1, 0, 0]
    assert tree.sources == [ROOT, SPINE, SPINE]
    assert d.route == "tree"
    assert d.stats["suffix_drafts"] == 1 and d.stats["suffix_match_len"] == 2
    assert d.stats["suffix_score"] == pytest.approx(2 / 3)


def test_chain_mode_drafts_the_most_probable_path():
    d = SuffixDecodingDrafter(mode="chain")
    d.begin([1, 2, 3, 1, 2, 4, 1], LOGITS)
    tree = d.propose([1, 2, 3, 1, 2, 4, 1, 2])
    assert tree.tokens == [2, 3, 1] and tree.parents == [-1, 0, 1]
    assert d.route == "chain"


def test_no_match_is_an_ar_step_and_observe_feeds_the_tree():
    d = SuffixDecodingDrafter()
    d.begin([5, 6, 7], LOGITS)
    tree = d.propose([5, 6, 7, 8])
    assert tree.tokens == [8] and d.route == "ar"
    d.observe(tree, outcome([5, 6]))  # committed: 5 6 7 8 5 6 -> [5, 6] continues with 7
    tree = d.propose([5, 6, 7, 8, 5, 6])
    assert tree.tokens[:2] == [6, 7] and d.route == "tree"
    with pytest.raises(ValueError, match="already holds"):
        d.propose([5, 6, 7])


def test_propose_before_begin_is_an_error():
    with pytest.raises(RuntimeError, match="begin"):
        SuffixDecodingDrafter().propose([1, 2])


# ---------------------------------------------------------------- global cache
PROMPT_1, OUTPUT_1 = [10, 11, 12], [20, 21, 22, 23, 24]
PROMPT_2 = [30, 31, 20, 21]  # ends with text of output 1, which its own prompt never continues


def second_prompt_draft(drafter: SuffixDecodingDrafter) -> DraftTree:
    drafter.begin(PROMPT_2, LOGITS)
    return drafter.propose([*PROMPT_2, 22])


def test_global_cache_carries_outputs_across_prompts_only_when_enabled():
    # local only: prompt 2's own text (30 31 20 21 22) has no repeat -> AR
    local = SuffixDecodingDrafter()
    run_prompt(local, PROMPT_1, OUTPUT_1)
    assert len(second_prompt_draft(local)) == 1 and local.route == "ar"
    assert not local.carries_run_state and local.run_state() is None

    # global: output 1 is in the global tree; [20, 21, 22] (m = 3, once) continues 23, 24 at 1.0
    glob = SuffixDecodingDrafter(global_cache=True)
    run_prompt(glob, PROMPT_1, OUTPUT_1)
    assert glob.global_tree.sequence(0) == OUTPUT_1  # the whole output, prefill token included
    tree = second_prompt_draft(glob)
    assert tree.tokens == [22, 23, 24] and tree.parents == [-1, 0, 1]
    assert glob.stats["suffix_global_drafts"] == 1 and glob.stats["suffix_match_len"] == 3
    assert glob.global_tree.sequence(1) == [22]  # the current output is in the global tree as it grows

    # a fresh global drafter has seen nothing: AR
    fresh = SuffixDecodingDrafter(global_cache=True)
    assert len(second_prompt_draft(fresh)) == 1


def test_global_cache_state_is_restored_from_a_snapshot():
    glob = SuffixDecodingDrafter(global_cache=True)
    assert glob.carries_run_state
    run_prompt(glob, PROMPT_1, OUTPUT_1)
    run_prompt(glob, [40, 41], [42, 43, 44])
    state = glob.run_state()
    resumed = SuffixDecodingDrafter(global_cache=True)
    resumed.restore_run_state(state)
    assert resumed.global_tree.substring_counts() == glob.global_tree.substring_counts()
    expected = second_prompt_draft(glob)
    assert second_prompt_draft(resumed).tokens == expected.tokens
    assert resumed._seq_id == glob._seq_id  # the next output gets the next sequence id


# ---------------------------------------------------------------- hyperparameters and configs
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "beam"}, "SuffixDecodingDrafter.mode = 'beam': must be one of tree, chain"),
        ({"max_depth": 1}, "SuffixDecodingDrafter.max_depth = 1: must be an integer >= 2"),
        ({"max_depth": 6.5}, "SuffixDecodingDrafter.max_depth = 6.5: must be an integer >= 2"),
        ({"max_spec_tokens": 0}, "SuffixDecodingDrafter.max_spec_tokens = 0: must be an integer >= 1"),
        ({"max_spec_factor": -1.0}, "SuffixDecodingDrafter.max_spec_factor = -1.0: must be a number >= 0.0"),
        ({"max_spec_offset": "x"}, "SuffixDecodingDrafter.max_spec_offset = 'x': must be a number"),
        (
            {"min_token_prob": 1.5},
            r"SuffixDecodingDrafter.min_token_prob = 1.5: must be a number in \[0.0, 1.0\]",
        ),
        ({"global_cache": 1}, "SuffixDecodingDrafter.global_cache = 1: must be true or false"),
    ],
)
def test_bad_hyperparameters_are_rejected(kwargs: dict, message: str):
    with pytest.raises(ValueError, match=message):
        SuffixDecodingDrafter(**kwargs)


@pytest.mark.parametrize(("name", "global_cache"), [("suffix", False), ("suffix_global", True)])
def test_method_configs_instantiate(name: str, global_cache: bool):
    from hydra.utils import instantiate

    cfg = method_config(name)
    assert cfg.name == name
    drafter = instantiate(cfg.drafter, _convert_="all")
    assert isinstance(drafter, SuffixDecodingDrafter) and drafter.name == name
    assert drafter.config() == {
        "mode": "tree",
        "max_depth": 64,
        "max_spec_tokens": 64,
        "max_spec_factor": 1.0,
        "max_spec_offset": 0.0,
        "min_token_prob": 0.1,
        "global_cache": global_cache,
    }
    assert drafter.carries_run_state is global_cache
    assert drafter.needs_prefill_logits is False


# ---------------------------------------------------------------- end to end on a tiny model
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"mode": "chain"}, {"global_cache": True}, {"max_spec_factor": 4.0, "min_token_prob": 0.0}],
    ids=["tree", "chain", "global", "wide"],
)
def test_generation_is_lossless_on_tiny_model(kwargs: dict):
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("llama", seed=3)
    drafter = SuffixDecodingDrafter(**kwargs)
    prompts = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 10, 11, 9, 10, 11, 9, 10], [5, 6, 7, 1, 2]]
    drafted = 0
    for prompt in prompts:  # one drafter for the run: the global tree (if on) carries over
        ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
        gen = generate(verification_engine(model, eos_token_ids=()), drafter, prompt, max_new_tokens=40)
        assert gen.output_ids == ref.output_ids
        assert gen.tau >= 1.0
        drafted += gen.routes().get(drafter.mode, 0)
    assert drafted > 0


def test_budget_auto_cuts_the_best_first_tree_losslessly():
    """budget=auto verifies a prefix of the tree: the drafter's best-first order makes every prefix
    a valid tree of its most probable nodes, and the drafter learns only from committed tokens."""
    from goose.engine.budget.auto_budget import AutoBudget
    from goose.engine.budget.cost_model import LatencyTable
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("llama", seed=3)
    inner = SuffixDecodingDrafter(max_spec_factor=4.0, min_token_prob=0.0)
    sizer = AutoBudget(LatencyTable(sizes=[1, 3, 8], seconds=[1.0, 1.05, 30.0]))
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
    gen = generate(
        verification_engine(model, eos_token_ids=()), inner, prompt, max_new_tokens=40, sizer=sizer
    )
    assert gen.output_ids == ref.output_ids
    assert max(s.tree_size for s in gen.steps) <= 8
    assert gen.drafter_stats["auto_nodes_verified"] < gen.drafter_stats["auto_nodes_proposed"]
