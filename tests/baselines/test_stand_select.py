"""stand_select (baselines.stand_select): STAND's delayed tree with (K, L1, L2) chosen per step.

- `restrict_paths`: the first k of K i.i.d. paths cut to L2 draws are a draft of the smaller shape: averaged
  over every draft of the toy (verify_toy), the exact law on the restricted tree equals the full enumeration
  of the smaller shape's draft and walk, to 1e-12, for every verifier that applies; its structure on a
  hand-built tree.
- The selector's arithmetic: the rate rule, the online estimates per bin, a trained network's forward, the
  file round trip and its errors.
- The drafter: the chosen action reaches the drafted tree; the exploring schedule; greedy output equals AR;
  sampled output matches the target (chi-square, as the other sampled drafters).
"""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from baselines.stand_select.actions import Action, action_grid, action_values, contained
from baselines.stand_select.features import FEATURE_NAMES, LastStep, root_features
from baselines.stand_select.model import load_selector, selector_record
from baselines.stand_select.model import selector_path as selector_path_of
from baselines.stand_select.selector import OnlineSelector, TrainedSelector, choose
from goose.engine.core.verify.expected import applicable, expected_accepted
from goose.engine.core.verify.inputs import Dist
from goose.engine.core.verify.view import SampledTree, restrict_paths
from tests.engine.verify_toy import Brancher, Toy, draft_paths, enumerate_runs, mean_accepted, sampled_view

PROMPT = (0, 1)


@pytest.mark.parametrize(
    ("big", "small"), [((2, 1, 2), (1, 1, 2)), ((2, 1, 2), (2, 1, 1)), ((3, 0, 2), (2, 0, 1))]
)
def test_a_restricted_draft_has_the_smaller_shapes_exact_law(big, small):
    toy = Toy(seed=1)
    k, l1, l2 = big
    views: list[tuple[float, SampledTree]] = []

    def run(b: Brancher) -> tuple:
        view, _ = sampled_view(toy, draft_paths(b, toy=toy, prompt=PROMPT, k=k, trunk=l1, length=l2))
        views.append((b.prob, view))
        return (len(views),)

    enumerate_runs(run)
    assert sum(p for p, _ in views) == pytest.approx(1.0, abs=1e-12)
    smaller = partial(draft_paths, toy=toy, prompt=PROMPT, k=small[0], trunk=small[1], length=small[2])
    for verifier in ("rrs", "traversal", "rrs_iid", "gbv"):
        restricted = [(p, restrict_paths(v, small[0], small[2])) for p, v in views]
        exact = sum(p * expected_accepted(verifier, v) for p, v in restricted)
        assert exact == pytest.approx(mean_accepted(toy, PROMPT, smaller, verifier), abs=1e-12), verifier
        assert all(verifier in applicable(v) for _, v in restricted)
    whole = sum(p * expected_accepted("traversal", v) for p, v in views)
    assert whole > sum(p * expected_accepted("traversal", restrict_paths(v, *small[::2])) for p, v in views)


def test_restrict_paths_keeps_the_trunk_and_the_first_paths_cut():
    """Anchor 0 → trunk 1; paths (2, 3), (2, 4), (5, 6) under 1 (the first two share node 2)."""
    tokens, parents = [10, 11, 12, 13, 14, 15, 16], [-1, 0, 1, 2, 2, 1, 5]
    children = [[1], [2, 5], [3, 4], [], [], [6], []]
    q = ((12, 15), (0.5, 0.5))
    proposals = [((11,), (1.0,)), q, ((13, 14), (0.5, 0.5)), None, None, ((16,), (1.0,)), None]
    target = [Dist({}, 1.0) for _ in tokens]
    view = SampledTree(tokens, parents, children, proposals, target, [(2, 3), (2, 4), (5, 6)])
    sub = restrict_paths(view, 2, 1)
    assert sub.tokens == [10, 11, 12] and sub.parents == [-1, 0, 1] and sub.children == [[1], [2], []]
    assert sub.paths == [(2,), (2,)] and sub.proposals == [((11,), (1.0,)), q, None]
    assert restrict_paths(view, 3, 2).tokens == tokens and restrict_paths(view, 1, 2).paths == [(2, 3)]
    with pytest.raises(ValueError, match="i.i.d. paths"):
        restrict_paths(SampledTree(tokens[:2], parents[:2], [[1], []], proposals[:2], target[:2]), 1, 1)


def test_the_grid_and_the_actions_a_draft_contains():
    grid = action_grid(2, 1, 2, budget=5)
    assert grid == (
        Action(1, 0, 1),
        Action(1, 0, 2),
        Action(1, 1, 1),
        Action(1, 1, 2),
        Action(2, 0, 1),
        Action(2, 0, 2),
        Action(2, 1, 1),
    )  # (2, 1, 2) has 1 + 1 + 2 * 2 = 6 nodes: over the budget
    assert contained(Action(2, 0, 2), grid) == (
        Action(1, 0, 1),
        Action(1, 0, 2),
        Action(2, 0, 1),
        Action(2, 0, 2),
    )
    assert Action.parse("3-2-4") == Action(3, 2, 4) and Action(3, 2, 4).label() == "3-2-4"
    assert Action(3, 2, 4).nodes == 15


def test_choose_takes_the_best_rate_and_the_default_without_estimates():
    a, b = Action(1, 0, 1), Action(2, 0, 2)
    default = Action(3, 2, 4)
    assert choose({}, None, default) == default
    assert choose({a: 0.9, b: 1.2}, None, default) == b  # per step: the most accepted
    latency = {2: 1.0, 5: 1.5}.__getitem__
    assert choose({a: 0.9, b: 1.2}, latency, default) == a  # 1.9 / 1.0 > 2.2 / 1.5
    assert choose({a: 0.9, b: 1.9}, latency, default) == b  # 2.9 / 1.5 > 1.9


def test_online_estimates_are_decayed_means_per_bin():
    a, b = Action(1, 0, 1), Action(2, 0, 1)
    sel = OnlineSelector([a, b], decay=0.5)
    sure = [1.0, 0.9, *[0.0] * 8]  # known, top 0.9: the last bin
    unsure = [1.0, 0.2, *[0.0] * 8]
    unknown = [0.0, 0.0, *[0.0] * 8]
    assert [sel.bin_of(x) for x in (unknown, unsure, sure)] == [0, 1, 4]
    sel.learn(sure, {a: 1.0, b: 2.0})
    sel.learn(sure, {a: 0.0})
    assert sel.estimates(sure) == {a: pytest.approx(0.5 / 1.5, abs=1e-15), b: 2.0}
    assert sel.estimates(unsure) == {} and sel.estimates(unknown) == {}


def test_features_of_a_root_and_of_the_last_step():
    last = LastStep()
    x = root_features([0.5, 0.25, 0.25, 0.0], last, 0.6, 0.9)
    assert len(x) == len(FEATURE_NAMES)
    assert x[:4] == [1.0, 0.5, pytest.approx(1.5 * np.log(2), abs=1e-15), np.log1p(3)]
    assert x[8:] == [0.6, 0.9] and root_features(None, last, 1.0, 1.0)[:4] == [0.0] * 4
    # the walk stopped at node 1, whose q is (0.6, 0.4) on tokens 7, 8 and whose p is .3, .1 (rest outside)
    view = SampledTree(
        [5, 6],
        [-1, 0],
        [[1], []],
        [((6,), (1.0,)), ((7, 8), (0.6, 0.4))],
        [Dist({6: 1.0}, 0.0), Dist({7: 0.3, 8: 0.1}, 0.6)],
        [(1,)],
    )
    last.observe(view, [0, 1], decay=0.5)
    assert (last.p_on_q, last.overlap, last.accepted, last.accepted_mean) == (
        pytest.approx(0.4, abs=1e-15),
        pytest.approx(0.4, abs=1e-15),
        1.0,
        0.5,
    )


def test_a_trained_selector_round_trips_through_its_file(tmp_path):
    actions = [Action(1, 0, 1), Action(2, 1, 2)]
    rng = np.random.default_rng(0)
    f = len(FEATURE_NAMES)
    model = TrainedSelector(
        actions,
        rng.normal(size=f),
        np.ones(f),
        rng.normal(size=(3, f)),
        rng.normal(size=3),
        rng.normal(size=(2, 3)),
        rng.normal(size=2),
    )
    x = rng.normal(size=f)
    h = model.w1 @ (x - model.mean) + model.b1
    gelu = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    assert model.predict(x) == pytest.approx(model.w2 @ gelu + model.b2, abs=1e-12)
    path = tmp_path / "sel.json"
    path.write_text(json.dumps(selector_record(model, {"made": "test"})))
    loaded = load_selector(str(path))
    assert loaded.actions == tuple(actions) and loaded.predict(x).tolist() == model.predict(x).tolist()
    with pytest.raises(ValueError, match="selector = 'nope'.*or `online`"):
        load_selector("nope")
    with pytest.raises(ValueError, match="do not match"):
        TrainedSelector(actions, model.mean, model.std, model.w1[:, :3], model.b1, model.w2, model.b2)


def test_action_values_on_a_verified_tree_come_from_the_restricted_trees():
    toy = Toy(seed=2)
    view, _ = sampled_view(
        toy, draft_paths(Brancher((1, 0, 2, 1)), toy=toy, prompt=PROMPT, k=2, trunk=1, length=2)
    )
    big = Action(2, 1, 2)
    values = action_values(view, big, contained(big, action_grid(2, 1, 2, budget=8)), "traversal")
    assert set(values) == {Action(1, 1, 1), Action(1, 1, 2), Action(2, 1, 1), Action(2, 1, 2)}
    assert values[big] == expected_accepted("traversal", view)
    assert values[Action(1, 1, 1)] == expected_accepted("traversal", restrict_paths(view, 1, 1))


@pytest.mark.parametrize("verifier", ["rrs", "traversal"])
def test_the_shipped_selectors_load_with_their_provenance(verifier):
    """goose/data/selectors/smollm2-135m-<verifier>.json (make selector SELECTOR_VERIFIER=<verifier>): the 80
    actions of the default grid, the features of this code, trained on that verifier's values, and a
    held-out report on prompts it was not trained on."""
    name = f"smollm2-135m-{verifier}"
    selector = load_selector(name)
    assert selector.actions == action_grid(4, 4, 4, budget=40)
    record = json.loads(selector_path_of(name).read_text())
    provenance = record["provenance"]
    assert provenance["model"] == "smollm2-135m" and provenance["verifier"] == verifier
    assert provenance["split"]["heldout_roots"] == provenance["report"]["heldout"]["roots"] > 0
    assert set(selector.estimates([1.0, 0.9, 1.0, 1.0, 0.5, 0.5, 2.0, 2.0, 1.0, 1.0])) == set(
        selector.actions
    )
