"""goose.method.config's shared pieces: `CalibratedPriorConfig` (hw_tree's and OPT-Tree's acceptance_prior)."""

from __future__ import annotations

import pytest

from baselines.hw_tree.config import HwTreeConfig
from baselines.opt_tree import OptTreeConfig
from goose.engine.core import acceptance_prior
from goose.method import config


def test_the_hand_prior_name_is_the_engines():
    assert config.HAND == acceptance_prior.HAND


@pytest.mark.parametrize("cls", [HwTreeConfig, OptTreeConfig])
def test_acceptance_prior_is_checked_and_left_out_of_the_config_at_its_default(cls):
    assert "acceptance_prior" not in cls().as_dict()  # earlier rows' config hashes stay
    assert cls(acceptance_prior="smollm2-135m").as_dict()["acceptance_prior"] == "smollm2-135m"
    with pytest.raises(ValueError, match=r"\.acceptance_prior = 3"):
        cls(acceptance_prior=3)
