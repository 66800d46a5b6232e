"""SAM-Decoding drafter: the chain / Token Recycling switch at the match-length threshold, TR's
table fed by every verification and kept across prompts, the config, bad hyperparameters, and
generation identical to greedy AR on tiny random models."""

from __future__ import annotations

import pytest
import torch

from baselines.sam import SamDrafter
from baselines.token_recycling import TokenRecyclingDrafter
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from tests.conftest import method_config

VOCAB = 64


def fill_tr_table(drafter: SamDrafter, seed: int = 0) -> torch.Tensor:
    """Observe one tree holding every token of the vocabulary, so that TR's table has every row."""
    logits = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(seed))
    tree = DraftTree([0, *range(1, VOCAB)], [-1, *[0] * (VOCAB - 1)], [ROOT, *[BRANCH] * (VOCAB - 1)])
    drafter.observe(tree, VerifyOutcome(logits, logits.argmax(-1).tolist(), [0], [1]))
    return logits


PROMPT = [10, 11, 12, 13, 20, 21, 22]


def test_switch_at_the_match_threshold():
    drafter = SamDrafter(match_threshold=3, max_draft_len=4)
    drafter.begin(PROMPT, torch.zeros(1, VOCAB))
    fill_tr_table(drafter)

    below = PROMPT + [11, 12]  # longest earlier suffix "11 12": 2 < 3 -> Token Recycling's tree
    tree = drafter.propose(below)
    assert drafter.route == "tr_tree"
    assert tree.tokens == drafter.tr.propose(below).tokens and len(tree) == 81
    assert set(tree.sources[1:]) == {BRANCH}

    at = below + [13]  # "11 12 13": exactly 3 -> the chain after its earliest occurrence (end 3)
    tree = drafter.propose(at)
    assert drafter.route == "sam_chain"
    assert tree.tokens == [13, 20, 21, 22, 11]  # anchor + max_draft_len tokens
    assert tree.parents == [-1, 0, 1, 2, 3]
    assert tree.sources == [ROOT] + [SPINE] * 4

    above = at + [20]  # "11 12 13 20": 4 >= 3 -> still a chain
    assert drafter.propose(above).tokens == [20, 21, 22, 11, 12]
    assert drafter.route == "sam_chain"


def test_short_match_with_an_empty_tr_table_is_an_ar_step():
    drafter = SamDrafter(match_threshold=3)
    drafter.begin(PROMPT, torch.zeros(1, VOCAB))  # TR has no prefill harvest: its table is empty
    tree = drafter.propose(PROMPT + [11])
    assert tree.tokens == [11] and drafter.route == "ar"
    tree = drafter.propose(PROMPT + [11, 12, 13])  # a long enough match needs no table
    assert drafter.route == "sam_chain" and tree.tokens[:3] == [13, 20, 21]


def test_default_threshold_is_five():
    drafter = SamDrafter()
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    drafter.begin(prompt, torch.zeros(1, VOCAB))
    fill_tr_table(drafter)
    drafter.propose(prompt + [1, 2, 3, 4])
    assert drafter.route == "tr_tree"
    tree = drafter.propose(prompt + [1, 2, 3, 4, 5])
    assert drafter.route == "sam_chain"
    assert tree.tokens == [5, 6, 7, 8, 9, 1, 2, 3, 4, 5]  # everything after the occurrence (< 39)


def test_climb_is_counted_and_can_be_turned_off():
    prompt = [2, 7, 1, 2, 9]
    committed = prompt + [1, 2]  # "1 2" first ended at 3 (3 tokens follow); "2" at 0 (6 follow)
    climbing = SamDrafter(match_threshold=2, max_draft_len=5)
    climbing.begin(prompt, torch.zeros(1, VOCAB))
    assert climbing.propose(committed).tokens == [2, 7, 1, 2, 9, 1]
    assert climbing.stats["sam_climbs"] == 1
    plain = SamDrafter(match_threshold=2, max_draft_len=5, climb_suffix_links=False)
    plain.begin(prompt, torch.zeros(1, VOCAB))
    assert plain.propose(committed).tokens == [2, 9, 1, 2]
    assert plain.stats["sam_climbs"] == 0


def test_tr_table_learns_from_chains_and_persists_across_prompts():
    drafter = SamDrafter(match_threshold=2, max_draft_len=3)
    drafter.begin(PROMPT, torch.zeros(1, VOCAB))
    chain = drafter.propose(PROMPT + [11, 12])
    assert drafter.route == "sam_chain" and chain.tokens == [12, 13, 20, 21]
    logits = torch.randn(len(chain), VOCAB, generator=torch.Generator().manual_seed(1))
    drafter.observe(chain, VerifyOutcome(logits, logits.argmax(-1).tolist(), [0], [13]))
    for i, token in enumerate(chain.tokens):  # every chain node's row, rejected ones included
        assert drafter.tr.table.successors(token)[0] == logits[i].topk(8).indices.tolist()

    drafter.end()
    drafter.begin([40, 41], torch.zeros(1, VOCAB))  # a new prompt: fresh automaton, same TR table
    assert drafter.automaton.tokens == [40, 41]
    tree = drafter.propose([40, 41, 12])
    assert drafter.route == "tr_tree"
    assert tree.tokens[1:9] == logits[0].topk(8).indices.tolist()  # row of token 12, learnt before


def test_run_state_is_tr_table():
    drafter = SamDrafter()
    drafter.begin(PROMPT, torch.zeros(1, VOCAB))
    fill_tr_table(drafter, seed=2)
    assert drafter.carries_run_state
    fresh = SamDrafter()
    fresh.begin(PROMPT, torch.zeros(1, VOCAB))
    fresh.restore_run_state(drafter.run_state())
    committed = PROMPT + [5]
    assert fresh.propose(committed).tokens == drafter.propose(committed).tokens


def test_no_prefill_logits_needed():
    assert SamDrafter.needs_prefill_logits is False
    assert SamDrafter().needs_prefill_logits is False


# ---------------------------------------------------------------- config
def test_method_config_instantiates():
    from hydra.utils import instantiate

    cfg = method_config("sam")
    assert cfg.name == "sam"
    drafter = instantiate(cfg.drafter, _convert_="all")
    assert isinstance(drafter, SamDrafter) and drafter.name == "sam"
    assert isinstance(drafter.tr, TokenRecyclingDrafter)
    config = drafter.config()
    assert config["max_draft_len"] == 39 and config["match_threshold"] == 5
    assert config["climb_suffix_links"] is True and config["k"] == 8
    assert config["occurrence"] == "earliest" and config["static_sam"] is False
    assert config["tr_persistent_table"] is True and config["tr_prefill_harvest"] is False


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("max_draft_len", 0, "must be an integer >= 1"),
        ("match_threshold", 0, "must be an integer >= 1"),
        ("match_threshold", 2.5, "must be an integer >= 1"),
        ("climb_suffix_links", "yes", "must be true or false"),
        ("k", 0, "must be an integer >= 1"),
    ],
)
def test_bad_hyperparameters_name_field_value_and_range(field: str, value, expected: str):
    with pytest.raises(ValueError) as err:
        SamDrafter(**{field: value})
    msg = str(err.value)
    assert f"SamDrafter.{field} = {value!r}" in msg and expected in msg, msg


def test_bad_hyperparameter_from_the_command_line_fails_before_loading():
    """Refused when the config is composed (SamConfig's check, through the drafter's structured config)."""
    from goose.harness.compose import UserError, compose_config

    with pytest.raises(UserError, match=r"SamDrafter.match_threshold = 0: must be an integer >= 1"):
        compose_config(["method=sam", "method.drafter.match_threshold=0"])


# ---------------------------------------------------------------- end to end on tiny models
@pytest.mark.parametrize(("arch", "threshold"), [("llama", 5), ("llama", 2), ("qwen3", 5), ("gemma3", 3)])
def test_generation_is_lossless_on_tiny_model(arch: str, threshold: int):
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model(arch, seed=3)
    drafter = SamDrafter(match_threshold=threshold)
    prompts = [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6], [9, 10, 11, 9, 10, 11, 9, 10]]
    routes: dict[str, int] = {}
    for prompt in prompts:  # two prompts: TR's table carries over, the automaton starts afresh
        ref = generate(verification_engine(model, eos_token_ids=()), ARDrafter(), prompt, max_new_tokens=40)
        gen = generate(verification_engine(model, eos_token_ids=()), drafter, prompt, max_new_tokens=40)
        assert gen.output_ids == ref.output_ids
        assert gen.tau >= 1.0
        for route, n in gen.routes().items():
            routes[route] = routes.get(route, 0) + n
    if arch == "llama":  # on this model both routes occur at either threshold
        assert routes.get("sam_chain", 0) > 0 and routes.get("tr_tree", 0) > 0
