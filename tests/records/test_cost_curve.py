"""goose.records.cost_curve: the interpolation rules of a measured cost curve, linear in the tree size (the
last segment extended) and in the KV length (clamped outside the measured lengths)."""

from __future__ import annotations

import pytest

from goose.records.cost_curve import CostCurve, PrefillCurve

CURVE = CostCurve(sizes=[1, 4], seconds={100: [1.0, 2.0], 300: [2.0, 4.0]})


def test_interpolation_in_tree_size_and_kv_length():
    assert CURVE.t(1, 100) == 1.0
    assert CURVE.t(2, 100) == pytest.approx(1 + 1 / 3)
    assert CURVE.t(8, 100) == pytest.approx(2 + 4 / 3)  # the last segment extended
    assert CURVE.t(1, 200) == pytest.approx(1.5)
    assert CURVE.t(4, 1000) == 4.0  # clamped beyond the longest measured KV length
    assert CURVE.t(4, 10) == 2.0


def test_a_prefill_curve_extends_its_last_segment_and_a_curve_needs_matching_timings():
    prefill = PrefillCurve(lengths=[100, 200], seconds=[0.5, 1.0])
    assert prefill.t(300) == pytest.approx(1.5)
    assert CostCurve.from_dict({"sizes": [1, 4], "seconds": {"100": [1.0, 2.0]}}).t(4, 100) == 2.0
    with pytest.raises(ValueError, match="2 timings for 3 sizes"):
        CostCurve(sizes=[1, 2, 4], seconds={100: [1.0, 2.0]})
