"""Multi-candidate recursive rejection sampling (VERIFY.md §1): top-down, at node u test u's children in draw
order; child c is kept with probability min(1, p(c)/q(c)); after a rejection p ← norm((p − q)+), and q loses
c and is renormalised when the children were drawn without replacement (RSD, Gumbel-top-k; also deduplicated
i.i.d. draws in first-appearance order) or stays q when they are i.i.d. draws with repeats (SpecInfer, arXiv
2305.09781). The bonus is drawn from the residual where the walk stops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from goose.engine.core.verify import inputs as _inputs
from goose.engine.core.verify.inputs import Decisions, Dist, NoiseDecisions, RejectionInputs
from goose.engine.core.verify.view import SampledTree


def rrs_walk(
    tree: SampledTree, decisions: Decisions, with_replacement: bool = False
) -> tuple[list[int], int]:
    """(accepted path, bonus token). Without replacement the children are tested once each in draw order;
    with replacement each i.i.d. draw is a round (`SampledTree.raw_draws`), a repeat of a rejected token
    being rejected again (its residual mass is 0) while p is still updated."""
    rounds = tree.raw_draws() if with_replacement else tree.children
    u, path = 0, [0]
    while True:
        start = tree.target[u]
        residual = dict(start.inside)  # p_i on C_u, unnormalised
        outside_mass = start.base_outside
        outside_scale = 1.0  # p_i(x) = p_u(x) * outside_scale / total for x outside C_u
        total = sum(residual.values()) + outside_mass
        proposal = tree.proposals[u]
        q = (
            _inputs.normalised(dict(zip(proposal[0], proposal[1], strict=True)))
            if proposal is not None
            else None
        )
        accepted = -1
        for rank, child in enumerate(rounds[u]):
            c = tree.tokens[child]
            p_c = residual.get(c, 0.0) / total if total > 0.0 else 0.0
            q_c = 1.0 if q is None else q.get(c, 0.0)
            if q_c > 0.0 and decisions.accept(p_c, q_c, u, rank):
                accepted = child
                break
            if q is None:  # q = δ_c: the residual is p without c
                residual[c] = 0.0
            else:
                residual = {x: max(v / total - q.get(x, 0.0), 0.0) for x, v in residual.items()}
                outside_scale /= total
                if not with_replacement:
                    q.pop(c, None)
                    q = _inputs.normalised(q)
            total = sum(residual.values()) + outside_mass * outside_scale
        if accepted < 0:
            return path, decisions.draw(u, Dist(residual, outside_mass, outside_scale))
        path.append(accepted)
        u = accepted


def rejection_walk(
    children: Sequence[Sequence[int]],
    tokens: Sequence[int],
    proposals: Sequence[object],
    inputs: RejectionInputs,
    uniform: Callable[[int, int], float],
    first_position: int,
    depths: Sequence[int],
) -> tuple[list[int], int]:
    """Recursive rejection sampling without replacement down the tree: (accepted path, bonus token).
    proposals[u] is the q_u that u's children were drawn from, or None (q = δ); uniform(position, rank)."""
    parents = [-1] * len(tokens)
    for u, kids in enumerate(children):
        for c in kids:
            parents[c] = u
    tree = SampledTree.from_inputs(tokens, parents, [list(k) for k in children], proposals, inputs)
    return rrs_walk(tree, NoiseDecisions(inputs, uniform, first_position, depths))
