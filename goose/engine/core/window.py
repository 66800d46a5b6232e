"""Sliding-window attention (Gemma 3's local layers): which steps need a window mask. Shared by the
verifier's masks and the static steps' masks (goose.engine.forward.static_step)."""

from __future__ import annotations

SLIDING_ATTENTION = "sliding_attention"  # the layer type of windowed layers in `config.layer_types`


def slides(kind: str, sliding_window: int | None, longest_distance: int) -> bool:
    """True if layers of `kind` need a window mask for query-key distances up to `longest_distance`, with a
    window of `sliding_window` keys (None or 0: no window)."""
    return kind == SLIDING_ATTENTION and bool(sliding_window) and longest_distance >= sliding_window
