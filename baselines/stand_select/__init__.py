"""STAND with the expansion picked per step (arXiv 2602.16994 §5): the (K, L1, L2) of its delayed tree chosen
before drafting by a selector, online (estimates learnt in the run) or trained offline."""

from baselines.stand_select.drafter import StandSelectConfig, StandSelectDrafter

__all__ = ["StandSelectConfig", "StandSelectDrafter"]
