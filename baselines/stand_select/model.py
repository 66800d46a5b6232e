"""The trained selector's file: the actions it scores, the feature names it was trained on (they must be
FEATURE_NAMES), the standardisation and the network's weights, and how it was made (`provenance`). Written
by experiments.train_selector; found by path, or by name under goose/data/selectors/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from baselines.stand_select.actions import Action
from baselines.stand_select.features import FEATURE_NAMES
from baselines.stand_select.selector import TrainedSelector

SELECTOR_DIR = Path(__file__).resolve().parents[2] / "goose" / "data" / "selectors"


def selector_path(spec: str) -> Path:
    """`spec` as a file, else goose/data/selectors/<spec>.json (ValueError listing the shipped names)."""
    path = Path(spec)
    if path.suffix == ".json" and path.is_file():
        return path
    shipped = SELECTOR_DIR / f"{spec}.json"
    if shipped.is_file():
        return shipped
    names = sorted(p.stem for p in SELECTOR_DIR.glob("*.json")) if SELECTOR_DIR.is_dir() else []
    raise ValueError(
        f"selector = {spec!r}: not a selector file, nor one shipped in {SELECTOR_DIR} "
        f"(shipped: {', '.join(names) or 'none'}; or `online`)"
    )


def selector_record(selector: TrainedSelector, provenance: dict[str, Any]) -> dict[str, Any]:
    return {
        "features": list(FEATURE_NAMES),
        "actions": [a.label() for a in selector.actions],
        "mean": selector.mean.tolist(),
        "std": selector.std.tolist(),
        "w1": selector.w1.tolist(),
        "b1": selector.b1.tolist(),
        "w2": selector.w2.tolist(),
        "b2": selector.b2.tolist(),
        "provenance": provenance,
    }


def load_selector(spec: str) -> TrainedSelector:
    path = selector_path(spec)
    record = json.loads(path.read_text())
    if tuple(record.get("features", ())) != FEATURE_NAMES:
        raise ValueError(
            f"{path}: trained on features {record.get('features')}, this code has {FEATURE_NAMES}"
        )
    arrays = {k: np.asarray(record[k], dtype=np.float64) for k in ("mean", "std", "w1", "b1", "w2", "b2")}
    return TrainedSelector([Action.parse(a) for a in record["actions"]], **arrays)
