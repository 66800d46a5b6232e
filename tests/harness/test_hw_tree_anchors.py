"""experiments/hw_tree_anchors.py: where OPT-Tree's accepted path leaves hw_tree's verified tree, classified
on a hand-built pool; the steps keyed by anchor, their nodes counted by kind; the report; and a missing
curve refused before any run."""

from __future__ import annotations

from collections import Counter

import pytest

from experiments.hw_tree_anchors import AnchorRecorder, RowProbe, cause, first_missed, markdown
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree

# pool: 0 -(5)-> 1 -(6)-> 2 ; 0 -(9)-> 3 ; output after the anchor at 0: 5, 6, 7
KIDS = [{5: 1, 9: 3}, {6: 2}, {}, {}]
OUTPUT = [4, 5, 6, 7]


def test_the_first_token_hw_tree_did_not_verify_is_found_and_classified():
    # hw_tree verified 0, 1: the output's second token (6) is in the pool, not verified
    assert first_missed(OUTPUT, 0, 3, KIDS, {0, 1}) == (2, 2)
    assert cause(2, 2) == "in the pool, not verified|2"
    # verified 0, 1, 2: the third token (7) has no node under 2
    assert first_missed(OUTPUT, 0, 3, KIDS, {0, 1, 2}) == (3, None)
    assert cause(3, None) == "absent from the pool|3"
    # verified only the anchor: the first token is missed at depth 1; deep misses are pooled as 4+
    assert first_missed(OUTPUT, 0, 3, KIDS, {0}) == (1, 1)
    assert cause(7, None) == "absent from the pool|4"


def test_the_recorder_keys_each_step_by_its_anchors_place_in_the_output():
    class Step:
        def __init__(self, n):
            self.new_tokens = n

    class Outcome:
        accepted_nodes = [0, 1]

    tree = DraftTree([7, 8, 9, 4], [-1, 0, 0, 2], [ROOT, SPINE, BRANCH, BRANCH])
    rec = AnchorRecorder(lambda tree: len(tree))
    for n in (3, 1, 2):
        rec(tree, Outcome(), Step(n))
    assert rec.at == {0: 4, 3: 4, 4: 4}
    assert rec.kinds == {
        "context_verified": 3,
        "context_accepted": 3,
        "adjacency_verified": 6,
        "adjacency_accepted": 0,
    }


def test_the_report_names_both_runs_and_every_cause():
    kinds = {
        "anchor_row_share": 0.5,
        "anchor_run_row_share": 0.25,
        "table_rows": 80.0,
        "context_verified": 3.0,
        "context_accepted": 1.0,
        "adjacency_verified": 1.5,
        "adjacency_accepted": 0.25,
    }
    rec = {
        "model": "m",
        "dtype": "float32",
        "benches": ["humaneval"],
        "limit": 2,
        "max_new_tokens": 8,
        "latency": {"sizes": [1, 8], "seconds": [0.01, 0.012]},
        "runs": {
            "hw_tree_auto": {"steps": 3, "tau": 2.0, "tree": 5.0, "forward_speedup": 1.8, **kinds},
            "opt_tree_auto": {"steps": 4, "tau": 1.5, "tree": 4.0, "forward_speedup": 1.4, **kinds},
        },
        "shared": {
            "anchors": 2,
            "hw_committed": 4,
            "opt_committed": 3,
            "hw_nodes": 10,
            "opt_nodes": 8,
            "hw_more": 1,
            "opt_more": 1,
        },
        "opt_more_by_cause": dict(Counter({"absent from the pool|1": 1})),
    }
    text = markdown(rec)
    assert (
        "| hw_tree_auto | 3 | 2.000 | 5.00 | 1.800 | 3.00 (1.00) | 1.50 (0.25) | 50.0% (25.0%) | 80 |" in text
    )
    assert "| absent from the pool | 1 | 1 |" in text
    assert "hw_tree commits 2.00 tokens per step from 5.00 nodes, OPT-Tree 1.50 from 4.00" in text


def test_a_missing_latency_curve_is_refused(tmp_path):
    from experiments import hw_tree_anchors

    with pytest.raises(SystemExit, match="no latency curve at .*nowhere.json"):
        hw_tree_anchors.main(["--latency", str(tmp_path / "nowhere.json"), "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()


def test_the_row_probe_counts_anchors_with_a_table_row_before_each_proposal():
    import torch

    from baselines.opt_tree import OptTreeDrafter

    drafter = OptTreeDrafter()
    drafter.propose = lambda committed: "tree"  # what the probe wraps
    probe = RowProbe(drafter)
    logits = torch.zeros(3, 16)
    logits[0, 4] = logits[1, 5] = logits[2, 6] = 5.0
    drafter.begin([1, 2, 3], logits)  # prefill harvest: rows for 1, 2, 3
    assert drafter.propose([1, 2, 3]) == "tree"  # 3 has a row
    assert drafter.propose([1, 2, 3, 9]) == "tree"  # 9 has none
    assert probe.counts == {"probed": 2, "anchor_row": 1, "anchor_run_row": 0, "rows": 6}


def test_the_row_probe_counts_an_anchor_that_drafts_from_the_runs_table():
    """hw_tree's anchor 41 has no row in the second prompt's table, but the run's table has one (written
    in the first prompt): the anchor has a row, and it is the run's."""
    import torch

    from baselines.hw_tree import HwTreeDrafter
    from goose.engine.core.drafter import VerifyOutcome
    from goose.engine.core.tree import BRANCH, ROOT, DraftTree

    drafter = HwTreeDrafter(suffix=False)
    drafter.begin([1, 2, 3], torch.zeros(3, 64))
    drafter.propose([1, 2, 3])
    logits = torch.full((2, 64), -10.0)
    logits[0, 41] = logits[1, 50] = 10.0
    drafter.observe(
        DraftTree([3, 41], [-1, 0], [ROOT, BRANCH]), VerifyOutcome(logits, [41, 50], [0, 1], [41, 50])
    )
    drafter.end()
    drafter.begin([7, 8, 9], torch.zeros(3, 64))
    probe = RowProbe(drafter)
    drafter.propose([7, 8, 9, 41])  # 41: the run's row
    drafter.propose([7, 8, 9, 12])  # 12: no row anywhere
    assert probe.counts == {"probed": 2, "anchor_row": 1, "anchor_run_row": 1, "rows": 0}
