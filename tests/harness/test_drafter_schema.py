"""One home per default: the drafters' config dataclasses. The tree drafters share one candidate-pool
config; the structured config of each drafter (goose.harness.drafter_schema) carries its defaults; a method
YAML that pulls it in names only its _target_ and what differs.
"""

from __future__ import annotations

import dataclasses

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from baselines.eagle2 import Eagle2Config, Eagle2Drafter
from baselines.iso_budget import IsotropicGooseBudgetDrafter
from baselines.isotropic import IsotropicDrafter
from baselines.opt_tree import OptTreeDrafter
from baselines.pld import PromptLookupDrafter
from baselines.sam import SamDrafter
from baselines.suffix import SuffixDecodingDrafter
from baselines.token_recycling import TokenRecyclingDrafter
from goose.harness.drafter_schema import CONF_DIR, DRAFTER_GROUP, check_drafter, register_drafters
from goose.method.config import CandidatePoolConfig, GooseConfig
from goose.method.drafter import GooseDrafter

TREE_DRAFTERS = [GooseDrafter, Eagle2Drafter, IsotropicDrafter, IsotropicGooseBudgetDrafter, OptTreeDrafter]
OTHER_DRAFTERS = [PromptLookupDrafter, TokenRecyclingDrafter, SamDrafter, SuffixDecodingDrafter]


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
