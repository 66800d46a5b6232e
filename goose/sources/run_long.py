"""A drafter table that may live for a whole run (TR's adjacency table, STAND's n-gram table): with
`persistent_table` it is state the runner checkpoints across prompts.
"""

from __future__ import annotations

import copy
from typing import Any


class RunLongTable:
    """Mixin (listed before `Drafter`) for drafters holding `self.table` and `self.persistent_table`."""

    table: Any
    persistent_table: bool

    @property
    def carries_run_state(self) -> bool:
        return self.persistent_table

    def run_state(self) -> Any:
        return copy.deepcopy(self.table)

    def restore_run_state(self, state: Any) -> None:
        self.table = copy.deepcopy(state)
