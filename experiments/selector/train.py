"""Train stand_select's selector (arXiv 2602.16994 §5: a small network from root features to each action's
block efficiency) on roots logged by experiments.selector.data, and write its file.

Split by prompt (a hash of benchmark and prompt id puts `--heldout` of the prompts aside), features
standardised on the training roots, a two-layer network (GELU, `--hidden` units, one output per action)
fitted by Adam to every action's exact E[accepted] (mean squared error, full batch, `--epochs`), seeded.
Reported on the held-out roots: the error, and the decision the drafter would make, the action of the best
(1 + Ê) / t(nodes) (t from `--latency`, a budget_latency.json; without it per step), against the best
action in hindsight, the static default (K, L1, L2) = `--default` and the best static action on the
training roots:

    python -m experiments.selector.train --out goose/data/selectors/smollm2-135m-rrs.json --data \
        results/studies/selector/roots/smollm2-135m-rrs-T0.6.jsonl results/studies/selector/roots/smollm2-135m-rrs-T1.0.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.stand_select.actions import Action
from baselines.stand_select.features import FEATURE_NAMES
from baselines.stand_select.model import selector_record
from baselines.stand_select.selector import TrainedSelector
from goose.engine.budget.cost_model import LatencyTable
from goose.records.code_state import code_state
from goose.records.results import read_rows


def read_roots(paths: list[Path]) -> list[dict[str, Any]]:
    """The roots of every file (a .jsonl results file, sealed or not: goose.records.seal)."""
    rows = read_rows(paths, migrate=False)
    if not rows:
        raise SystemExit(f"experiments.selector.train: no roots in {', '.join(map(str, paths))}")
    return rows


def is_heldout(row: dict[str, Any], share: float) -> bool:
    digest = hashlib.sha256(f"{row['bench']}/{row['prompt_id']}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < share


def arrays(rows: list[dict[str, Any]], actions: list[Action]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray([r["features"] for r in rows], dtype=np.float64)
    y = np.asarray([[r["values"][a.label()] for a in actions] for r in rows], dtype=np.float64)
    return x, y


def fit(
    x: np.ndarray, y: np.ndarray, hidden: int, epochs: int, lr: float, seed: int
) -> dict[str, np.ndarray]:
    torch.manual_seed(seed)
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    xs = torch.tensor((x - mean) / std, dtype=torch.float64)
    ys = torch.tensor(y, dtype=torch.float64)
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], hidden),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(hidden, y.shape[1]),
    ).double()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.mean((net(xs) - ys) ** 2)
        loss.backward()
        opt.step()
    first, last = net[0], net[2]
    return {
        "mean": mean,
        "std": std,
        "w1": first.weight.detach().numpy(),
        "b1": first.bias.detach().numpy(),
        "w2": last.weight.detach().numpy(),
        "b2": last.bias.detach().numpy(),
    }


def decision_report(
    model: TrainedSelector, x: np.ndarray, y: np.ndarray, cost: np.ndarray, default: int, static: int
) -> dict[str, float]:
    """Mean over roots of the rate (1 + E) / t of the selector's choice, of the best action in hindsight, of
    the default and of the best static action (`static`: the best mean rate on the training roots); the
    selector's rate over the default's and over the best static's."""
    pred = np.stack([model.predict(row) for row in x])
    rate = (1.0 + y) / cost
    chosen = np.argmax((1.0 + np.maximum(pred, 0.0)) / cost, axis=1)
    picked = rate[np.arange(len(rate)), chosen]
    return {
        "roots": int(len(x)),
        "mse": float(np.mean((pred - y) ** 2)),
        "rate_selector": float(picked.mean()),
        "rate_hindsight_best": float(rate.max(axis=1).mean()),
        "rate_default": float(rate[:, default].mean()),
        "rate_best_static": float(rate[:, static].mean()),
        "selector_over_default": float(picked.mean() / rate[:, default].mean()),
        "selector_over_best_static": float(picked.mean() / rate[:, static].mean()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data",
        required=True,
        nargs="+",
        help="roots files (.jsonl, sealed or not; experiments.selector.data)",
    )
    ap.add_argument("--out", required=True, help="the selector's JSON file")
    ap.add_argument("--heldout", type=float, default=0.25, help="share of prompts held out")
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency", default=None, help="a budget_latency.json: t(nodes) of the decision")
    ap.add_argument("--default", default="3-2-4", help="the static (K, L1, L2) compared with, K-L1-L2")
    args = ap.parse_args(argv)
    if not 0 < args.heldout < 1:
        ap.error(f"--heldout = {args.heldout}: a share in (0, 1)")
    paths = [Path(p) for p in args.data]
    rows = read_roots(paths)
    if any(len(r["features"]) != len(FEATURE_NAMES) for r in rows):
        raise SystemExit(f"experiments.selector.train: roots logged with other features than {FEATURE_NAMES}")
    actions = sorted(Action.parse(a) for a in rows[0]["values"])
    train = [r for r in rows if not is_heldout(r, args.heldout)]
    test = [r for r in rows if is_heldout(r, args.heldout)]
    if not train or not test:
        raise SystemExit(f"experiments.selector.train: {len(train)} training and {len(test)} held-out roots")
    weights = fit(*arrays(train, actions), args.hidden, args.epochs, args.lr, args.seed)
    model = TrainedSelector(actions, **weights)
    latency = LatencyTable.load(args.latency) if args.latency else None
    cost = np.asarray([latency(a.nodes) if latency else 1.0 for a in actions])
    default = actions.index(Action.parse(args.default))
    static = int(np.argmax(((1.0 + arrays(train, actions)[1]) / cost).mean(axis=0)))
    report = {
        "best_static": actions[static].label(),
        "train": decision_report(model, *arrays(train, actions), cost, default, static),
        "heldout": decision_report(model, *arrays(test, actions), cost, default, static),
    }
    settings = {k: rows[0][k] for k in ("model", "dtype", "temperature", "top_p", "verifier")}
    provenance = {
        **settings,
        "data": [str(p) for p in paths],
        "data_code_states": sorted({r["code_state"] for r in rows}),
        "code_state": code_state(),
        "command": "python -m experiments.selector.train " + " ".join(sys.argv[1:] if argv is None else argv),
        "split": {"heldout_share": args.heldout, "train_roots": len(train), "heldout_roots": len(test)},
        "fit": {"hidden": args.hidden, "epochs": args.epochs, "lr": args.lr, "seed": args.seed},
        "latency": args.latency,
        "report": report,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(selector_record(model, provenance)) + "\n")
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
