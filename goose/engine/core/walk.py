"""Pieces of a verification step shared by its greedy and sampled paths: the greedy step's device work and host
copy (`greedy_rows`), the greedy walk's fallback (Goose §4.2, Algorithm 3, docs/paper.md), the stop rules and
the argmax (read off the top-K when a table drafter wants it).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from goose.engine.core.tree import SPINE, DraftTree, TreeInputs


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


def argmax_of_top(values: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.argmax of each row from its sorted top-k (`torch.topk`'s values, indices), exactly: the smallest
    index among the entries equal to the row's maximum (argmax's first maximal index). Every maximal entry is
    in the top-k unless all k are maximal, so the second tensor flags the rows (all k tied) whose argmax the
    top-k cannot tell; those take `fast_argmax` of the logits."""
    tied = values == values[:, :1]
    pred = torch.where(tied, indices, indices.new_full((), torch.iinfo(indices.dtype).max)).amin(dim=-1)
    return pred, tied[:, -1]


def fast_argmax(logits: torch.Tensor) -> torch.Tensor:
    """torch.argmax over the last dimension, in fp32 for half-precision logits (exact, faster on CPUs)."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    return logits.argmax(dim=-1)


def greedy_rows(
    logits: torch.Tensor, inputs: TreeInputs | None, topk_width: int = 0
) -> tuple[list[list[int]], tuple[torch.Tensor, torch.Tensor] | None]:
    """A greedy step's device work and its one host copy: rows [argmax per node, finite flag per node, then
    for a tree (`inputs`) whether each node is on the greedy path (it and all its ancestors match their
    parent's argmax), then with `topk_width` K > 0 whether each node's top-K is all tied]; and the sorted
    top-K (values, indices) of every node's logits (None without K), the argmax read off them
    (`argmax_of_top`)."""
    top = None
    if topk_width > 0:
        found = torch.topk(logits, min(topk_width, logits.shape[-1]), dim=-1)
        top = (found.values, found.indices)
        pred, unsure = argmax_of_top(*top)
        finite = torch.isfinite(found.values[:, 0])
    else:
        pred = fast_argmax(logits)
        finite = torch.isfinite(logits.gather(-1, pred[:, None])[:, 0])
    flags = [pred, finite.long()]
    if inputs is not None:
        match = (inputs.tokens == pred[inputs.parents.clamp(min=0)]) | (inputs.parents < 0)
        flags.append((~(inputs.ancestors & ~match[None, :]).any(dim=-1)).long())
    if top is not None:
        flags.append(unsure.long())
    return torch.stack(flags).tolist(), top
