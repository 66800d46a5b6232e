"""experiments.selector.train on synthetic roots: the split is by prompt, the network learns a value that
depends on the features, its file loads as stand_select's trained selector and the report compares its
decisions with the hindsight best and the static default."""

from __future__ import annotations

import json

import numpy as np
import pytest

from baselines.stand_select.features import FEATURE_NAMES
from baselines.stand_select.model import load_selector
from experiments.selector import train
from goose.records.seal import seal

LONG, SHORT = "1-0-4", "1-0-1"


def synthetic(path, prompts: int = 40, roots: int = 10) -> None:
    """Where the draft is sure (top > .5) the long path accepts 3 tokens and the short one 1, else none and
    1: the best action flips with the feature (per step: 4 against 2 tokens, then 1 against 2)."""
    rng = np.random.default_rng(0)
    with path.open("w") as f:
        for p in range(prompts):
            for _ in range(roots):
                top = float(rng.uniform())
                x = [1.0, top, *[0.5] * (len(FEATURE_NAMES) - 2)]  # the others carry nothing
                values = {LONG: 3.0, SHORT: 1.0} if top > 0.5 else {LONG: 0.0, SHORT: 1.0}
                row = {"bench": "b", "prompt_id": f"p{p}", "features": x, "values": values, "code_state": "x"}
                row.update(model="m", dtype="float32", temperature=1.0, top_p=1.0, verifier="traversal")
                f.write(json.dumps(row) + "\n")


def test_the_selector_learns_which_action_pays(tmp_path):
    data, out = tmp_path / "roots.jsonl", tmp_path / "sel.json"
    synthetic(data)
    argv = ["--data", str(data), "--out", str(out), "--epochs", "1500", "--default", LONG]
    seal(data)  # read sealed, as the logger leaves it
    report = train.main(argv)
    held = report["heldout"]
    assert 0 < held["roots"] < 400 and held["roots"] % 10 == 0  # whole prompts held out
    # per held-out root the best in hindsight takes 4 or 2 tokens a step, the long default 4 or 1
    tops = [r["features"][1] for r in train.read_roots([data]) if train.is_heldout(r, 0.25)]
    assert held["rate_hindsight_best"] == pytest.approx(
        np.mean([4.0 if t > 0.5 else 2.0 for t in tops]), abs=1e-12
    )
    assert held["rate_default"] == pytest.approx(np.mean([4.0 if t > 0.5 else 1.0 for t in tops]), abs=1e-12)
    assert held["rate_selector"] > 0.97 * held["rate_hindsight_best"]
    assert held["selector_over_default"] == pytest.approx(
        held["rate_selector"] / held["rate_default"], abs=1e-12
    )
    assert held["selector_over_default"] > 1.1
    selector = load_selector(str(out))
    sure, unsure = [1.0, 0.9, *[0.5] * 8], [1.0, 0.1, *[0.5] * 8]
    assert selector.estimates(sure)[selector.actions[1]] > selector.estimates(sure)[selector.actions[0]]
    assert selector.estimates(unsure)[selector.actions[1]] < selector.estimates(unsure)[selector.actions[0]]
    provenance = json.loads(out.read_text())["provenance"]
    assert provenance["split"]["heldout_roots"] == held["roots"] and provenance["verifier"] == "traversal"
