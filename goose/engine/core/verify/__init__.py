"""Verifiers of sampled drafts (drafts that carry their proposal q; VERIFY.md): recursive rejection sampling
without (`rrs`, = `auto`) and with replacement (`rrs_iid`), Block Verification (`block`), Traversal
Verification (`traversal`) and greedy multi-path Block Verification (`gbv`). Each is a host walk over a
`SampledTree` with its randomness behind `Decisions`, so the exact enumeration test can branch over it.
"""

from __future__ import annotations

from goose.engine.core.verify.block import block_walk
from goose.engine.core.verify.gbv import gbv_walk
from goose.engine.core.verify.inputs import Decisions
from goose.engine.core.verify.rrs import rrs_walk
from goose.engine.core.verify.rules import APPLIES, SHAPES, VERIFIERS, check_verifier
from goose.engine.core.verify.traversal import traversal_walk
from goose.engine.core.verify.view import SampledTree, chain_nodes

__all__ = ["APPLIES", "SHAPES", "VERIFIERS", "check_verifier", "verify_walk", "uniforms_keyed_by"]


def uniforms_keyed_by(verifier: str) -> str:
    """`position` for rejection sampling (it tests only nodes on the accepted path), `step` for the verifiers
    that test nodes beyond it (Block, Traversal, GBV)."""
    return "position" if verifier in ("auto", "rrs", "rrs_iid") else "step"


def verify_walk(verifier: str, tree: SampledTree, decisions: Decisions) -> tuple[list[int], int]:
    """(accepted path, bonus token) of `verifier` on `tree`; ValueError if the tree is not of a shape it
    verifies exactly (the config check refuses such runs before the model loads)."""
    if verifier in ("auto", "rrs"):
        return rrs_walk(tree, decisions)
    if verifier == "rrs_iid":
        if tree.paths is None and not tree.is_chain():
            raise ValueError("rrs_iid needs i.i.d. draws: a chain, or a tree with DraftTree.paths")
        return rrs_walk(tree, decisions, with_replacement=True)
    if verifier == "traversal":
        return traversal_walk(tree, decisions)
    if verifier == "block":
        nodes = chain_nodes(tree)
        return block_walk(
            nodes, tree.tokens, [tree.target[n] for n in nodes], [tree.q(n) for n in nodes[:-1]], decisions
        )
    if verifier == "gbv":
        if tree.paths is None and not tree.is_chain():
            raise ValueError("gbv needs K i.i.d. paths (DraftTree.paths)")
        return gbv_walk(tree, decisions)
    raise ValueError(f"sampling.verifier = {verifier!r}: must be one of {', '.join(VERIFIERS)}")
