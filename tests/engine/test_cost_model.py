"""Latency table: interpolation, persistence; calibration on a tiny model, its medians kept as measured;
the settle rule (outliers beyond k·MAD dropped, extra rounds while a median is uncertain, bounded) exactly,
on scripted step times."""

from __future__ import annotations

import statistics

import pytest
import torch

from goose.engine.budget.calibration import (
    MEASUREMENT_VERSION,
    calibrate,
    calibration_settings,
    calibration_tree,
    engine_latency,
)
from goose.engine.budget.cost_model import LatencyTable, at_kv
from goose.engine.budget.settle import ROBUST, SettleRule, inliers, median_error
from goose.engine.core.tree import SPINE
from goose.engine.forward.choose import verification_engine
from tests.engine.scripted_engine import ScriptedEngine, scripted_clock  # noqa: F401 (a fixture)
from tests.tiny_models import VOCAB, tiny_model


def test_interpolation_and_extrapolation():
    table = LatencyTable(sizes=[1, 2, 4, 8], seconds=[1.0, 1.0, 2.0, 4.0])
    assert table(1) == 1.0 and table(0) == 1.0 and table(4) == 2.0
    assert table(3) == pytest.approx(1.5)
    assert table(6) == pytest.approx(3.0)
    assert table(12) == pytest.approx(6.0)  # the last segment's slope
    assert table.curve(4) == [1.0, 1.0, 1.5, 2.0]
    assert table.relative() == [1.0, 1.0, 2.0, 4.0]
    assert LatencyTable(sizes=[1], seconds=[0.5])(100) == 0.5


def test_validation():
    with pytest.raises(ValueError):
        LatencyTable(sizes=[1, 1], seconds=[1.0, 2.0])
    with pytest.raises(ValueError):
        LatencyTable(sizes=[0, 2], seconds=[1.0, 2.0])
    with pytest.raises(ValueError):
        LatencyTable(sizes=[1, 2], seconds=[1.0])
    dip = LatencyTable(sizes=[1, 2, 4], seconds=[1.0, 1.2, 0.9])  # a dearer 2 than 4 stays as measured
    assert dip.curve(4) == pytest.approx([1.0, 1.2, 1.05, 0.9])


def test_save_and_load(tmp_path):
    table = LatencyTable(
        sizes=[1, 4], seconds=[0.01, 0.02], samples=[[0.01], [0.02]], meta={"dtype": "float32"}
    )
    table.save(tmp_path / "lat.json")
    assert LatencyTable.load(tmp_path / "lat.json") == table


@pytest.mark.parametrize("n", [1, 2, 5, 21, 22, 64, 128])
def test_calibration_tree_is_valid(n):
    tree = calibration_tree(n, anchor=3, vocab_size=VOCAB)
    tree.validate()
    assert len(tree) == n
    assert tree.sources.count(SPINE) == min(20, n - 1)


def test_calibrate_on_tiny_model():
    engine = verification_engine(tiny_model("llama"), eos_token_ids=())
    table = calibrate(engine, sizes=(2, 8, 32), kv_len=24, repeats=2, rule=None)
    assert table.sizes == [1, 2, 8, 32]
    assert table.seconds == [statistics.median(s) for s in table.samples]  # medians, not made monotone
    assert min(table.seconds) > 0
    assert [len(s) for s in table.samples] == [2, 2, 2, 2]
    assert table.meta["kv_len"] == 24 and table.meta["threads"] == torch.get_num_threads()
    assert table.meta["calibration"]["rule"] == "plain medians"
    assert engine.prefix_len == 24  # rolled back after every timed step
    assert engine_latency(engine, sizes=(2, 4), kv_len=8, repeats=1) is engine_latency(engine)
    robust = calibrate(engine, sizes=(2, 8), kv_len=24, repeats=3)  # the default rule on real steps
    assert robust.seconds == [ROBUST.estimate(s) for s in robust.samples]
    assert all(3 <= len(s) <= ROBUST.max_rounds for s in robust.samples)
    assert robust.meta["calibration"] == calibration_settings(sizes=(2, 8), kv_len=24, repeats=3)
    assert engine.prefix_len == 24


def test_engine_latency_reuses_a_curve_only_of_the_settings_asked_for():
    engine = verification_engine(tiny_model("llama"), eos_token_ids=())
    first = engine_latency(engine, sizes=(2,), kv_len=8, repeats=1)
    assert engine_latency(engine) is first  # no settings asked for: whatever the engine has
    assert engine_latency(engine, sizes=(2,), kv_len=8, repeats=1) is first
    other = engine_latency(engine, sizes=(2,), kv_len=8, repeats=1, rule=None)
    assert other is not first and other.meta["calibration"]["rule"] == "plain medians"


def test_inliers_drop_what_lies_beyond_k_mads_of_the_median():
    # median 10.05, MAD 0.05 -> sigma 0.0741, floored at 1% of the median: 0.1005; 3 sigma = 0.3015
    assert inliers([10.0, 10.1, 9.9, 10.05, 30.0]) == [10.0, 10.1, 9.9, 10.05]
    assert inliers([10.0, 10.1, 9.9, 10.05, 10.4]) == [10.0, 10.1, 9.9, 10.05]  # 0.35 > 0.3015
    assert inliers([10.0, 10.1, 9.9, 10.05, 10.35]) == [10.0, 10.1, 9.9, 10.05, 10.35]  # 0.30 <= 0.3015
    assert inliers([10.0, 10.1, 9.9, 10.05, 30.0], k=300.0) == [10.0, 10.1, 9.9, 10.05, 30.0]
    # MAD 0: the floor decides (1% of the median, times k = 3)
    assert inliers([1.0, 1.0, 1.0, 1.0, 1.02]) == [1.0, 1.0, 1.0, 1.0, 1.02]
    assert inliers([1.0, 1.0, 1.0, 1.0, 1.05]) == [1.0, 1.0, 1.0, 1.0]
    assert inliers([1.0, 1.0, 1.0, 1.0, 1.05], floor=0.0) == [1.0, 1.0, 1.0, 1.0]
    assert inliers([1.0, 1.0, 1.0, 1.0, 0.95]) == [1.0, 1.0, 1.0, 1.0]  # fast outliers too
    # broad samples: sigma = 1.4826 MAD; nothing beyond 3 sigma
    assert inliers([2.0, 3.0, 4.0, 5.0, 6.0]) == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert inliers([]) == [] and inliers([5.0]) == [5.0]


def test_median_error_is_the_relative_standard_error_of_the_median():
    assert median_error([1.0, 2.0, 3.0]) == pytest.approx(1.2533 * 1.4826 * 1.0 / 3**0.5 / 2.0)
    assert median_error([4.0, 4.0, 4.0, 4.0]) == 0.0
    assert median_error([7.0]) == 0.0
    assert median_error([]) == float("inf")


def test_settle_rule():
    rule = SettleRule()
    assert rule.estimate([10.0, 10.1, 9.9, 10.05, 30.0]) == pytest.approx(10.025)  # median of 4 inliers
    assert not rule.settled([10.0, 10.1, 9.9, 10.05, 30.0], repeats=5)  # 4 inliers < 5
    assert rule.settled([10.0, 10.1, 9.9, 10.05, 30.0], repeats=4)  # error 0.46% <= 1.5%
    assert not rule.settled([2.0, 3.0, 4.0, 5.0, 6.0], repeats=5)  # error 20.8%
    with pytest.raises(ValueError, match="extra_time"):
        SettleRule(extra_time=-1.0)
    with pytest.raises(ValueError, match="k > 0"):
        SettleRule(k=0.0)


def _table(engine, sizes=(1, 2, 4), repeats=5, **kwargs) -> LatencyTable:
    return calibrate(engine, sizes=sizes, kv_len=8, repeats=repeats, update_topk=None, **kwargs)


@pytest.mark.usefixtures("scripted_clock")
def test_plain_rule_times_repeats_rounds_and_takes_medians():
    engine = ScriptedEngine(lambda n, k: (n + (k % 3)) / 1024)  # k = 0 is the warm-up
    table = _table(engine, repeats=3, rule=None)
    assert table.samples == [[(n + k % 3) / 1024 for k in (1, 2, 3)] for n in (1, 2, 4)]
    assert table.seconds == [(n + 1) / 1024 for n in (1, 2, 4)]  # the median of n + 1, n + 2, n + 0
    assert dict(engine.steps) == {1: 4, 2: 4, 4: 4}
    assert table.meta["measurement"]["8"]["rounds"] == {"1": 3, "2": 3, "4": 3}


@pytest.mark.usefixtures("scripted_clock")
def test_robust_rule_drops_a_burst_and_times_that_size_again():
    def duration(n: int, k: int) -> float:
        return 8 * n / 1024 if (n, k) == (4, 2) else n / 1024  # the 2nd timed step of n = 4: a burst

    engine = ScriptedEngine(duration)
    table = _table(engine)
    assert table.samples[2] == [4 / 1024, 32 / 1024, 4 / 1024, 4 / 1024, 4 / 1024, 4 / 1024]
    assert table.seconds == [1 / 1024, 2 / 1024, 4 / 1024]  # the burst is gone, not just outvoted
    measured = table.meta["measurement"]["8"]
    assert measured == {
        "rounds": {"1": 5, "2": 5, "4": 6},
        "outliers": {"4": 1},
        "unsettled": [],
        "wall_s": measured["wall_s"],
    }
    plain = _table(ScriptedEngine(duration), rule=None)
    assert plain.seconds == table.seconds and len(plain.samples[2]) == 5  # a median of 5 outvotes one


@pytest.mark.usefixtures("scripted_clock")
def test_robust_rule_gives_up_at_its_bounds():
    def stubborn(n: int, k: int) -> float:
        return 16 / 1024 if n == 2 and k % 3 == 0 else n / 1024  # n = 2: every third step a burst

    settles = _table(ScriptedEngine(stubborn))  # 2, 2, 16, 2, 2, 16, 2: 5 inliers at the 7th round
    assert [len(s) for s in settles.samples] == [5, 7, 5] and settles.seconds[1] == 2 / 1024
    assert settles.meta["measurement"]["8"]["unsettled"] == []
    table = _table(ScriptedEngine(stubborn), rule=SettleRule(max_rounds=6))
    assert [len(s) for s in table.samples] == [5, 6, 5]  # 4 inliers < 5 when the bound is hit
    assert table.meta["measurement"]["8"]["unsettled"] == [2] and table.seconds[1] == 2 / 1024
    no_time = _table(ScriptedEngine(stubborn), rule=SettleRule(extra_time=0.0))
    assert [len(s) for s in no_time.samples] == [5, 5, 5]
    assert no_time.meta["measurement"]["8"]["unsettled"] == [2]
    # The time bound in timed seconds: the first 5 rounds took 1 x 5 + (2 + 2 + 16 + 2 + 2) + 4 x 5 = 49
    # (/1024 s); extra_time 0.1 allows 4.9: one round fits (n = 2's median, 2), it takes 16, then no more
    one = _table(ScriptedEngine(stubborn), rule=SettleRule(extra_time=0.1))
    assert [len(s) for s in one.samples] == [5, 6, 5]


@pytest.mark.usefixtures("scripted_clock")
def test_robust_rule_does_not_retime_what_cannot_settle():
    def broad(n: int, k: int) -> float:
        return (n + k % 5) / 1024 if n == 2 else n / 1024  # n = 2: 2..6 (/1024) in turn: error 20.8%

    table = _table(ScriptedEngine(broad))
    assert [len(s) for s in table.samples] == [5, 5, 5]  # 5 x (0.208 / 0.015)^2 = 961 samples > 15
    assert table.meta["measurement"]["8"]["unsettled"] == [2]
    assert SettleRule().hopeless(table.samples[1]) and not SettleRule().hopeless([1.0, 1.01, 0.99, 1.0, 1.02])
    # error 2.3% at 5 samples: 5 x (2.3 / 1.5)^2 = 12 <= 15, worth more rounds
    assert not SettleRule().hopeless([1.0, 1.03, 0.97, 1.0, 1.03])


def test_calibration_settings_name_what_was_measured():
    settings = calibration_settings(sizes=(4, 2), more_kv_lens=(256, 1024, 512))
    assert settings["sizes"] == [1, 2, 4] and settings["more_kv_lens"] == [512, 1024]
    assert settings["version"] == MEASUREMENT_VERSION and settings["rule"]["k"] == 3.0
    assert calibration_settings(rule=None)["rule"] == "plain medians"


def test_a_table_at_several_cache_lengths_interpolates_in_kv(tmp_path):
    # t(n, 256) = n, t(n, 1024) = 2n: linear in kv between, extended past 1024, clamped below 256
    table = LatencyTable(sizes=[1, 8], seconds=[1.0, 8.0], kv_len=256, kv_seconds={1024: [2.0, 16.0]})
    kvs, rows = table.curves(8)
    assert list(kvs) == [256, 1024] and rows.shape == (2, 8)
    assert at_kv(kvs, rows, 640) == pytest.approx([1.5 * n for n in range(1, 9)])
    assert at_kv(kvs, rows, 1792) == pytest.approx([3.0 * n for n in range(1, 9)])
    assert at_kv(kvs, rows, 10) == pytest.approx(list(range(1, 9)))
    one_kvs, one = LatencyTable(sizes=[1, 8], seconds=[1.0, 8.0]).curves(4)
    assert at_kv(one_kvs, one, 5000) == pytest.approx([1.0, 2.0, 3.0, 4.0])  # one curve: no kv at all
    table.save(tmp_path / "lat.json")
    assert LatencyTable.load(tmp_path / "lat.json") == table
    with pytest.raises(ValueError, match="kv_len"):
        LatencyTable(sizes=[1, 8], seconds=[1.0, 8.0], kv_seconds={1024: [2.0, 16.0]})
    with pytest.raises(ValueError, match=r"kv_seconds\[1024\]: needs 2 timings"):
        LatencyTable(sizes=[1, 8], seconds=[1.0, 8.0], kv_len=256, kv_seconds={1024: [2.0]})


def test_calibrate_at_more_cache_lengths_on_tiny_model():
    engine = verification_engine(tiny_model("llama"), eos_token_ids=())
    table = calibrate(engine, sizes=(2, 8), kv_len=16, repeats=1, more_kv_lens=(48, 16))
    assert table.kv_len == 16 and sorted(table.kv_seconds) == [48]  # the first length is not repeated
    assert len(table.kv_seconds[48]) == 3 and min(table.kv_seconds[48]) > 0
    with pytest.raises(ValueError, match="positive"):
        calibrate(engine, sizes=(2,), kv_len=16, repeats=1, more_kv_lens=(0,))
    assert sorted(
        engine_latency(engine, sizes=(2,), kv_len=16, repeats=1, more_kv_lens=(32,)).kv_seconds
    ) == [32]


@pytest.mark.usefixtures("scripted_clock")
def test_calibration_times_with_the_top_k_and_leaves_the_engine_as_it_found_it():
    seen = []
    engine = ScriptedEngine()
    verify = engine.verify

    def watching(tree, budget):
        seen.append(engine.topk_width)
        return verify(tree, budget)

    engine.verify = watching
    engine.topk_width = 7
    calibrate(engine, sizes=(1, 2), kv_len=8, repeats=3, update_topk=10, rule=None)
    assert set(seen) == {10} and engine.topk_width == 7
    calibrate(engine, sizes=(1, 2), kv_len=8, repeats=3, update_topk=10)  # the settle rule's return
    assert engine.topk_width == 7


def test_a_sampled_calibration_times_sampled_steps_and_records_the_sampling(monkeypatch):
    """With the run's sampling the calibration's steps go through the sampled verification (the warp over
    the vocabulary and the match against the draw), its record names temperature, top-p and top-k, and a
    greedy `sampling` is the greedy calibration itself (the same record, so the same cached curve)."""
    from goose.engine.core.sampling import SamplingParams

    engine = verification_engine(tiny_model("llama"), eos_token_ids=())
    sampled_steps = []
    sampled = engine._verify_sampled

    def counting(tree, budget, t0):
        sampled_steps.append(len(tree))
        return sampled(tree, budget, t0)

    monkeypatch.setattr(engine, "_verify_sampled", counting)
    small = {"sizes": (1, 2, 4), "kv_len": 8, "repeats": 2, "rule": None}
    greedy = calibrate(engine, **small)
    assert sampled_steps == [] and "sampling" not in greedy.meta["calibration"]
    warm = SamplingParams(temperature=0.7, top_p=0.9, top_k=5)
    table = calibrate(engine, **small, sampling=warm)
    assert sorted(set(sampled_steps)) == [1, 2, 4] and len(sampled_steps) == 3 * 3  # warm-up + 2 rounds
    assert table.meta["calibration"]["sampling"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 5}
    assert calibration_settings(**small, sampling=warm) != calibration_settings(**small)
    assert calibration_settings(**small, sampling=SamplingParams()) == calibration_settings(**small)
    assert engine.prefix_len == 8
