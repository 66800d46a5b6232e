"""A drafter table that may live for a whole run (TR's adjacency table, STAND's n-gram table): with
`persistent_table` it is state the runner checkpoints across prompts, and that a batch of requests may share.
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

    shares_run_state = True

    def share_run_state(self, source: Any) -> None:
        """The same table object as `source`'s (batched serving, batch_state "shared"): every request's steps
        write into it and read from it. Nothing is shared where the table lives for one prompt only."""
        if self.carries_run_state:
            if type(source) is not type(self) or source.config() != self.config():
                raise ValueError(f"batch_state=shared: {self.name} shares a table only with its own kind")
            self.table = source.table
