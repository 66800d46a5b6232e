"""GooseDrafter: config and presets, routing per cycle, bookkeeping in observe (adjacency updates,
spine-acceptance EMA, spine continuations), and the iso variant at Goose's budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from baselines.iso_budget import IsotropicGooseBudgetDrafter
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.method.confidence import base_spine_ratio
from goose.method.config import GooseConfig
from goose.method.drafter import GooseDrafter
from tests.conftest import method_config

METHOD_DIR = Path(__file__).resolve().parents[2] / "conf" / "method"
V = 64  # vocabulary of the fake logits


class FakeTable:
    """Adjacency table stand-in: fixed rows, records updates."""

    def __init__(self, rows=None):
        self.rows = rows or {}
        self.vocab_size = V
        self.updates: list[tuple[list[int], list[int], int | None]] = []

    def successors(self, token, prev=None):
        return self.rows.get(token, ([], []))

    def update_from_tree(self, tokens, parents, logits, prev_anchor=None, top=None):
        self.updates.append((list(tokens), list(parents), prev_anchor))

    def reset(self):
        self.rows = {}


def started(prompt: list[int], table: FakeTable | None = None, **hp) -> GooseDrafter:
    d = GooseDrafter(**hp)
    d.begin(prompt, torch.zeros(len(prompt), V))
    if table is not None:
        d.table = table
    return d


def outcome(tree: DraftTree, accepted: list[int]) -> VerifyOutcome:
    logits = torch.zeros(len(tree), V)
    return VerifyOutcome(logits, [0] * len(tree), accepted, [tree.tokens[i] for i in accepted[1:]] + [0])


# ------------------------------------------------------------------ config


# The paper's Table 5 (docs/paper.md "Symbols"), every Goose default: the
# spine-ratio tiers are the base ratio for a < 0.2, a < 0.4 and else, so the EMA thresholds are (0.2, 0.4).
TABLE_5 = {
    "budget": 60,
    "max_depth": 6,
    "k": 10,
    "min_score": 0.01,
    "rho": 0.5,
    "max_chain": 20,
    "max_extended_chain": 100,
    "long_match": 8,
    "ema_alpha": 0.3,
    "ema_init": 0.5,
    "ngram_lengths": (5, 4, 3),
    "spine_ratio_tiers": (0.15, 0.30, 0.50),
    "spine_ratio_thresholds": (0.2, 0.4),
    "chain_extension_threshold": 0.6,
    "use_bigram": True,
    "prefill_harvest": True,
    "use_confidence": True,
}
HARNESS_FIELDS = {"persistent_table": False, "compat": "harness"}  # goose-bench's, not the paper's


def test_defaults_are_table_5():
    cfg = GooseConfig()
    assert set(GooseConfig.field_names()) == set(TABLE_5) | set(HARNESS_FIELDS)  # each field classified
    for field, value in {**TABLE_5, **HARNESS_FIELDS}.items():
        assert getattr(cfg, field) == value, field


def test_goose_yaml_gives_table_5():
    """conf/method/goose.yaml names only what differs from GooseConfig: the drafter it builds has
    every Table 5 value."""
    built = instantiate(method_config("goose").drafter, _convert_="all").config()
    for field, value in TABLE_5.items():
        got = built[field]
        assert (tuple(got) if isinstance(got, list) else got) == value, field
    assert GooseDrafter().config() == built


@pytest.mark.parametrize(
    "ema, base", [(0.0, 0.15), (0.19, 0.15), (0.2, 0.30), (0.39, 0.30), (0.4, 0.50), (1, 0.5)]
)
def test_default_spine_ratio_tiers_switch_at_table_5_thresholds(ema, base):
    """The base spine ratio the default config gives at EMA a (docs/paper.md: a<0.2: 0.15, a<0.4: 0.30, else 0.50)."""
    cfg = GooseConfig()
    assert base_spine_ratio(ema, cfg.spine_ratio_tiers, cfg.spine_ratio_thresholds) == base


@pytest.mark.parametrize(
    "field, value",
    [
        ("budget", 1),
        ("max_depth", 0),
        ("k", 0),
        ("rho", 1.5),
        ("rho", -0.1),
        ("min_score", 1.0),
        ("ema_alpha", 2.0),
        ("max_chain", 0),
        ("max_extended_chain", 10),  # below max_chain
        ("ngram_lengths", (3, 4)),  # not longest first
        ("ngram_lengths", ()),
        ("spine_ratio_tiers", (0.1, 0.2)),
        ("spine_ratio_thresholds", (0.4, 0.2)),
        ("use_bigram", "yes"),
        ("budget", 60.5),
    ],
)
def test_invalid_hyperparameters_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"GooseConfig.{field} = "):
        GooseConfig(**{field: value})


def test_unknown_hyperparameter_is_rejected():
    with pytest.raises(TypeError, match="bugdet"):
        GooseDrafter(bugdet=60)


def test_drafter_takes_every_field_and_logs_them():
    d = GooseDrafter(budget=40, rho=0.25, ngram_lengths=[4, 3])
    cfg = d.config()
    # persistent_table and compat are logged only off their defaults (earlier rows' config hashes)
    assert set(cfg) == set(GooseConfig.field_names()) - {"persistent_table", "compat"}
    assert GooseDrafter(persistent_table=True).config()["persistent_table"] is True
    assert GooseDrafter(compat="authors").config()["compat"] == "authors"
    assert (cfg["budget"], cfg["rho"], cfg["ngram_lengths"]) == (40, 0.25, [4, 3])
    assert GooseDrafter.from_config(d.cfg).config() == cfg
    assert d.name == "goose"


@pytest.mark.parametrize(
    "preset, changed",
    [
        ("goose", {}),
        ("goose_no_spine_branches", {"rho": 0.0}),
        ("goose_no_bigram", {"use_bigram": False}),
        ("goose_no_consensus", {"use_confidence": False}),
        ("goose_no_prefill", {"prefill_harvest": False}),
    ],
)
def test_presets_instantiate_with_one_change_each(preset, changed):
    cfg = method_config(preset)
    assert cfg.name == preset
    drafter = instantiate(cfg.drafter, _convert_="all")
    expected = {**GooseConfig().as_dict(), **changed}
    assert drafter.config() == expected and drafter.name == preset


# ------------------------------------------------------------------ routing

PROMPT_WITH_MATCH = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]  # suffix [1,2,3] -> chain [4, ...]


def test_route_ar_when_no_successors_and_no_chain():
    d = started([1, 2, 3, 4, 5], FakeTable())
    tree = d.propose([1, 2, 3, 4, 5, 6])
    assert d.route == "ar" and tree.tokens == [6]
    assert d.stats == {"route_ar": 1}


def test_route_chain_when_no_successors():
    d = started(PROMPT_WITH_MATCH[:-1], FakeTable())
    tree = d.propose(PROMPT_WITH_MATCH)
    assert d.route == "chain"
    assert tree.tokens == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]
    assert tree.sources == [ROOT] + [SPINE] * 12 and tree.parents == [-1, *range(12)]


def test_route_spine_tree_when_anchor_has_successors_and_a_chain():
    table = FakeTable({3: ([4, 40, 41], [0.5, 0.3, 0.2])})
    d = started(PROMPT_WITH_MATCH[:-1], table)
    tree = d.propose(PROMPT_WITH_MATCH)
    # chain of 12 tokens: c = 0.7 + 0.2 * 4 / 12 = 0.7667 > 0.6 -> extension; B_eff = 60 + int(c*40) = 90
    assert d.route == "spine_tree"
    assert d.confidence == pytest.approx(0.7 + 0.2 * 4 / 12)
    assert d.stats["b_eff_sum"] == 90
    L = tree.sources.count(SPINE)
    assert tree.tokens[1:4] == [4, 5, 6] and tree.sources[1 : L + 1] == [SPINE] * L
    assert 40 in tree.tokens and 41 in tree.tokens  # root alternatives, skipping the spine's 4
    assert len(tree) <= 90
    tree.validate()


def test_route_branch_tree_when_there_is_no_chain():
    table = FakeTable({9: ([1, 2], [0.6, 0.4])})
    d = started([5, 6, 7, 8], table)
    tree = d.propose([5, 6, 7, 8, 9])
    assert d.route == "branch_tree" and tree.tokens == [9, 1, 2]
    assert SPINE not in tree.sources
    assert d.stats["b_eff_sum"] == 60  # c = 0 without a chain


def test_tree_with_fewer_than_two_nodes_falls_back_to_ar():
    table = FakeTable({9: ([1, 2], [0.005, 0.004])})  # all below min_score
    d = started([5, 6, 7, 8], table)
    tree = d.propose([5, 6, 7, 8, 9])
    assert d.route == "ar" and tree.tokens == [9]
    assert d.stats == {"tree_fallback_ar": 1, "route_ar": 1}


def test_consensus_gives_full_confidence_and_an_extended_spine():
    # a template repeated 6 times: the last 5 tokens have >= 2 earlier occurrences that agree
    template = [10, 11, 12, 13, 14, 15, 16]
    prompt = template * 6 + [10, 11, 12, 13, 14]
    table = FakeTable({14: ([15, 30], [0.7, 0.3])})
    d = started(prompt, table)
    tree = d.propose(prompt)
    assert d.confidence == 1.0
    L = tree.sources.count(SPINE)
    assert L == 99 and len(tree) == 100  # B_eff = 100, ratio 1: the whole budget on the spine
    assert tree.tokens[1:8] == [15, 16, 10, 11, 12, 13, 14]
    assert d.stats["chain_extensions"] == 1 and d.stats["chain_extension_tokens"] == 100 - 20


def test_no_confidence_ablation_keeps_budget_b():
    template = [10, 11, 12, 13, 14, 15, 16]
    prompt = template * 6 + [10, 11, 12, 13, 14]
    d = started(prompt, FakeTable({14: ([15, 30], [0.7, 0.3])}), use_confidence=False)
    tree = d.propose(prompt)
    assert d.confidence == 0.0 and d.stats["b_eff_sum"] == 60
    assert tree.sources.count(SPINE) == 20 and len(tree) <= 60 and "chain_extensions" not in d.stats


# ------------------------------------------------------------------ observe


def test_observe_updates_table_with_root_prev_and_ema_and_spine_continuation():
    table = FakeTable({3: ([4, 40], [0.6, 0.4]), 4: ([5, 50], [0.6, 0.4])})
    d = started(PROMPT_WITH_MATCH[:-1], table, use_confidence=False)
    tree = d.propose(PROMPT_WITH_MATCH)
    assert d.route == "spine_tree"
    L = tree.sources.count(SPINE)  # 12: min(12, int(60 * 0.5))
    assert L == 12
    branch_under_4 = next(i for i in range(len(tree)) if tree.parents[i] == 1 and tree.sources[i] == BRANCH)
    d.observe(tree, outcome(tree, [0, 1, branch_under_4]))
    assert table.updates[-1] == (tree.tokens, tree.parents, PROMPT_WITH_MATCH[-2])
    assert d.ema.value == pytest.approx(0.3 * (1 / 12) + 0.7 * 0.5)
    assert d.stats["spine_continuations"] == 1 and d.stats["spine_continuation_tokens"] == 1


def test_observe_without_continuation_and_on_other_routes():
    table = FakeTable({3: ([4, 40], [0.6, 0.4])})
    d = started(PROMPT_WITH_MATCH[:-1], table, use_confidence=False)
    tree = d.propose(PROMPT_WITH_MATCH)
    d.observe(tree, outcome(tree, [0, 1, 2, 3]))  # spine only
    assert d.ema.value == pytest.approx(0.3 * (3 / 12) + 0.7 * 0.5)
    assert "spine_continuations" not in d.stats
    root_alt = tree.tokens.index(40)
    d.observe(tree, outcome(tree, [0, root_alt]))  # left at the root: not a spine continuation
    assert "spine_continuations" not in d.stats
    ema = d.ema.value
    d.table = FakeTable()
    chain_tree = d.propose(PROMPT_WITH_MATCH)
    assert d.route == "chain"
    d.observe(chain_tree, outcome(chain_tree, [0, 1]))  # chains do not move the EMA
    assert d.ema.value == ema and len(d.table.updates) == 1


def test_real_adjacency_table_prefill_harvest_and_fresh_per_prompt():
    prompt = [1, 2, 3, 4]
    logits = torch.full((4, V), -10.0)
    logits[torch.arange(4), torch.tensor([7, 8, 9, 5])] = 10.0  # after token 4 the model says 5
    d = GooseDrafter()
    d.begin(prompt, logits)
    d.propose([1, 2, 3, 4, 5])
    assert d.table.successors(4)[0][0] == 5
    assert d.table.successors(4, 3)[0][0] == 5  # bigram key (3, 4) from the prefill
    # a fresh prompt resets the table; without prefill harvest it starts empty
    d.begin([40, 41], torch.zeros(2, V))
    assert d.table.successors(4) == ([], [])
    off = GooseDrafter(prefill_harvest=False)
    off.begin(prompt, logits)
    assert off.table.successors(4) == ([], [])
    assert off.propose([1, 2, 3, 4, 5]).tokens == [5] and off.route == "ar"


def test_real_table_is_updated_from_every_node_with_parent_as_prev():
    d = GooseDrafter(prefill_harvest=False)
    d.begin([1, 2, 3], torch.zeros(3, V))
    tree = d.propose([1, 2, 3, 4])
    assert d.route == "ar"
    logits = torch.full((1, V), -10.0)
    logits[0, 6] = 10.0
    d.observe(tree, VerifyOutcome(logits, [6], [0], [6]))
    assert d.table.successors(4)[0][0] == 6
    assert d.table.successors(4, 3)[0][0] == 6  # root's prev = committed[-2]
    tree = d.propose([1, 2, 3, 4, 6])
    assert d.route == "ar"  # successors of 6 unknown yet
    d.observe(tree, VerifyOutcome(logits, [6], [0], [6]))
    tree = d.propose([1, 2, 3, 4, 6, 6])
    assert d.route == "branch_tree" and tree.tokens[:2] == [6, 6]


# ------------------------------------------------------------------ iso at Goose's budget


def test_iso_beff_budget_follows_confidence():
    cfg = method_config("iso3_beff")
    d = instantiate(cfg.drafter, _convert_="all")
    assert isinstance(d, IsotropicGooseBudgetDrafter) and d.branching == 3 and d.name == "iso3_beff"
    assert instantiate(method_config("iso5_beff").drafter).branching == 5
    d.begin([1, 2, 3, 4, 5], torch.zeros(5, V))
    assert d.node_budget([1, 2, 3, 4, 5, 6]) == 60  # no match: c = 0
    template = [10, 11, 12, 13, 14, 15, 16]
    assert d.node_budget([1, 2, 3, 4, 5, 6] + template * 6 + [10, 11, 12, 13, 14]) == 100  # consensus
    d.begin([7, 8, 9], torch.zeros(3, V))  # fresh matcher per prompt
    assert d.node_budget([7, 8, 9, 1]) == 60
    assert d.config()["max_extended_chain"] == 100


# ------------------------------------------------------------------ end to end on a tiny model


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_goose_generation_equals_greedy_ar_on_a_tiny_model(arch):
    from goose.engine.core.decode import generate
    from goose.engine.core.drafter import ARDrafter
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model(arch, seed=0)
    prompt = [5, 6, 7, 8, 9, 10, 11] * 2 + [5, 6, 7, 20, 21, 22, 23, 24, 25]
    ref = generate(verification_engine(model, eos_token_ids=(), context_length=256), ARDrafter(), prompt, 80)
    goose = GooseDrafter()
    for drafter in (goose, GooseDrafter(rho=0.0, use_bigram=False), IsotropicGooseBudgetDrafter(branching=3)):
        gen = generate(verification_engine(model, eos_token_ids=(), context_length=256), drafter, prompt, 80)
        assert gen.output_ids == ref.output_ids, drafter.name
        assert gen.forward_calls < ref.forward_calls
        if drafter is goose:
            assert set(gen.routes()) <= {"spine_tree", "branch_tree", "chain", "ar"}
            assert "spine_tree" in gen.routes()
            assert {
                k[len("route_") :]: v for k, v in goose.stats.items() if k.startswith("route_")
            } == gen.routes()
