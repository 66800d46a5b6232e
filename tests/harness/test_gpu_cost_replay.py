"""experiments/gpu_cost_replay.py on a hand-built recording: node labels from the output, tokens committed
by a size-b prefix, the fixed methods' and hw_tree's projected speed-ups under hand-set curves, pools
recorded per curve against re-sized ones, the winner, and the curves read from the committed GPU records
and Sequoia's published profile."""

from __future__ import annotations

import pytest

from experiments.gpu_cost_replay import (
    GPU_RECORDS,
    SEQUOIA_PUBLISHED,
    THIS_MACHINE,
    committed_at,
    curve_function,
    markdown,
    path_labels,
    project,
    replay_fixed,
    replay_hw_tree,
    standard_curves,
    winners,
)


def test_path_labels_follow_the_output():
    output = [7, 1, 2, 9]
    assert path_labels(output, 0, [7, 1, 2, 3], [-1, 0, 1, 2]) == [True, True, True, False]
    assert path_labels(output, 0, [7, 1, 5, 2], [-1, 0, 0, 1]) == [True, True, False, True]
    # a rejected parent rejects its subtree, and nodes past the output's end are not accepted
    assert path_labels(output, 0, [7, 5, 2], [-1, 0, 1]) == [True, False, False]
    assert path_labels(output, 2, [2, 9, 4], [-1, 0, 1]) == [True, True, False]


def test_committed_tokens_of_a_prefix():
    labels, parents = [True, True, False, True], [-1, 0, 0, 1]
    assert committed_at(labels, parents, 4) == 3
    assert committed_at(labels, parents, 3) == 2
    assert committed_at(labels, parents, 1) == 1


CHAIN = {"values": [1.0, 0.9, 0.8, 0.1], "parents": [-1, 0, 1, 2], "labels": [True, True, True, False]}


def test_hw_tree_is_resized_per_curve():
    # E[committed | b] = 1, 1.9, 2.7, 2.8
    flat = replay_hw_tree([CHAIN], lambda n: 1.0)
    assert (flat["tree"], flat["tau"], flat["speedup"]) == (4, 3, 3)
    linear = replay_hw_tree([CHAIN], lambda n: float(n))  # every node a full step: AR
    assert (linear["tree"], linear["tau"], linear["speedup"]) == (1, 1, 1)
    cpu = replay_hw_tree([CHAIN], lambda n: 1 + 0.5 * (n - 1))  # rates 1, 1.27, 1.35, 1.12: b* = 3
    assert (cpu["tree"], cpu["tau"]) == (3, 3)
    assert cpu["speedup"] == pytest.approx(3 / 2.0)
    # a recorded gain counts as the drafter counts it: 1 more on the last node makes b = 4 pay (3.8 / 2.5)
    gained = replay_hw_tree([{**CHAIN, "gains": [0.0, 0.0, 0.0, 1.0]}], lambda n: 1 + 0.5 * (n - 1))
    assert gained["tree"] == 4 and gained["tau"] == 3


def test_fixed_methods_replay_their_recorded_steps():
    res = replay_fixed([(4, 3), (1, 1)], lambda n: 1 + 0.5 * (n - 1))  # 2.5 s + 1 s for 4 tokens
    assert res["speedup"] == pytest.approx(4 / 3.5)
    assert (res["tau"], res["tree"], res["steps"]) == (2, 2.5, 2)


def test_projection_and_winner_on_a_hand_built_recording():
    record = {
        "model": "tiny",
        "dtype": "float32",
        "benches": ["a", "b"],
        "max_new_tokens": 8,
        "prompts": [
            {"bench": "a", "steps": {"pld": [[4, 3], [1, 1]]}, "hw_tree_pools": [CHAIN]},
            {"bench": "b", "steps": {"pld": [[2, 2]]}, "hw_tree_pools": []},
        ],
    }
    curves = {"flat": lambda n: 1.0, "steep": lambda n: float(n)}
    table = project(record, curves)
    got = {(r["curve"], r["bench"], r["method"]): r["speedup"] for r in table}
    assert got[("flat", "a", "pld")] == pytest.approx(2.0)  # 4 tokens in 2 steps
    assert got[("flat", "a", "hw_tree")] == pytest.approx(3.0)
    assert ("flat", "b", "hw_tree") not in got  # no pools recorded there
    assert got[("flat", "all", "pld")] == pytest.approx(6 / 3)
    assert got[("steep", "a", "pld")] == pytest.approx(4 / 5)
    assert got[("steep", "a", "hw_tree")] == pytest.approx(1.0)
    win = winners(table)
    assert win[("flat", "a")] == "hw_tree" and win[("steep", "a")] == "hw_tree"
    assert win[("flat", "b")] == "pld"
    assert "projection, not a measurement" in markdown(table, record)


def test_pools_recorded_with_other_hw_tree_fields_are_replayed_under_their_own_name():
    name = "hw_tree[adj_width=10]"
    record = {
        "benches": ["a"],
        "pool_method": name,
        "prompts": [{"bench": "a", "steps": {"pld": [[4, 3]]}, "hw_tree_pools": [CHAIN]}],
    }
    got = {(r["bench"], r["method"]): r["speedup"] for r in project(record, {"flat": lambda n: 1.0})}
    assert got[("a", name)] == pytest.approx(3.0) and ("a", "hw_tree") not in got


def test_pools_recorded_under_a_curve_are_replayed_there_and_others_are_resized_and_marked():
    # under "flat" hw_tree verified a 2-node tree (its own recording); "steep" has no recording of its own
    flat_pools = [{"values": [1.0, 0.9], "parents": [-1, 0], "labels": [True, True]}]
    record = {
        "benches": ["a"],
        "prompts": [
            {"bench": "a", "steps": {}, "hw_tree_pools": {THIS_MACHINE: [CHAIN], "flat": flat_pools}}
        ],
    }
    curves = {THIS_MACHINE: lambda n: 1.0, "flat": lambda n: 1.0, "steep": lambda n: float(n)}
    rows = {r["curve"]: r for r in project(record, curves) if r["bench"] == "a"}
    assert (rows["flat"]["tau"], rows["flat"]["resized"]) == (2, False)  # its own pools, not CHAIN's 3
    assert (rows[THIS_MACHINE]["tau"], rows[THIS_MACHINE]["resized"]) == (3, False)
    assert (rows["steep"]["tree"], rows["steep"]["resized"]) == (1, True)  # CHAIN re-sized for "steep"
    assert "*re-sized*" in markdown(
        project(record, curves), {**record, "model": "m", "dtype": "d", "max_new_tokens": 1}
    )
    # a recording of one list of pools (before per-curve recording) is this machine's
    old = {"benches": ["a"], "prompts": [{"bench": "a", "steps": {}, "hw_tree_pools": [CHAIN]}]}
    rows = {r["curve"]: r for r in project(old, curves) if r["bench"] == "a"}
    assert rows[THIS_MACHINE]["resized"] is False and rows["flat"]["resized"] is True


def test_curves_of_the_gpu_record_and_the_published_profile():
    s = SEQUOIA_PUBLISHED
    t = curve_function(s["sizes"], s["relative"])
    assert (t(1), t(8), t(16), t(32)) == pytest.approx((1.0, 1.2, 1.4, 1.8))
    assert t(24) == pytest.approx(1.6) and t(64) == pytest.approx(2.6)  # linear between and beyond
    assert len(GPU_RECORDS) >= 2  # the shipped H200 and H100 records
    curves = standard_curves(None, GPU_RECORDS)
    for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):  # each GPU's curves under their own names
        names = " ".join(k for k in curves if f"({gpu}," in k)
        assert "vicuna-7b eager" in names and "llama3-8b graphs" in names and "measured" in names
    for name, c in curves.items():
        assert c(64) >= c(1) > 0, name


def test_recorded_labels_agree_with_the_engine_on_the_verified_prefix():
    """On a tiny model the labels read off the output give, for the prefix hw_tree verified, exactly the
    tokens the engine committed at that step."""
    from baselines.hw_tree import HwTreeDrafter
    from experiments.gpu_cost_replay import PoolRecorder
    from goose.engine.core.decode import generate
    from goose.engine.forward.choose import verification_engine
    from tests.tiny_models import tiny_model

    model = tiny_model("llama", seed=3)
    hw = HwTreeDrafter()
    hw.use_latency(lambda n: 1.0 + 0.05 * n)
    recorder = PoolRecorder(hw)
    gen = generate(
        verification_engine(model, eos_token_ids=()), hw, [5, 6, 7, 8, 5, 6, 7, 8, 5, 6], 40, on_step=recorder
    )
    pools = recorder.labelled(gen.output_ids)
    assert len(pools) == len(gen.steps)
    for pool, step in list(zip(pools, gen.steps, strict=True))[:-1]:  # the last step may be cut at the limit
        assert committed_at(pool["labels"], pool["parents"], pool["verified"]) == step.new_tokens
    assert any(len(p["values"]) > p["verified"] for p in pools)  # the pools hold more than was verified
    # the verified prefixes alone, re-sized under the recording's own curve, give back the verified sizes
    prefixes = recorder.labelled(gen.output_ids, whole=False)
    assert all(len(p["values"]) == p["verified"] for p in prefixes)
    replayed = replay_hw_tree(prefixes, lambda n: 1.0 + 0.05 * n)
    assert replayed["tree"] == pytest.approx(sum(s.tree_size for s in gen.steps) / len(gen.steps))


def test_a_missing_gpu_record_is_refused_before_recording(tmp_path):
    from experiments import gpu_cost_replay

    with pytest.raises(SystemExit, match="no GPU record at .*nowhere.json"):
        gpu_cost_replay.main(["--gpu-record", str(tmp_path / "nowhere.json"), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()  # nothing recorded, nothing written


def test_several_fields_in_one_hw_tree_set_are_refused_with_the_way_to_pass_them(capsys):
    from experiments import gpu_cost_replay

    args = gpu_cost_replay.parse_args(["--hw-tree-set", "adj_width=10", "--hw-tree-set", "row_value=false"])
    assert args.hw_tree_set == ["adj_width=10", "row_value=false"]
    assert gpu_cost_replay.parse_args(["--hw-tree-set", "spine_lens=[4,8]"]).hw_tree_set == [
        "spine_lens=[4,8]"
    ]
    for bad in ("adj_width=10,row_value=false", "adj_width"):
        with pytest.raises(SystemExit):
            gpu_cost_replay.parse_args(["--hw-tree-set", bad])
        assert "one FIELD=VALUE per --hw-tree-set; repeat the flag" in capsys.readouterr().err
