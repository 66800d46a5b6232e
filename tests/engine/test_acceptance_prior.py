"""Calibrated acceptance priors (goose.engine.core.acceptance_prior): the file format and its checks, the
lookup with its fallback to the hand prior, the Beta update and its cap, and what a prior does to
`AcceptanceModel`'s rates on a hand-built tree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from goose.engine.core.acceptance import AcceptanceModel
from goose.engine.core.acceptance_prior import (
    DEFAULT_CAP,
    HAND,
    POOLED,
    PRIORS_DIR,
    PROVENANCE_FIELDS,
    PriorFileError,
    PriorTable,
    calibrate,
    find_prior,
    load_prior,
    model_family,
    prior_document,
    read_prior,
    shipped_priors,
    table_document,
    write_prior,
)
from goose.engine.core.tree import BRANCH, SPINE, DraftTree

SHAPE = AcceptanceModel.SHAPE
PROVENANCE = {k: f"<{k}>" for k in PROVENANCE_FIELDS}


def counts(cells: dict[tuple[int, int, int], tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    reached, accepted = np.zeros(SHAPE), np.zeros(SHAPE)
    for idx, (r, a) in cells.items():
        reached[idx], accepted[idx] = r, a
    return reached, accepted


def prior_file(
    tmp_path: Path, name: str = "toy-1m-bfloat16", model: str = "toy-1m", cap: float = 20.0
) -> Path:
    goose = counts({(SPINE, 1, 0): (10, 9), (BRANCH, 1, 1): (4, 0)})
    tr = counts({(BRANCH, 1, 0): (100, 30)})
    pooled = (goose[0] + tr[0], goose[1] + tr[1])
    hand_mean, hand_strength = AcceptanceModel().cell_prior()
    table = table_document(
        ("source", "depth", "rank"),
        {"estimator": "hand"},
        {"goose": goose, "tr": tr, POOLED: pooled},
        hand_mean,
        hand_strength,
        cap,
    )
    doc = prior_document(name, model, cap, PROVENANCE, {"auto_budget": table})
    return write_prior(tmp_path / f"{name}.json", doc)


def test_calibrate_is_the_hand_priors_beta_update_capped():
    reached = np.array([0.0, 4.0, 1000.0])
    accepted = np.array([0.0, 1.0, 250.0])
    mean, strength = calibrate(reached, accepted, 0.6, 2.0, cap=20.0)
    assert mean.tolist() == [0.6, (1 + 1.2) / 6, (250 + 1.2) / 1002]
    assert strength.tolist() == [0.0, 6.0, 20.0]  # 0: not calibrated; 1002 pseudo-observations capped at 20


def test_round_trip_keeps_counts_means_strengths_and_provenance(tmp_path):
    prior = read_prior(prior_file(tmp_path))
    assert (prior.name, prior.model, prior.family, prior.cap) == ("toy-1m-bfloat16", "toy-1m", "toy", 20.0)
    assert prior.provenance == PROVENANCE
    goose = prior.table("auto_budget", "goose")
    assert goose is not None and goose.section == "goose" and goose.name == "toy-1m-bfloat16"
    assert goose.reached[SPINE, 1, 0] == 10 and goose.accepted[SPINE, 1, 0] == 9
    assert goose.mean[SPINE, 1, 0] == round((9 + 2 * 0.6) / 12, 5)
    assert goose.strength[SPINE, 1, 0] == 12.0
    assert goose.strength[BRANCH, 1, 0] == 0.0  # tr's cell: not in goose's section
    assert np.count_nonzero(goose.strength) == 2
    # a method without a section gets the pooled one; a table the file lacks: none
    assert prior.table("auto_budget", "eagle2").section == POOLED
    assert prior.table("hw_tree", "hw_tree") is None
    with pytest.raises(ValueError):  # shared across a process: read-only
        goose.mean[0, 0, 0] = 1.0


def test_a_prior_sets_the_first_steps_rates_and_the_beta_update_after_it():
    goose = counts({(SPINE, 1, 0): (10, 9), (BRANCH, 1, 1): (4, 0)})
    hand_mean, hand_strength = AcceptanceModel().cell_prior()
    mean, strength = calibrate(*goose, hand_mean, hand_strength, cap=20.0)
    table = PriorTable("toy", "goose", mean, strength, *goose, cap=20.0)
    model = AcceptanceModel(prior=table)
    assert model.prior_name == "toy" and AcceptanceModel().prior_name == HAND
    tree = DraftTree.single(7)
    tree.add(8, 0, SPINE)  # 1: spine, depth 1, rank 0 (calibrated)
    tree.add(9, 1, SPINE)  # 2: spine, depth 2 (not calibrated: hand prior 0.6)
    tree.add(5, 0, BRANCH)  # 3: branch, depth 1, rank 1 (calibrated)
    keys = model.keys(tree)
    m1, m3 = (9 + 2 * 0.6) / 12, (0 + 2 * 0.35 / 2) / 6
    assert model.rates(keys) == pytest.approx([m1, 0.6, m3], rel=1e-12)
    assert model.path_probabilities(tree, keys) == pytest.approx([1.0, m1, m1 * 0.6, m3], rel=1e-12)
    # one step: node 1 accepted; 2 and 3 reached and rejected; the calibrated cells weigh 12 and 6 observations
    model.update(tree, keys, [0, 1])
    expected = [(1 + 12 * m1) / 13, (0 + 2 * 0.6) / 3, (0 + 6 * m3) / 7]
    assert model.rates(keys) == pytest.approx(expected, rel=1e-12)


def test_the_cap_lets_a_runs_evidence_outweigh_the_prior_after_a_few_dozen_observations():
    reached, accepted = counts({(SPINE, 1, 0): (5000, 4500)})
    mean, strength = calibrate(reached, accepted, *AcceptanceModel().cell_prior(), cap=DEFAULT_CAP)
    assert strength[SPINE, 1, 0] == DEFAULT_CAP
    model = AcceptanceModel(prior=PriorTable("toy", "all", mean, strength, reached, accepted, DEFAULT_CAP))
    tree = DraftTree.single(7)
    tree.add(8, 0, SPINE)
    keys = model.keys(tree)
    assert model.rates(keys)[0] == pytest.approx(mean[SPINE, 1, 0])
    for _ in range(3 * int(DEFAULT_CAP)):  # the source stops being accepted in this run
        model.update(tree, keys, [0])
    assert model.rates(keys)[0] == pytest.approx(DEFAULT_CAP * mean[SPINE, 1, 0] / (4 * DEFAULT_CAP))
    assert model.rates(keys)[0] < 0.25


def test_a_file_whose_strength_exceeds_its_cap_is_rejected(tmp_path):
    doc = json.loads(prior_file(tmp_path).read_text())
    doc["tables"]["auto_budget"]["sections"]["goose"]["cells"][0][-1] = 50.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(PriorFileError, match=r"bad\.json.*strength in \(0, cap = 20.0\]"):
        read_prior(bad)


def test_unknown_model_runs_the_hand_prior(tmp_path):
    prior_file(tmp_path)
    assert find_prior("nobody-7b", tmp_path) is None
    assert load_prior("nobody-7b", "auto_budget", "goose", tmp_path) is None
    assert load_prior(HAND, "auto_budget", "goose", tmp_path) is None
    assert load_prior(None, "auto_budget", "goose", tmp_path) is None
    assert AcceptanceModel(prior=load_prior("nobody-7b", "auto_budget", "goose", tmp_path)).prior_name == HAND


def test_lookup_by_model_by_family_by_name_and_by_path(tmp_path):
    path = prior_file(tmp_path)
    shipped_priors.cache_clear()
    assert find_prior("toy-1m", tmp_path).name == "toy-1m-bfloat16"
    assert find_prior("toy-1m-bfloat16", tmp_path).name == "toy-1m-bfloat16"
    assert find_prior("toy-7b", tmp_path).name == "toy-1m-bfloat16"  # same family
    assert find_prior(str(path)).name == "toy-1m-bfloat16"
    assert load_prior("toy-7b", "auto_budget", "tr", tmp_path).section == "tr"
    assert model_family("gemma3-270m") == "gemma3"


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "cannot be read"),
        (json.dumps({"format": "something-else"}), "not an acceptance prior"),
        ("corrupt provenance", "provenance lacks date"),
        ("bad cell", "is not 7 numbers"),
        ("index outside", r"outside \[8, 17, 9\]"),
    ],
)
def test_a_corrupt_file_is_a_clear_error_naming_the_file(tmp_path, content, message):
    doc = json.loads(prior_file(tmp_path).read_text())
    if content == "corrupt provenance":
        del doc["provenance"]["date"]
        content = json.dumps(doc)
    elif content == "bad cell":
        doc["tables"]["auto_budget"]["sections"]["goose"]["cells"][0] = [1, 1, "x"]
        content = json.dumps(doc)
    elif content == "index outside":
        doc["tables"]["auto_budget"]["sections"]["goose"]["cells"][0][1] = 17
        content = json.dumps(doc)
    folder = tmp_path / "priors"
    folder.mkdir()
    (folder / "broken.json").write_text(content)
    with pytest.raises(PriorFileError, match=rf"acceptance prior .*broken\.json.*{message}"):
        find_prior("toy-1m", folder)


def test_a_prior_of_another_cell_layout_is_refused_by_name():
    table = PriorTable("old", "all", *(np.zeros((8, 10, 9)) for _ in range(4)), cap=20.0)
    with pytest.raises(ValueError, match="acceptance prior old .*recalibrate"):
        AcceptanceModel(prior=table)


def test_keep_totals_counts_every_observation_undecayed():
    model = AcceptanceModel(decay=0.5)
    model.keep_totals()
    tree = DraftTree.single(7)
    tree.add(8, 0, SPINE)
    keys = model.keys(tree)
    for _ in range(4):
        model.update(tree, keys, [0, 1])
        model.age()
    assert model.total_reached[SPINE, 1, 0] == 4 and model.total_accepted[SPINE, 1, 0] == 4
    assert model.reached[SPINE, 1, 0] == pytest.approx(0.5 + 0.25 + 0.125 + 0.0625)


def test_the_shipped_priors_parse_and_say_how_they_were_made():
    shipped_priors.cache_clear()
    priors = shipped_priors()
    assert priors, f"no prior file in {PRIORS_DIR}"
    for prior in priors:
        assert prior.path.parent == PRIORS_DIR
        for key in PROVENANCE_FIELDS:
            assert prior.provenance[key], f"{prior.path}: empty provenance field {key}"
        for bench, used in prior.provenance["benchmarks"].items():
            assert min(used["indices"]) >= 20, f"{prior.path}: {bench} uses a protocol prompt"
        assert set(prior.tables) >= {"auto_budget", "opt_tree", "hw_tree"}
        assert find_prior(prior.model) is not None
        table = prior.table("auto_budget", "goose")
        assert table is not None and table.mean.shape == SHAPE and table.strength.max() <= prior.cap
        AcceptanceModel(prior=table)  # fits the estimator's cells
    assert find_prior("smollm2-135m") is not None
