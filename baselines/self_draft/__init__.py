"""Layer-skip self-draft (Draft & Verify, arXiv 2309.08168; SWIFT): the drafter and its shapes
(`drafter`), and its truncated proposal q and per-prompt skip-set search (`search`)."""

from baselines.self_draft.drafter import SHAPES, SelfDraftConfig, SelfDraftDrafter

__all__ = ["SHAPES", "SelfDraftConfig", "SelfDraftDrafter"]
