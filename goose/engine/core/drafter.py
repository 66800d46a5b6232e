"""The drafter contract that every method implements. A drafter knows nothing about timing, files,
Hydra or W&B; the decode loop calls it in this order:

    drafter.set_sampling(sampling, seed)        once per prompt, before the prefill
    drafter.use_draft_forward(draft_forward)    after the prefill, if needs_draft_forward
    drafter.begin(prompt_ids, prefill_logits)   after the prefill ([P, V] if needs_prefill_logits)
    loop: tree = drafter.propose(committed); outcome = engine.verify(tree); drafter.observe(tree, outcome)
          or, on a step the sizer takes without drafting: outcome = engine.verify(anchor); drafter.observe_plain(...)
          (without the sizer's `plain_learns`, a draft cut to the anchor alone is also heard of through observe_plain)
    drafter.end()

Between `propose` and `verify` the loop's `TreeSizer` (goose.engine.core.sizing) may cut the tree; what the
drafter needs from the loop and the sizer it declares as class attributes, read as they are, never probed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from goose.engine.core.sampling import GREEDY, SamplingParams
from goose.engine.core.tree import DraftTree


@dataclass
class VerifyOutcome:
    """One verification step's result: logits and argmax `predictions` of every node, `accepted_nodes` (root
    first) and `new_tokens` (accepted tokens plus the bonus, cut at EOS and max_new_tokens); for a sampled
    draft that carries q, the tree as its verifier saw it (`view`, a goose.engine.core.verify.SampledTree:
    goose.engine.core.verify.expected computes any verifier's exact accepted length on it)."""

    logits: torch.Tensor
    predictions: list[int]
    accepted_nodes: list[int]
    new_tokens: list[int]
    view: Any = None
    # Greedy steps of a drafter with `logits_topk` K > 0: (values, indices) of every node's top-K logits,
    # sorted, computed by the engine in the argmax's pass (the adjacency tables' update); else None.
    top: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class Drafter:
    """Base class: override `propose` and, to learn, `begin` and `observe`; `route` names the step kind,
    `stats` holds method-specific counters for the result row."""

    # Whether `begin` needs the logits of every prompt position (a prefill harvest); False spares the LM head.
    needs_prefill_logits: ClassVar[bool] = False

    # True: on a prompt's last steps verify the whole tree and cut only the output (compat=authors).
    verifies_full_tree: ClassVar[bool] = False
    # True if the drafts are sampled from a proposal q (STAND): at T > 0 lossless in distribution only.
    samples_drafts: ClassVar[bool] = False
    # True: drafts with the target's own forward, sub-layers skipped (a self-draft): `use_draft_forward`.
    needs_draft_forward: ClassVar[bool] = False
    # True: sizes its own tree while drafting (STAND, hw_tree, self-draft), so a sizer never cuts it (after
    # sampled draws a cut would bias rejection sampling); budget=auto hands it t(n) through `use_latency`.
    sizes_itself: ClassVar[bool] = False
    sampling: ClassVar[SamplingParams] = GREEDY
    sampling_seed: ClassVar[int] = 0

    name: str = "drafter"
    route: str = "ar"
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def kept_anchor_alone(self) -> bool:
        """Read right after `propose`: its proposal is the anchor alone and the step may be a plain one, the
        drafter needing nothing from the anchor's logits (hw_tree: its size rule kept the anchor alone, its
        table fed by the nodes of drafted trees); what a sizer's cut to the anchor is for other drafters
        (`draft_step`). False (the default) for a drafter whose table only verified logits fill (TR)."""
        return False

    def config(self) -> dict[str, Any]:
        """The hyperparameters that define this drafter (logged in every result row)."""
        return {}

    @property
    def logits_topk(self) -> int:
        """K of the top-K of every verified node's logits this drafter reads after each step (an adjacency
        table's K; 0: none): the engine computes them in the argmax's pass of a greedy step
        (`VerifyOutcome.top`), so that the table's update does not read the logits a second time."""
        return 0

    def set_sampling(self, sampling: SamplingParams, seed: int) -> None:
        """The sequence's sampling settings and seed, before `begin`; used by sampling drafters (STAND)."""
        self.sampling, self.sampling_seed = sampling, seed

    def draft_shape(self) -> str:
        """The shape of the drafts: chain, tree, iid or delayed (goose.engine.core.verify.rules), checked against
        `sampling.verifier` before the model loads; only drafters that `samples_drafts` need say more than tree."""
        return "tree"

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Called once per prompt after the prefill forward; prefill_logits is [P, V]."""
        self.stats = {}

    def propose(self, committed: list[int]) -> DraftTree:
        """Return the tree to verify; committed = prompt + generated tokens, committed[-1] = anchor."""
        self.route = "ar"
        return DraftTree.single(committed[-1])

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """Learn from the verification of `tree` (default: nothing)."""

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step taken without drafting (budget=auto's gate: `propose` was not called), or, under a sizer
        without `plain_learns`, one whose draft was cut to the anchor alone (`propose` was called, `observe`
        is not; an empty proposal is still observed, so a table that only verified logits fill can start):
        the anchor committed[-1] alone was verified, `outcome` is its verification. Committed tokens may thus grow by
        several steps between two `propose` calls; a drafter that logs them in `observe` logs them here, one
        that learns from the verified logits may learn from the anchor's, only with `learn_logits` (False: the
        step was AR's step exactly, without the logits' top-K, and must stay as cheap: the gate's
        `plain_learns`). Default: nothing; it must stay cheap, it is the price of an AR step."""

    def use_draft_forward(self, draft_forward: Any) -> None:
        """The engine's skipped forward over this prompt's cache (a `DraftForward`), before `begin`; called
        only if `needs_draft_forward` (default: nothing)."""

    def use_latency(self, latency: Callable[[int], float]) -> None:
        """t(n), the seconds of a step verifying n nodes, for a drafter that `sizes_itself` under budget=auto
        (default: nothing)."""

    def end(self) -> None:
        """Called once per prompt when generation stops."""

    # State kept across a run's prompts (TR's table) is checkpointed per prompt, so a resume gives the same rows.
    carries_run_state: ClassVar[bool] = False

    def run_state(self) -> Any:
        """A picklable snapshot of the state carried to the next prompt (None: nothing)."""
        return None

    def restore_run_state(self, state: Any) -> None:
        """Continue from a `run_state()` snapshot (taken after the same earlier prompts)."""

    # Batched serving with batch_state "shared" (goose.engine.batch.serve): every request's drafter reads and
    # writes one run-long state, the first request's, instead of its own. Called before `begin`.
    shares_run_state: ClassVar[bool] = False

    def share_run_state(self, source: Drafter) -> None:
        """Continue with `source`'s run-long state itself, not a copy (nothing to do for a drafter that carries
        none); a drafter that `shares_run_state` overrides this."""
        self.check_shareable()

    def check_shareable(self) -> None:
        """ValueError unless this drafter carries no run-long state or can share it."""
        if self.carries_run_state and not self.shares_run_state:
            raise ValueError(
                f"batch_state=shared: {self.name} keeps run-long state per drafter and cannot share it; "
                "use batch_state=isolated"
            )

    def count(self, key: str, by: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + by


@dataclass
class ARDrafter(Drafter):
    """Autoregressive decoding: the anchor alone (τ = 1), the reference all outputs are checked against."""

    name: str = "ar"
