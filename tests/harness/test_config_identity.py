"""Moving the defaults into their dataclasses changed no cell: every shipped method, bench, model and
experiment job resolves to the drafter config, config_hash, bench and model specs stored in
data/config_identity.json (written by config_snapshot.py from the tree before the move).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import config_snapshot

STORED = json.loads((Path(__file__).parent / "data" / "config_identity.json").read_text())


@pytest.mark.parametrize("group", ["method", "bench", "model"])
def test_every_shipped_group_config_resolves_as_before(group):
    got = {
        path.stem: config_snapshot._job(config_snapshot._compose([f"{group}={path.stem}"]))
        for path in sorted((config_snapshot.CONF_DIR / group).glob("*.yaml"))
    }
    assert sorted(got) == sorted(STORED[group])
    for name, job in got.items():
        assert job == STORED[group][name], name


@pytest.mark.slow
def test_every_experiment_job_resolves_as_before():
    got = config_snapshot.snapshot()["experiment"]
    assert sorted(got) == sorted(STORED["experiment"])
    for name, jobs in got.items():
        assert jobs == STORED["experiment"][name], name
