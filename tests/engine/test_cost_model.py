"""Latency table: interpolation, persistence; calibration on a tiny model, its medians kept as measured."""

from __future__ import annotations

import statistics

import pytest
import torch

from goose.engine.budget.cost_model import (
    LatencyTable,
    at_kv,
    calibrate,
    calibration_tree,
    engine_latency,
)
from goose.engine.core.tree import SPINE
from goose.engine.forward.choose import verification_engine
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
    table = calibrate(engine, sizes=(2, 8, 32), kv_len=24, repeats=2)
    assert table.sizes == [1, 2, 8, 32]
    assert table.seconds == [statistics.median(s) for s in table.samples]  # medians, not made monotone
    assert min(table.seconds) > 0
    assert [len(s) for s in table.samples] == [2, 2, 2, 2]
    assert table.meta["kv_len"] == 24 and table.meta["threads"] == torch.get_num_threads()
    assert engine.prefix_len == 24  # rolled back after every timed step
    assert engine_latency(engine, sizes=(2, 4), kv_len=8, repeats=1) is engine_latency(engine)


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
