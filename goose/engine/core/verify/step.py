"""The host side of verifying a draft that carries q (VERIFY.md): one device-to-host copy of what the walk of
`sampling.verifier` needs, then the walk itself.
"""

from __future__ import annotations

import time

import torch

from goose.engine.core.sampling import TargetNoise
from goose.engine.core.tree import DraftTree
from goose.engine.core.verify import uniforms_keyed_by, verify_walk
from goose.engine.core.verify.inputs import (
    NoiseDecisions,
    candidate_sets,
    rejection_tensors,
    unpack_rejection,
)
from goose.engine.core.verify.view import SampledTree


def walk_proposals(
    tree: DraftTree,
    scores: torch.Tensor,
    noise: torch.Tensor,
    pred: torch.Tensor,
    finite: torch.Tensor,
    target_noise: TargetNoise,
    first_position: int,
    verifier: str,
) -> tuple[list[int], list[float], list[int], int, float]:
    """(argmax per node, finiteness flags, accepted path, bonus token, the clock at the host sync) for `tree`
    with proposals, `scores` the warped logits [n, V] and `noise` the target's Gumbel rows of its nodes."""
    n = len(tree)
    children = [[c for c in kids if c < tree.acceptable] for kids in tree.children()]
    cands = candidate_sets([[tree.tokens[c] for c in kids] for kids in children], tree.proposals)
    flat, k = rejection_tensors(scores, noise, cands)
    values = torch.cat([pred.double(), finite.double(), flat]).tolist()  # the one host sync
    synced = time.perf_counter()
    rejection = unpack_rejection(values[2 * n :], cands, k)
    view = SampledTree.from_inputs(tree.tokens, tree.parents, children, tree.proposals, rejection, tree.paths)
    decisions = NoiseDecisions(
        rejection,
        target_noise.uniform,
        first_position,
        tree.depths,
        keyed=uniforms_keyed_by(verifier),
        step_uniform=target_noise.step_uniform,
    )
    path, bonus = verify_walk(verifier, view, decisions)
    return [int(v) for v in values[:n]], values[n : 2 * n], path, bonus, synced
