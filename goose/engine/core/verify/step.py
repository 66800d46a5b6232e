"""The host side of verifying a sampled step (T > 0): for a draft that carries q (VERIFY.md), one
device-to-host copy of what the walk of `sampling.verifier` needs, then the walk itself
(`walk_proposals`); for a draft without q, sample-and-match: the target's own sample at every node, the
path that matches it (`match_samples`).
"""

from __future__ import annotations

import time
from itertools import compress

import torch

from goose.engine.core.sampling import TargetNoise, sample_and_match
from goose.engine.core.tree import DraftTree, TreeInputs
from goose.engine.core.verify import uniforms_keyed_by, verify_walk
from goose.engine.core.verify.inputs import (
    NoiseDecisions,
    candidate_sets,
    rejection_tensors,
    unpack_rejection,
)
from goose.engine.core.verify.view import SampledTree
from goose.engine.core.walk import greedy_walk


def walk_proposals(
    tree: DraftTree,
    scores: torch.Tensor,
    noise: torch.Tensor,
    pred: torch.Tensor,
    finite: torch.Tensor,
    target_noise: TargetNoise,
    first_position: int,
    verifier: str,
) -> tuple[list[int], list[float], list[int], int, float, SampledTree]:
    """(argmax per node, finiteness flags, accepted path, bonus token, the clock at the host sync, the tree as
    the walk saw it) for `tree` with proposals, `scores` the warped logits [n, V] and `noise` the target's
    Gumbel rows of its nodes."""
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
    return [int(v) for v in values[:n]], values[n : 2 * n], path, bonus, synced, view


def match_samples(
    tree: DraftTree,
    scores: torch.Tensor,
    noise: torch.Tensor,
    pred: torch.Tensor,
    finite: torch.Tensor,
    inputs: TreeInputs | None,
) -> tuple[list[int], list[int], list[int], int, float, None]:
    """Sample-and-match for `tree` without proposals: (argmax per node, finiteness flags, accepted path,
    bonus token, the clock at the host sync, None: no q to compare verifiers on). Each node's target sample is argmax(scores + noise); a node
    is on the path when every ancestor's token equals its parent's sample, computed on the device
    (`inputs`: the tree's tensors, None for the anchor alone); the bonus is the sample at the path's end."""
    targets, draws = sample_and_match(scores, noise)
    if inputs is None:
        packed = torch.stack([pred, finite.long(), targets, draws])
    else:
        parents = inputs.parents
        match = (inputs.tokens == targets[parents.clamp(min=0)]) | (parents < 0)
        on_path = ~(inputs.ancestors & ~match[None, :]).any(dim=-1)
        packed = torch.stack([pred, finite.long(), targets, draws, on_path.long()])
    rows = packed.tolist()  # the one host sync of the step
    synced = time.perf_counter()
    if inputs is None:
        path = [0]
    else:
        path = list(compress(range(tree.acceptable), rows[4]))
        if tree.depths[path[-1]] != len(path) - 1:  # duplicate tokens under a parent
            path = greedy_walk(tree, rows[2])
    return rows[0], rows[1], path, rows[3][path[-1]], synced, None
