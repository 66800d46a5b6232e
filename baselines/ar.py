"""Autoregressive decoding (AR) as a drafter: a one-node tree, verified by the shared engine."""

from __future__ import annotations

from dataclasses import dataclass

from goose.drafter import Drafter


@dataclass
class ARDrafter(Drafter):
    """Proposes only the anchor: each verification step commits exactly one token (τ = 1)."""

    name: str = "ar"
