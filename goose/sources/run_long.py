"""A drafter's table that may live for a whole run (Token Recycling's adjacency table, STAND's
n-gram table): with `persistent_table` the table is the drafter's state across prompts, which the
runner checkpoints beside the cell's rows (`goose.engine.core.drafter.Drafter.carries_run_state`)."""

from __future__ import annotations

import copy
from typing import Any


class RunLongTable:
    """Mixin (listed before `Drafter`) for drafters holding `self.table` and `self.persistent_table`."""

    table: Any
    persistent_table: bool

    @property
    def carries_run_state(self) -> bool:
        """The table outlives a prompt only with `persistent_table`."""
        return self.persistent_table

    def run_state(self) -> Any:
        return copy.deepcopy(self.table)

    def restore_run_state(self, state: Any) -> None:
        self.table = copy.deepcopy(state)
