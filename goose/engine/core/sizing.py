"""How much of a proposed tree a step verifies: a service the decode loop calls between `drafter.propose`
and `engine.verify`, beside the drafter rather than around it.

The paper fixes the budget B, so the default `TreeSizer` verifies every tree as proposed (budget=fixed).
budget=auto's policy (goose.engine.budget.auto_budget.AutoBudget) cuts each tree to the prefix of b nodes
that maximises E[committed | b] / t(b), learning r from what it observes, and its gate
(goose.engine.budget.draft_gate) may take a step without drafting at all (`drafts`). A `Speculator` is what
one run speculates with: a drafter and its sizer, whose config and cross-prompt state are both parts'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import DraftTree


@dataclass(frozen=True)
class StepTiming:
    """One step's seconds as the decode loop measured them: drafting and sizing (`draft_s`), verification
    (`verify_s`: forward and walk), the drafter's `observe` or `skip` (`update_s`), the sizer's own `observe`
    of the step before (`sizer_s`); `drafted`: whether `propose` ran."""

    draft_s: float
    verify_s: float
    update_s: float = 0.0
    sizer_s: float = 0.0
    drafted: bool = True

    @property
    def total_s(self) -> float:
        """The whole step, the sizer's bookkeeping included."""
        return self.draft_s + self.verify_s + self.update_s + self.sizer_s


class TreeSizer:
    """Sizes each step's tree; this base verifies it whole (budget=fixed). The decode loop calls, per prompt:

        sizer.begin(drafter)                       before drafter.begin
        loop: sizer.start_step(committed)
              if sizer.drafts(): tree = sizer.size(drafter.propose(committed)); verify; drafter.observe(...)
              else:              tree = the anchor alone;                        verify; drafter.observe_plain(...)
              (without `plain_learns`, a draft cut to the anchor alone is verified and heard of as plain)
              sizer.observe(tree, outcome, timing)
        stats = sizer.end()                        after drafter.end, merged into the row's drafter stats

    A drafter that `sizes_itself` is never cut: a sizer may only hand it t(n) (`Drafter.use_latency`). A step
    whose tree the sizer cut to the anchor is recorded as an AR step (route "ar").
    """

    # True: what it learns outlives a prompt and is checkpointed with the drafter's (`run_state`).
    carries_run_state: ClassVar[bool] = False
    # False: a step that verifies the anchor alone, taken without drafting or drafted and cut to the anchor
    # (by the sizer, or by a drafter's own size rule), is AR's step exactly (no top-K of the logits for the
    # drafter's table) and the drafter learns nothing from its logits (`Drafter.observe_plain`'s
    # `learn_logits`); True: only a step without drafting is plain, and it learns from the anchor's logits.
    plain_learns: bool = True

    def plain_step(self, drafted: bool, cut_to_anchor: bool) -> bool:
        """Whether this step is a plain step, the drafter hearing of it through `observe_plain`: taken
        without drafting, or, without `plain_learns`, a draft cut to the anchor alone (`draft_step`: by the
        sizer, or kept so by a drafter that needs nothing from the anchor's logits), so the step verifies
        what AR's step verifies and costs no more. Any other empty proposal stays a drafted step: it learns
        the anchor's row, how a table fed only by verified logits gets its first rows."""
        return not drafted or (not self.plain_learns and cut_to_anchor)

    def config(self) -> dict[str, Any]:
        """The sizer's settings, logged beside the drafter's config in every result row (fixed: none)."""
        return {}

    def begin(self, drafter: Drafter) -> None:
        """A prompt starts, to be drafted by `drafter` (called just before `drafter.begin`)."""

    def start_step(self, committed: list[int]) -> None:
        """A step starts, before `drafter.propose(committed)` (committed[-1] = the anchor)."""

    def drafts(self) -> bool:
        """Whether this step drafts; False: a plain AR step, `propose` not called (fixed: always drafts)."""
        return True

    def size(self, tree: DraftTree) -> DraftTree:
        """The part of the proposed `tree` to verify: an ancestor-closed prefix (fixed: all of it)."""
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome, timing: StepTiming) -> None:
        """The verified `tree` (after the loop's depth cut), its outcome and the step's seconds."""

    def end(self) -> dict[str, Any]:
        """The prompt ends: the sizer's stats for its row (fixed: none)."""
        return {}

    def run_state(self) -> Any:
        """A picklable snapshot of what is carried to the next prompt (None: nothing)."""
        return None

    def restore_run_state(self, state: Any) -> None:
        """Continue from a `run_state()` snapshot (taken after the same earlier prompts)."""


@dataclass
class Speculator:
    """A drafter and the policy that sizes its trees: what one cell runs, prompt after prompt."""

    drafter: Drafter
    sizer: TreeSizer = field(default_factory=TreeSizer)

    @classmethod
    def of(cls, what: Drafter | Speculator) -> Speculator:
        """`what` itself, or a drafter with the fixed budget's sizer."""
        return what if isinstance(what, Speculator) else cls(what)

    @property
    def carries_run_state(self) -> bool:
        return self.drafter.carries_run_state or self.sizer.carries_run_state

    def config(self) -> dict[str, Any]:
        """The drafter's hyperparameters, then the sizer's settings (the cell's config)."""
        return {**self.drafter.config(), **self.sizer.config()}

    def run_state(self) -> dict[str, Any]:
        return {"drafter": self.drafter.run_state(), "sizer": self.sizer.run_state()}

    def restore_run_state(self, state: dict[str, Any]) -> None:
        if state["drafter"] is not None:
            self.drafter.restore_run_state(state["drafter"])
        if state["sizer"] is not None:
            self.sizer.restore_run_state(state["sizer"])
