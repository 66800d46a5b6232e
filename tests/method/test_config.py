"""goose.method.config's shared pieces: `CalibratedPriorConfig` (hw_tree's and OPT-Tree's acceptance_prior)."""

from __future__ import annotations

import pytest

from baselines.hw_tree.config import HwTreeConfig
from baselines.opt_tree import OptTreeConfig
from goose.engine.core import acceptance_prior
from goose.method import config


def test_the_prior_names_are_the_engines():
    assert (config.HAND, config.AUTO) == (acceptance_prior.HAND, acceptance_prior.AUTO)


@pytest.mark.parametrize("cls", [HwTreeConfig, OptTreeConfig])
def test_acceptance_prior_is_checked_and_left_out_of_the_config_where_it_runs_the_hand_prior(cls):
    default = {HwTreeConfig: config.HAND, OptTreeConfig: config.AUTO}[cls]  # auto: resolved by the harness
    assert cls().acceptance_prior == default
    assert "acceptance_prior" not in cls().as_dict()  # unresolved: the hand prior's config hash
    assert "acceptance_prior" not in cls(acceptance_prior="hand").as_dict()
    assert cls(acceptance_prior="smollm2-135m").as_dict()["acceptance_prior"] == "smollm2-135m"
    with pytest.raises(ValueError, match=r"\.acceptance_prior = 3"):
        cls(acceptance_prior=3)
