"""Host-side pieces of a verification step shared by its greedy and sampled paths: the greedy walk's fallback
(Goose §4.2, Algorithm 3, docs/paper.md), the stop rules and the argmax.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from goose.engine.core.tree import SPINE, DraftTree


def greedy_walk(tree: DraftTree, predictions: Sequence[int]) -> list[int]:
    """Longest path the target would itself generate greedily (Goose §4.2, Algorithm 3), a SPINE child winning
    a tie; the device walk falls back to this when a parent has duplicate tokens.
    """
    children = tree.children()
    acceptable = tree.acceptable
    path = [0]
    node = 0
    while True:
        want = predictions[node]
        match = -1
        for child in children[node]:
            if child >= acceptable:
                continue
            if tree.tokens[child] == want and (match < 0 or tree.sources[child] == SPINE):
                match = child
                if tree.sources[child] == SPINE:
                    break
        if match < 0:
            return path
        path.append(match)
        node = match


def cut_at_stop(tokens: list[int], eos_token_ids: Sequence[int], budget: int) -> list[int]:
    """Cut committed tokens at the first EOS (kept) and at the remaining token budget."""
    out = tokens[: max(budget, 0)]
    for i, t in enumerate(out):
        if t in eos_token_ids:
            return out[: i + 1]
    return out


def commit_path(
    tree: DraftTree, path: list[int], bonus: int, eos_token_ids: Sequence[int], budget: int
) -> tuple[list[int], list[int]]:
    """(the accepted nodes kept, the tokens committed): the path's tokens plus the `bonus` token, cut at the
    first EOS and at `budget`; the path keeps the drafted nodes whose tokens made it into the output."""
    proposed = [tree.tokens[i] for i in path[1:]] + [bonus]
    new_tokens = cut_at_stop(proposed, eos_token_ids, budget)
    return path[: 1 + min(len(new_tokens), len(path) - 1)], new_tokens


def fast_argmax(logits: torch.Tensor) -> torch.Tensor:
    """torch.argmax over the last dimension, in fp32 for half-precision logits (exact, faster on CPUs)."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    return logits.argmax(dim=-1)
