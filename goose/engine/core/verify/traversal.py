"""Traversal Verification (Weng et al., NeurIPS 2025, arXiv 2505.12398, Algorithm 3; VERIFY.md §3): bottom-up
over the tree, each subtree read as a block. Working copies P_u, Q_u; w_root = 1 and
w_c = min(1, w_u P_u(c) / Q_u(c)) top-down. Repeatedly take the first leaf v in DFS order (always the first
remaining child); accept root→v with probability w_v and draw the bonus from the current P_v; else delete v
and turn its parent u's pair into Block Verification's residual: R = (w_u P_u − Q_u)+, S = ΣR,
w_u ← S / (S + 1 − w_u), P_u ← R / S, Q_u loses token(v) and is renormalised; reweight below u. Exact on trees
whose siblings are drawn without replacement and kept in draw order (deduplicated i.i.d. paths in
first-appearance order included); on a chain it is Block Verification.
"""

from __future__ import annotations

from goose.engine.core.verify.block import acceptance_prob
from goose.engine.core.verify.inputs import Decisions, Dist, normalised
from goose.engine.core.verify.view import SampledTree


def traversal_walk(tree: SampledTree, decisions: Decisions) -> tuple[list[int], int]:
    """(accepted path, bonus token)."""
    tokens = tree.tokens
    kids = [list(c) for c in tree.children]
    p = [Dist(dict(d.inside), d.base_outside, d.scale) for d in tree.target]
    q = [tree.q(u) if kids[u] else {} for u in range(len(tokens))]
    w = [0.0] * len(tokens)
    w[0] = 1.0

    def reweight(top: int) -> None:
        stack = [top]
        while stack:
            u = stack.pop()
            total = p[u].total()
            for c in kids[u]:
                q_c = q[u].get(tokens[c], 0.0)
                w[c] = min(1.0, w[u] * p[u].prob(tokens[c], total) / q_c) if q_c > 0.0 else 0.0
                stack.append(c)

    reweight(0)
    while True:
        v = 0
        while kids[v]:
            v = kids[v][0]
        if v == 0:
            return [0], decisions.draw(0, p[0])
        if decisions.accept(w[v], 1.0, v, 0):
            return tree.path_to(v), decisions.draw(v, p[v])
        u = tree.parents[v]
        kids[u].remove(v)
        residual = p[u].residual(q[u], w[u])
        s = residual.total()
        w[u] = acceptance_prob(s, w[u]) if s > 0.0 else (1.0 if w[u] >= 1.0 else 0.0)
        if s > 0.0:
            p[u] = residual
        q[u].pop(tokens[v], None)
        q[u] = normalised(q[u])
        reweight(u)
