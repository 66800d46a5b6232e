"""The acceptance record in W&B (goose.harness.tracking.acceptance_media, log_run, job._log_wandb),
against a stand-in `wandb` module: no W&B account, no network, no files."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from goose.harness import job, tracking
from goose.harness.compose import Tracking
from goose.harness.runner import Cell
from goose.records.acceptance import acceptance_summary

ROWS = [
    {"status": "ok", "step_accepted": [0, 2, 3], "step_tree_size": [4, 5, 6], "offered": {}, "accepted": {}},
    {"status": "ok", "step_accepted": [1], "depth_offered": [2, 1], "depth_accepted": [1, 0]},
]


class FakeWandb:
    """The parts of `wandb` that log_run touches, recording what is logged."""

    def __init__(self) -> None:
        self.logged: list[dict] = []
        self.Settings = lambda **kw: kw
        self.plot = SimpleNamespace(line=lambda table, x, y, title=None: ("line", table, x, y, title))

    class Histogram:
        def __init__(self, np_histogram):
            self.counts, self.edges = np_histogram

    class Table:
        def __init__(self, columns, data):
            self.columns, self.data = columns, data

    def init(self, **kw):
        fake = self

        class Run:
            dir, offline, url = "/nowhere", True, None
            settings = SimpleNamespace(sync_dir="/nowhere")
            summary: dict = {}

            def log(self, payload):
                fake.logged.append(payload)

            def finish(self):
                pass

        return Run()


def test_acceptance_media_histogram_and_curves():
    wandb = FakeWandb()
    media = tracking.acceptance_media(wandb, acceptance_summary(ROWS))
    hist = media["acceptance/length_histogram"]
    assert hist.counts == [1, 1, 1, 1] and hist.edges == [0.5, 1.5, 2.5, 3.5, 4.5]
    pos = media["acceptance/by_position"]
    assert pos.columns == ["position", "conditional", "marginal"]
    assert [row[0] for row in pos.data] == [1, 2, 3]
    assert [row[2] for row in pos.data] == pytest.approx([0.75, 0.5, 0.25])
    assert media["acceptance/by_position_chart"][0] == "line"
    depth = media["acceptance/by_depth"]
    assert depth.data == [[1, 2, 1, 0.5], [2, 1, 0, 0.0]]
    assert "acceptance/by_sibling_rank" not in media  # no row records ranks


def test_log_run_logs_acceptance_offline_without_wandb_account(monkeypatch, tmp_path):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = tracking.log_run(
        mode="offline",
        config={},
        summary={"tau": 2.0},
        rows=[],
        group="g",
        name="m/b/goose",
        directory=tmp_path,
        acceptance=acceptance_summary(ROWS),
    )
    assert out == "/nowhere"
    keys = set().union(*fake.logged)
    assert {"acceptance/length_histogram", "acceptance/by_position", "acceptance/by_depth"} <= keys


def test_log_wandb_passes_the_acceptance_record(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(tracking, "log_run", lambda **kw: seen.update(kw))
    tracking_on = Tracking(mode="offline", group="x", directory=tmp_path)
    summary = {"tau": 2.0, "speculation": acceptance_summary(ROWS)}
    job._log_wandb(tracking_on, summary, [], Cell("m", "b", "goose", {}, 8, "float32"))
    assert "speculation" not in seen["summary"] and seen["acceptance"] is summary["speculation"]
    job._log_wandb(Tracking(mode="disabled"), summary, [], Cell("m", "b", "g", {}, 8, "f"))
