"""Source selection: the choice given hand-set estimates, the estimate updates, what every source learns."""

from __future__ import annotations

import pytest
import torch

from baselines.source_select import SourceEstimate, SourceSelectDrafter, matched_depth
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, DraftTree
from tests.conftest import method_config


def candidates() -> dict[str, DraftTree]:
    tr = DraftTree([0, 1, 2, 3], [-1, 0, 0, 1], [ROOT, BRANCH, BRANCH, BRANCH])  # depth 2
    return {"pld": DraftTree.chain(0, [1, 2, 3]), "tr": tr, "suffix": DraftTree.chain(0, [4, 5, 6, 7, 8])}


def set_rates(d: SourceSelectDrafter, rates: dict[str, list[float]], overall: dict[str, float]) -> None:
    for s, r in rates.items():
        d.estimates[s].rates[1 : 1 + len(r)] = r
        d.estimates[s].rate = overall[s]


RATES = {"pld": [0.9, 0.8, 0.5], "tr": [0.95, 0.5], "suffix": [0.3] * 5}
OVERALL = {"pld": 0.4, "tr": 0.9, "suffix": 0.3}


def test_choice_is_the_largest_expected_accepted_length() -> None:
    d = SourceSelectDrafter()
    set_rates(d, RATES, OVERALL)
    # E_pld = .9 + .9*.8 + .9*.8*.5 = 1.98; E_tr = .95 + .475 = 1.425; E_suffix = Σ .3^d = 0.42753
    assert d.score("pld", candidates()["pld"]) == pytest.approx(1.98)
    assert d.score("tr", candidates()["tr"]) == pytest.approx(1.425)
    assert d.score("suffix", candidates()["suffix"]) == pytest.approx(0.42753)
    assert d.choose(candidates()) == "pld"
    d.estimates["tr"].rates[2] = 0.9  # E_tr = .95 + .855 = 1.805 < 1.98: still PLD
    assert d.choose(candidates()) == "pld"
    d.estimates["tr"].rates[1] = 1.0  # E_tr = 1 + .9 = 1.9; PLD's third level at .2: E_pld = 1.764
    d.estimates["pld"].rates[3] = 0.2
    assert d.choose(candidates()) == "tr"


def test_choice_by_llamacpp_rate_times_length() -> None:
    d = SourceSelectDrafter(rule="rate_times_length")
    set_rates(d, RATES, OVERALL)
    # p̂·L: pld .4*3 = 1.2, tr .9*2 = 1.8, suffix .3*5 = 1.5
    assert d.choose(candidates()) == "tr"


def test_ties_go_to_the_first_source_and_no_candidate_is_ar() -> None:
    d = SourceSelectDrafter()  # every rate at 0.5, PLD and suffix both chains of 3
    cands = {
        "pld": DraftTree.chain(0, [1, 2, 3]),
        "tr": DraftTree.single(0),
        "suffix": DraftTree.chain(0, [4, 5, 6]),
    }
    assert d.choose(cands) == "pld"
    assert d.choose({s: DraftTree.single(0) for s in d.sources}) == ""


def test_estimate_update_by_hand() -> None:
    e = SourceEstimate(alpha=0.5, init=0.5)
    e.update(depth=4, matched=2, known=3)
    # d1, d2 accepted -> .75; d3 reached, rejected -> .25; d4 beyond the 3 known tokens: unchanged
    assert e.rates[1:5] == [0.75, 0.75, 0.25, 0.5]
    assert e.rate == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)


def test_matched_depth_walks_the_tree() -> None:
    tree = DraftTree([0, 1, 2, 3, 4], [-1, 0, 0, 2, 3], [ROOT] + [BRANCH] * 4)
    assert matched_depth(tree, [2, 3, 9]) == 2
    assert matched_depth(tree, [2, 3, 4, 5]) == 3
    assert matched_depth(tree, [7]) == 0


def test_every_source_learns_from_a_step_it_did_not_propose() -> None:
    vocab = 16
    d = SourceSelectDrafter()
    prompt = [1, 2, 3, 4, 1, 2]
    d.begin(prompt, torch.zeros(1, vocab))
    tree = d.propose([*prompt, 3])
    assert d.route == "pld"  # PLD: (2, 3) -> 4 1 2 3; TR has no table rows yet; suffix also drafts
    logits = torch.zeros(len(tree), vocab)
    logits[:, 5] = 1.0
    before = {s: list(e.rates[1:4]) for s, e in d.estimates.items()}
    d.observe(tree, VerifyOutcome(logits, [5] * len(tree), [0], [5]))
    assert d.drafters["tr"].table.successors(3)[0][0] == 5  # TR's table learnt from PLD's verified chain
    assert d.drafters["suffix"]._synced == len(prompt) + 2  # the suffix tree holds the committed token
    assert d.estimates["pld"].rates[1] == pytest.approx(0.35)  # rejected at depth 1: .7*.5
    assert d.estimates["suffix"].rates[1] == pytest.approx(0.35)  # counterfactual: its draft missed too
    assert d.estimates["tr"].rates[1:4] == before["tr"]  # no candidate, nothing learnt
    assert d.stats["select_pld"] == 1


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="sources"):
        SourceSelectDrafter(sources=["pld", "goose"])
    with pytest.raises(ValueError, match="rule"):
        SourceSelectDrafter(rule="best")


def test_method_yaml_instantiates() -> None:
    from hydra.utils import instantiate

    d = instantiate(method_config("source_select").drafter)
    assert isinstance(d, SourceSelectDrafter) and d.sources == ("pld", "tr", "suffix")
