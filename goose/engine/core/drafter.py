"""The drafter contract: what every method (AR, PLD, TR, iso, eagle2, Goose) implements.

A drafter proposes a DraftTree rooted at the anchor and learns from what the target model said.
It knows nothing about timing, files, Hydra or W&B; the decode loop calls it in this order:

    drafter.set_sampling(sampling, seed)             once per prompt, before the prefill
    drafter.begin(prompt_ids, prefill_logits)        once per prompt, after the prefill forward
                                                     ([P, V] if the drafter's class sets
                                                     needs_prefill_logits, else the last row [1, V])
    loop:
        tree = drafter.propose(committed)            committed[-1] is the anchor
        outcome = engine.verify(tree)                one forward pass
        drafter.observe(tree, outcome)               logits of every node + the accepted path
    drafter.end()                                    once per prompt
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from goose.engine.core.sampling import GREEDY, SamplingParams
from goose.engine.core.tree import DraftTree


@dataclass
class VerifyOutcome:
    """What one verification step returned to the decode loop and the drafter.

    logits:          [n, V] logits of every tree node (on the model's device)
    predictions:     argmax of every node's logits, as a Python list of length n
    accepted_nodes:  node indices of the accepted path, root first (always starts with 0)
    new_tokens:      tokens committed by this step: the accepted drafted tokens plus the bonus
                     token (argmax at the last accepted node; at temperature > 0 the target's
                     draw there), already cut at EOS / max_new_tokens
    """

    logits: torch.Tensor
    predictions: list[int]
    accepted_nodes: list[int]
    new_tokens: list[int]


@dataclass
class Drafter:
    """Base class; subclasses override `propose` and, if they learn, `begin` and `observe`.

    `route` (set by `propose`) names the kind of step the drafter chose (e.g. "ar", "chain",
    "spine_tree", "branch_tree"); `stats` collects method-specific counters that end up in the
    result row (e.g. Goose's spine continuations).
    """

    # Whether `begin` needs the logits of every prompt position (a prefill harvest into an
    # adjacency table); False spares the LM head over the prompt. Declared by each drafter class
    # (a property where a hyperparameter decides it).
    needs_prefill_logits: ClassVar[bool] = False

    # Whether the decode loop verifies the drafter's whole tree on the last steps of a prompt and
    # cuts only the committed tokens (True), rather than cutting the tree to the tokens still
    # wanted before verification (False, the default). The window of the model cuts it either way.
    # Goose and the isotropic controls set it under compat=authors, as the official Goose code does.
    verifies_full_tree: ClassVar[bool] = False
    # Whether the drafts are *sampled* from a proposal q (STAND) rather than a function of the
    # context: then at temperature > 0 the output equals AR's in distribution, not token for token.
    samples_drafts: ClassVar[bool] = False
    # The sampling settings of the current sequence and its seed (`set_sampling`).
    sampling: ClassVar[SamplingParams] = GREEDY
    sampling_seed: ClassVar[int] = 0

    name: str = "drafter"
    route: str = "ar"
    stats: dict[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        """The hyperparameters that define this drafter (logged in every result row)."""
        return {}

    def set_sampling(self, sampling: SamplingParams, seed: int) -> None:
        """Called once per prompt before `begin`: the sequence's sampling settings (temperature 0 =
        greedy) and seed. Deterministic drafters need neither (their trees are a function of the
        context, which sample-and-match verification requires); a drafter that samples its
        drafts (STAND) seeds its own generator from `seed`, independent of the target's noise."""
        self.sampling, self.sampling_seed = sampling, seed

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Called once per prompt after the prefill forward; prefill_logits is [P, V]."""
        self.stats = {}

    def propose(self, committed: list[int]) -> DraftTree:
        """Return the tree to verify; committed = prompt + generated tokens, committed[-1] = anchor."""
        self.route = "ar"
        return DraftTree.single(committed[-1])

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """Learn from the verification of `tree` (default: nothing)."""

    def end(self) -> None:
        """Called once per prompt when generation stops."""

    # ------------------------------------------------------------------ state across prompts
    # Whether this drafter carries state from one prompt of a run to the next (Token Recycling's
    # run-long table, budget=auto's learnt acceptance rates, a global suffix cache). The runner
    # then checkpoints `run_state()` beside the cell's rows after every prompt, and a resumed cell
    # restores it before its next prompt, so that an interrupted and resumed run gives the same
    # rows as an uninterrupted one.
    carries_run_state: ClassVar[bool] = False

    def run_state(self) -> Any:
        """A picklable snapshot of the state carried to the next prompt (None: nothing)."""
        return None

    def restore_run_state(self, state: Any) -> None:
        """Continue from a `run_state()` snapshot (taken after the same earlier prompts)."""

    def count(self, key: str, by: int = 1) -> None:
        """Increment a method-specific counter in `stats`."""
        self.stats[key] = self.stats.get(key, 0) + by


@dataclass
class ARDrafter(Drafter):
    """Autoregressive decoding (AR) as a drafter: proposes only the anchor, so each verification
    step commits exactly one token (τ = 1). It is the reference every method's output is checked
    against, which is why it lives beside the contract rather than among the baselines."""

    name: str = "ar"
