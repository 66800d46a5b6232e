"""Greedy multi-path Block Verification (Thomas & Pal, arXiv 2602.16961; VERIFY.md §4). From K i.i.d. paths
(merged into a trie, DraftTree.paths) select the lexicographic maximum under the per-node order ≺_c:
ascending r_c(x) = min(1, p_c(x)/q_c(x)), ties by token id; the selected path follows the autoregressive law
q̃_c(x) ∝ (A + J F_c(x))^K − (A + J (F_c(x) − q_c(x)))^K, with F_c the CDF of q_c in ≺_c, J the q-probability
of the selected prefix and A that of the prefixes before it; then Block Verification with q̃. Selection and
F use the same strict order (the reference code's path walk breaks ties differently: lossy). Above the paths'
branching point (a delayed tree's trunk) the path is the one drawn, q̃ = q.
"""

from __future__ import annotations

from goose.engine.core.verify.block import block_walk
from goose.engine.core.verify.inputs import Decisions, Dist
from goose.engine.core.verify.view import SampledTree


def rank_key(p: Dist, q: dict[int, float], total: float):
    """The key of ≺_c: (r_c(x), x), r_c = min(1, p_c/q_c); a larger key is better."""

    def key(x: int) -> tuple[float, int]:
        return (min(1.0, p.prob(x, total) / q[x]), x)

    return key


def select_child(tree: SampledTree, u: int, q: dict[int, float]) -> int:
    """u's child whose token is maximal in ≺_u."""
    key = rank_key(tree.target[u], q, tree.target[u].total())
    return max(tree.children[u], key=lambda c: key(tree.tokens[c]))


def skewed(q: dict[int, float], key, a: float, j: float, k: int) -> dict[int, float]:
    """q̃ over supp q: the law of the next token of the best of K paths given the selected prefix (J, A).
    a^K − b^K = (a − b) Σ_i a^i b^(K−1−i), a − b = J q(x): no cancellation; scaled by A + J."""
    scale = a + j
    out, cdf = {}, 0.0
    for x in sorted(q, key=key):
        cdf += q[x]
        hi, lo = (a + j * cdf) / scale, (a + j * (cdf - q[x])) / scale
        out[x] = q[x] * sum(hi**i * lo ** (k - 1 - i) for i in range(k))
    total = sum(out.values())
    return {x: v / total for x, v in out.items() if v > 0.0} if total > 0.0 else dict(q)


def gbv_walk(tree: SampledTree, decisions: Decisions) -> tuple[list[int], int]:
    """(accepted path, bonus token). C = the q-mass of the prefixes up to the selected one, J = that of the
    selected one (both 1 at the branching point), A = C − J."""
    k = tree.num_paths()
    branch = tree.branch_point()
    nodes, proposals = [0], []
    c = j = 1.0
    in_paths = False
    while tree.children[nodes[-1]]:
        u = nodes[-1]
        q = tree.q(u)
        in_paths = in_paths or u == branch
        if not in_paths or k == 1:
            child = tree.children[u][0]
            proposals.append(q)
        else:
            key = rank_key(tree.target[u], q, tree.target[u].total())
            child = select_child(tree, u, q)
            proposals.append(skewed(q, key, c - j, j, k))
            x = tree.tokens[child]
            upto = sum(v for y, v in q.items() if key(y) <= key(x))  # F_u(x)
            c, j = (c - j) + j * upto, j * q[x]
        nodes.append(child)
    return block_walk(nodes, tree.tokens, [tree.target[n] for n in nodes], proposals, decisions)
