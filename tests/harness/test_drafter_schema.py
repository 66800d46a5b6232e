"""One home per default: the drafters' config dataclasses. Every drafter a method YAML names declares its
hyperparameters in one frozen config class and takes them as keywords; the tree drafters share one
candidate-pool config; the structured config of each drafter (goose.harness.drafter_schema) is generated from
its config class; a method YAML that pulls it in names only its _target_ and what differs.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from baselines.eagle2 import Eagle2Config, Eagle2Drafter
from baselines.hierarchy import HierarchyDrafter
from baselines.iso_budget import IsotropicGooseBudgetDrafter
from baselines.isotropic import IsotropicDrafter
from baselines.logitspec import LogitSpecDrafter
from baselines.lookahead import LookaheadDrafter
from baselines.opt_tree import OptTreeDrafter
from baselines.pld import PromptLookupDrafter
from baselines.sam import SamDrafter
from baselines.self_draft import SelfDraftDrafter
from baselines.source_select import SourceSelectDrafter
from baselines.stand import StandDrafter
from baselines.suffix import SuffixDecodingDrafter
from baselines.token_recycling import TokenRecyclingDrafter
from goose.engine.core.drafter import ARDrafter
from goose.harness.drafter_schema import (
    CONF_DIR,
    DRAFTER_GROUP,
    _import_class,
    check_drafter,
    drafter_keys,
    method_targets,
    register_drafters,
)
from goose.method.config import CandidatePoolConfig, GooseConfig
from goose.method.drafter import GooseDrafter

TREE_DRAFTERS = [GooseDrafter, Eagle2Drafter, IsotropicDrafter, IsotropicGooseBudgetDrafter, OptTreeDrafter]
OTHER_DRAFTERS = [
    PromptLookupDrafter,
    TokenRecyclingDrafter,
    SamDrafter,
    SuffixDecodingDrafter,
    StandDrafter,
    SelfDraftDrafter,
    HierarchyDrafter,
    LogitSpecDrafter,
    LookaheadDrafter,
    SourceSelectDrafter,
]
DRAFTER_CLASSES = [_import_class(t) for t in method_targets() if not t.endswith(".ARDrafter")]


@pytest.mark.parametrize("drafter", DRAFTER_CLASSES, ids=lambda d: d.__name__)
def test_every_drafter_declares_its_hyperparameters_in_one_config_class(drafter):
    """One way to declare a method: a frozen config class, and a constructor that takes its fields as keywords
    (plus the row label `name`) and restates none of them."""
    assert dataclasses.is_dataclass(drafter.config_class)
    assert drafter.config_class.__dataclass_params__.frozen
    params = list(inspect.signature(drafter.__init__).parameters.values())[1:]
    named = [p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert named in ([], ["name"]) and params[-1].kind is inspect.Parameter.VAR_KEYWORD, drafter.__name__
    assert drafter_keys(drafter) == tuple(named) + drafter.config_class.field_names()


@pytest.mark.parametrize("drafter", TREE_DRAFTERS, ids=lambda d: d.__name__)
def test_tree_drafters_share_the_candidate_pool_config(drafter):
    assert issubclass(drafter.config_class, CandidatePoolConfig)
    pool = {f.name: f.default for f in dataclasses.fields(CandidatePoolConfig)}
    mine = {f.name: f.default for f in dataclasses.fields(drafter.config_class)}
    assert {k: mine[k] for k in pool} == pool == {k: getattr(GooseConfig(), k) for k in pool}


def test_the_pool_defaults_are_table_5():
    pool = CandidatePoolConfig()
    assert (pool.budget, pool.max_depth, pool.k, pool.min_score) == (60, 6, 10, 0.01)
    assert pool.use_bigram and pool.prefill_harvest and Eagle2Config().topk == 10


def _schema(name: str) -> dict:
    register_drafters()
    node = ConfigStore.instance().repo[DRAFTER_GROUP][f"{name}.yaml"].node
    return OmegaConf.to_container(node)


def test_method_yamls_name_only_what_differs_from_the_drafter_defaults():
    seen = 0
    for path in sorted((CONF_DIR / "method").glob("*.yaml")):
        raw = OmegaConf.to_container(OmegaConf.load(path))
        pulled = [d for d in raw.get("defaults", []) if isinstance(d, dict) and "/drafter@drafter" in d]
        if not pulled:
            continue
        schema = _schema(pulled[0]["/drafter@drafter"])
        assert raw["drafter"]["_target_"] == schema["_target_"], path.name
        restated = [
            k for k, v in raw["drafter"].items() if k not in ("_target_", "name") and schema.get(k) == v
        ]
        assert not restated, (path.name, restated)
        seen += 1
    assert seen >= 9  # goose, eagle2, iso3, iso3_beff, opt_tree, pld, tr, sam, suffix


@pytest.mark.parametrize("drafter", OTHER_DRAFTERS, ids=lambda d: d.__name__)
def test_every_drafter_schema_takes_its_defaults_from_its_config_dataclass(drafter):
    """The structured config's defaults are the config dataclass's (plain ones; TR's template is a
    tuple of paths, settable with +method.drafter.template), and the drafter logs what it was built with."""
    schema = _schema(drafter.__name__)
    config = drafter.config_class()
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "template":
            assert f.name not in schema
            continue
        expected = list(value) if isinstance(value, tuple) else value
        if f.default is None:  # resolved on creation (SuffixConfig.max_spec_tokens -> max_depth)
            expected = None
        assert schema[f.name] == expected, (drafter.__name__, f.name)
    assert drafter().cfg == config


def test_drafter_ranges_are_checked_with_the_drafters_messages():
    with pytest.raises(
        ValueError, match=r"OptTreeDrafter.spine_prior = 1.5: must be a number in \[0.0, 1.0\]"
    ):
        check_drafter("opt_tree", {"_target_": "baselines.opt_tree.OptTreeDrafter", "spine_prior": 1.5})
    with pytest.raises(ValueError, match="not a hyperparameter of OptTreeDrafter.*prior_strength"):
        check_drafter("opt_tree", {"_target_": "baselines.opt_tree.OptTreeDrafter", "rho": 0.5})


def test_unknown_and_missing_keys_name_the_field_and_the_valid_ones():
    with pytest.raises(
        ValueError, match=r"method.drafter.window = 3: not a hyperparameter of HierarchyDrafter"
    ):
        check_drafter("hierarchy", {"_target_": "baselines.hierarchy.HierarchyDrafter", "window": 3})
    with pytest.raises(ValueError, match="valid ones: name, max_ngram_size, min_context_ngram"):
        check_drafter("hierarchy", {"_target_": "baselines.hierarchy.HierarchyDrafter", "window": 3})
    with pytest.raises(ValueError, match="method.drafter.branching is missing: IsotropicDrafter"):
        check_drafter("iso3", {"_target_": "baselines.isotropic.IsotropicDrafter"})
    with pytest.raises(ValueError, match=r"SelfDraftDrafter.top_k = 0: must be an integer >= 1"):
        check_drafter("self_draft", {"_target_": "baselines.self_draft.SelfDraftDrafter", "top_k": 0})
    with pytest.raises(ValueError, match="not a hyperparameter of ARDrafter .* valid ones: name"):
        check_drafter("ar", {"_target_": "goose.engine.core.drafter.ARDrafter", "budget": 4})


def test_a_renamed_drafter_keeps_its_config():
    assert SamDrafter().name == "sam" and SamDrafter(name="sam2").name == "sam2"
    assert SamDrafter(name="sam2").config() == SamDrafter().config()
    assert ARDrafter().name == "ar" and "name" not in drafter_keys(PromptLookupDrafter)
