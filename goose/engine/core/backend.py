"""How a forward backend plugs into the verifier. Without one, `VerificationEngine` runs the model's own
(`transformers`) forward; a `ForwardBackend` replaces it by a lean forward over the engine's cache, maybe
compiled, maybe with static steps replayed from CUDA graphs. Core owns these interfaces; goose.engine.forward
implements them and the caller above core picks one (goose.engine.forward.choose), so core never imports a
backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import torch
from torch.nn.modules import module as nn_module

if TYPE_CHECKING:
    from goose.engine.core.kv_cache import TreeKVCache
    from goose.engine.core.tree import TreeInputs


class SkipSet(NamedTuple):
    """Sub-layers a self-draft forward skips (identity on the residual stream): layer indices whose attention
    block, and whose MLP block, are left out. A skipped attention block writes no keys or values."""

    attention: frozenset[int] = frozenset()
    mlp: frozenset[int] = frozenset()

    def sublayers_run(self, num_layers: int) -> int:
        """Attention and MLP blocks a forward with this skip set runs (a full forward runs 2 L)."""
        return 2 * num_layers - len(self.attention) - len(self.mlp)


NO_SKIP = SkipSet()


class LeanForward(Protocol):
    """A forward over the engine's own cache: logits [n, V] (or [1, V] with `last_only`) of `input_ids`
    [1, n] at `position_ids` under the engine's additive `mask`(s), writing their keys and values into
    `cache`; `skip`: sub-layers left out (a self-draft, goose.engine.core.draft_forward)."""

    prepacked: bool  # projections in a prepacked (oneDNN) layout, recorded in the forward's name

    def __call__(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: Any,
        cache: TreeKVCache,
        last_only: bool = False,
        skip: SkipSet = NO_SKIP,
    ) -> torch.Tensor: ...


class StaticSteps(Protocol):
    """Verification forwards on padded, fixed shapes for trees of up to `largest` nodes, replayed from CUDA
    graphs when `capture` is set; they need `min_rows` cache rows reserved so that no graph is recaptured."""

    capture: bool
    largest: int
    min_rows: int
    captures: int  # graphs captured so far
    capture_s: float  # seconds spent capturing them

    def forward_one(self, token: int) -> torch.Tensor: ...

    def forward_tree(self, inputs: TreeInputs) -> torch.Tensor: ...

    def scrub(self) -> None: ...

    def capture_all(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ForwardBackend:
    """What the verifier runs its forwards through: `lean` (the prefill and every eager forward), `compiled`
    (the steps' forward through torch.compile; None: `lean`) and `static_steps` (builds the engine's
    `StaticSteps`; None: none)."""

    lean: LeanForward
    compiled: Callable[..., torch.Tensor] | None = None
    static_steps: Callable[[Any], StaticSteps] | None = None


def has_forward_hooks(model: torch.nn.Module) -> bool:
    """True if hooks on the model expect its forward to run; the engine then uses the `transformers` forward
    so the hooks see every pass.
    """
    return bool(
        model._forward_hooks
        or model._forward_pre_hooks
        or nn_module._global_forward_hooks
        or nn_module._global_forward_pre_hooks
    )
