"""`StandSelectDrafter`: STAND's delayed tree with its (K, L1, L2) chosen per step before drafting (arXiv
2602.16994 §5) from the root features (`features.py`) by a selector (`selector.py`): `online` (estimates
learnt in the run from the exact values of the verified trees, with an exploring step every
`explore_every` steps that drafts the largest tree at the next trunk length in turn) or a trained one (a
file or a shipped name, `model.py`). The choice depends on the anchor's proposal and on verified steps
only, never on the step's draws: each draft is a delayed tree of the chosen shape, which every verifier of
that shape verifies exactly.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from baselines.stand import StandConfig, StandDrafter
from baselines.stand_select.actions import Action, action_grid, action_values, contained
from baselines.stand_select.features import LastStep, root_features
from baselines.stand_select.model import load_selector
from baselines.stand_select.selector import OnlineSelector, TrainedSelector, choose
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import DraftTree
from goose.validation import check_float, check_int, check_str

ONLINE = "online"
LAST_DECAY = 0.9  # the decayed mean of accepted lengths among the features


@dataclass(frozen=True)
class StandSelectConfig(StandConfig):
    """STAND's fields (shape delayed; K, L1, L2 = `num_paths`, `trunk_len`, `path_len`: the action of a step
    with no estimate yet) and the selector's: `selector` (`online` or a trained selector's file or shipped
    name), the grid up to `max_paths` × `max_trunk` × `max_path_len` (online; a trained selector brings its
    own), an exploring step every `explore_every` steps (online), `selector_decay` (the online estimates'
    per-observation forgetting)."""

    owner = "StandSelectDrafter"
    shape: str = "delayed"
    selector: str = ONLINE
    max_paths: int = 4
    max_trunk: int = 4
    max_path_len: int = 4
    explore_every: int = 8
    selector_decay: float = 0.98

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
        if self.shape != "delayed" or self.branch_below != 0.0:
            raise ValueError(
                f"{owner}.shape = {self.shape!r}: the selector chooses delayed trees (shape delayed)"
            )
        check_str(f"{owner}.selector", self.selector)  # a trained one is found when the drafter is built
        check_int(f"{owner}.max_paths", self.max_paths, low=1, why="the grid's largest K")
        check_int(f"{owner}.max_trunk", self.max_trunk, low=0, why="the grid's largest L1")
        check_int(f"{owner}.max_path_len", self.max_path_len, low=1, why="the grid's largest L2")
        check_int(f"{owner}.explore_every", self.explore_every, low=1, why="steps per exploring step")
        check_float(f"{owner}.selector_decay", self.selector_decay, 0.0, 1.0, why="the estimates' forgetting")


class StandSelectDrafter(StandDrafter):
    """STAND drafting the delayed tree its selector picks per step; keyword arguments: `StandSelectConfig`."""

    config_class = StandSelectConfig
    name = "stand_select"
    shares_run_state = False  # the online estimates are per drafter

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        cfg = StandSelectConfig(**hyperparameters)
        base = {k: v for k, v in cfg.as_dict().items() if k in StandConfig.field_names()}
        super().__init__(name=name, **{**base, "shape": "delayed"})
        self.cfg = self._base = cfg
        self.selector: OnlineSelector | TrainedSelector
        if cfg.selector == ONLINE:
            grid = action_grid(cfg.max_paths, cfg.max_trunk, cfg.max_path_len, cfg.budget)
            self.selector = OnlineSelector(grid, cfg.selector_decay)
        else:
            self.selector = load_selector(cfg.selector)
            grid = tuple(a for a in self.selector.actions if a.nodes <= cfg.budget)
        self.grid = grid
        self.default = Action(cfg.num_paths, cfg.trunk_len, cfg.path_len)
        self._cfgs = {
            a: dataclasses.replace(cfg, num_paths=a.paths, trunk_len=a.trunk, path_len=a.length)
            for a in (*grid, self.default)
        }
        trunks = sorted({a.trunk for a in grid})
        self._explore = [max((a for a in grid if a.trunk == t), key=lambda a: (a.nodes, a)) for t in trunks]
        self._last = LastStep()
        self._step = 0
        self._executed = self.default
        self._features: list[float] = []
        self._exploring = False

    def config(self) -> dict[str, Any]:
        out = self._base.as_dict()
        if self._base.selector != ONLINE:
            for key in ("max_paths", "max_trunk", "max_path_len", "explore_every", "selector_decay"):
                out.pop(key)
        return out

    @property
    def carries_run_state(self) -> bool:
        return True  # the online estimates and the exploring schedule live for the run

    def run_state(self) -> Any:
        return copy.deepcopy({"table": self.table, "selector": self.selector, "step": self._step})

    def restore_run_state(self, state: Any) -> None:
        state = copy.deepcopy(state)
        self.table, self.selector, self._step = state["table"], state["selector"], state["step"]

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """A prompt starts: its own last-step features; the estimates and the step count (which sets the
        exploring steps) go on across prompts."""
        super().begin(prompt_ids, prefill_logits)
        self._last = LastStep()

    def propose(self, committed: list[int]) -> DraftTree:
        s = self.sampling
        found = self._proposal_at(committed[-self.max_order :])
        self._features = root_features(found[1] if found else None, self._last, s.temperature, s.top_p)
        online = isinstance(self.selector, OnlineSelector)
        self._exploring = online and self._step % self._base.explore_every == 0
        if self._exploring:
            action = self._explore[(self._step // self._base.explore_every) % len(self._explore)]
            self.count("explore_steps")
        else:
            action = choose(self.selector.estimates(self._features), self._latency, self.default)
        self._step += 1
        self._executed = action
        self.count(f"paths_{action.paths}")
        self.count(f"path_len_{action.length}")
        self.cfg = self._cfgs[action]
        try:
            return super().propose(committed)
        finally:
            self.cfg = self._base

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        super().observe(tree, outcome)
        view = getattr(outcome, "view", None)
        if view is not None and isinstance(self.selector, OnlineSelector):
            verifier = "rrs" if self.sampling.verifier == "auto" else self.sampling.verifier
            actions = contained(self._executed, self.grid) if self._exploring else (self._executed,)
            if self._executed in self.grid:
                self.selector.learn(self._features, action_values(view, self._executed, actions, verifier))
        self._last.observe(view, outcome.accepted_nodes, LAST_DECAY)
