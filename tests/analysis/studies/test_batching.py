"""The batching study's analysis (analysis/studies/batching/): the replay's closed loop on hand-made traces,
the surface's interpolation, and the table's ratios per repeat, on rows built by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.studies.batching.goodput import goodput_table
from analysis.studies.batching.replay import Trace, grid_surface, replay, rows_surface
from analysis.studies.batching.throughput import divergences, stops_paying, table

A = Trace(1.0, ((2, 2, 0.0), (2, 1, 100.0)))  # 1 + 3 tokens
B = Trace(1.0, ((1, 1, 0.0),))  # 1 + 1 tokens


def flat(k: int, n: int) -> float:
    return 0.5


def test_one_at_a_time_the_requests_add_up():
    """A: prefill 1 + steps 0.5 and 0.5 + 0.1 host; B: prefill 1 + step 0.5: 6 tokens in 3.6 s."""
    assert replay([A, B], 1, flat) == pytest.approx(6 / 3.6)


def test_together_they_share_the_forward_and_pay_each_others_host_time():
    """Both prefills (2 s), one step of both (0.5 s), A's last step alone (0.5 + 0.1 s): 6 tokens in 3.1 s."""
    assert replay([A, B], 2, flat) == pytest.approx(6 / 3.1)


def test_a_step_costs_the_padded_batch():
    """With t(k, n) = k · n / 10 the shared step costs t(2, 2) = 0.4 (B's one node padded to A's two)."""
    assert replay([A, B], 2, lambda k, n: k * n / 10) == pytest.approx(6 / (2 + 0.4 + 0.2 + 0.1))


def test_surfaces_interpolate_linearly_and_batch_1_curves_take_all_rows():
    grid = grid_surface([1, 4], {1: [1.0, 4.0], 4: [2.0, 8.0]})
    assert grid(1, 2) == pytest.approx(2.0) and grid(4, 4) == pytest.approx(8.0)
    assert grid(2, 1) == pytest.approx(1 + 1 / 3) and grid(1, 8) == pytest.approx(8.0)  # k between, n beyond
    assert rows_surface([1, 16], [1.0, 2.5])(4, 2) == pytest.approx(1 + 1.5 * 7 / 15)


def rows(method: str, c: int, rates: list[float], diverged=()) -> list[dict]:
    return [
        dict(
            model="m",
            dtype="float32",
            run="main",
            method=method,
            concurrency=c,
            repeat=r,
            tokens_per_s=t,
            tpot_p50_s=0.01,
            tpot_p99_s=0.02,
            nodes=10,
            waste_nodes=4,
            draft_s=1.0,
            forward_s=2.0,
            walk_s=0.5,
            update_s=0.5,
            requests=4,
            diverged=list(diverged),
        )
        for r, t in enumerate(rates)
    ]


def test_ratios_pair_each_repeat_with_its_own_ar_and_name_where_a_method_stops_paying():
    df = pd.DataFrame(
        rows("ar", 1, [10.0, 20.0])
        + rows("pld", 1, [15.0, 22.0])
        + rows("ar", 4, [40.0, 40.0])
        + rows("pld", 4, [30.0, 36.0], [{"near_tie": True}])
    )
    out, curves = table(df)
    pld4 = next(r for r in out if r[3] == "pld" and r[4] == "4")
    assert pld4[7] == "0.82 [0.75, 0.90]×"  # 30/40 and 36/40: each repeat over its own AR
    assert pld4[8] == "2.20 [2.00, 2.40]×"  # over AR at concurrency 1 (median 15 tok/s)
    assert pld4[11] == "40%" and pld4[12] == "25 / 50 / 12 / 12"
    assert pld4[13] == "6/8 (2 near-tie, 0 real)"  # one near-tie in each repeat
    pld1 = next(r for r in out if r[3] == "pld" and r[4] == "1")
    assert pld1[7] == "1.30 [1.10, 1.50]×"
    assert stops_paying(curves) == ["m float32 (main) pld: below AR from concurrency 4 (c1 1.30×, c4 0.82×)"]
    assert divergences(pd.DataFrame(rows("ar", 1, [1.0]))) == "4/4"


def test_goodput_counts_requests_meeting_a_target_set_by_batch_1_ar():
    """Batch-1 AR's request TPOTs 10 / 10 / 20 / 30 ms: median 15 ms, targets 22.5 ms (1.5×) and 30 ms (2×).
    At concurrency 2, AR's four requests take 20 / 20 / 25 / 40 ms in 2 s rounds, PLD's 20 / 40 / 40 / 40 ms in
    1 s rounds: at 22.5 ms AR meets 2 (1 request/s), PLD 1 (1 request/s); at 30 ms AR 3 (1.5/s), PLD 1."""

    def rounds(method: str, c: int, tpots: list[float], wall: float) -> list[dict]:
        out = rows(method, c, [1.0, 1.0])
        for r in out:
            r |= {"tpot_s": [t / 1e3 for t in tpots], "wall_time_s": wall}
        return out

    df = pd.DataFrame(
        rounds("ar", 1, [10, 10, 20, 30], 4.0)
        + rounds("ar", 2, [20, 20, 25, 40], 2.0)
        + rounds("pld", 2, [20, 40, 40, 40], 1.0)
    )
    out = {(r[3], r[4], r[5]): r[6:] for r in goodput_table(df)}
    assert out[("ar", "1", "1.5× AR (22.5)")] == ["6/8", "0.75 [0.75, 0.75]", "1.00 [1.00, 1.00]×"]
    assert out[("ar", "2", "1.5× AR (22.5)")] == ["4/8", "1.00 [1.00, 1.00]", "1.00 [1.00, 1.00]×"]
    assert out[("pld", "2", "1.5× AR (22.5)")] == ["2/8", "1.00 [1.00, 1.00]", "1.00 [1.00, 1.00]×"]
    assert out[("ar", "2", "2× AR (30.0)")] == ["6/8", "1.50 [1.50, 1.50]", "1.00 [1.00, 1.00]×"]
    assert out[("pld", "2", "2× AR (30.0)")] == ["2/8", "1.00 [1.00, 1.00]", "0.67 [0.67, 0.67]×"]
