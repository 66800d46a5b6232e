"""Block Verification of one chain (Sun et al., ICLR 2025, arXiv 2403.10444, Algorithm 2; VERIFY.md §2).
w_0 = 1, w_i = min(1, w_{i−1} p_{i−1}(X_i) / q_{i−1}(X_i)); h_i = Z_i / (Z_i + 1 − w_i) with
Z_i = Σ_x (w_i p_i(x) − q_i(x))+ for i < γ, h_γ = w_γ; τ = the LAST i with η_i ≤ h_i (0 if none), and the
bonus Y ~ p_γ if τ = γ, else Y ~ norm((w_τ p_τ − q_τ)+). E[τ] is the most any verifier that sees only the
chain's p and q gets, hence ≥ token-level rejection sampling; the chain's length may be a stopping time.
"""

from __future__ import annotations

from collections.abc import Sequence

from goose.engine.core.verify.inputs import Decisions, Dist

# τ is the last i with η_i ≤ h_i; False = stop at the first failure (a lossy reading; tests only).
LAST_SUCCESS = True


def bonus_residual(p: Dist, q: dict[int, float], w: float) -> Dist:
    """The bonus's law when block τ < γ was accepted: norm((w_τ p_τ − q_τ)+), weighted by w_τ."""
    return p.residual(q, w)


def acceptance_prob(z: float, w: float) -> float:
    """h = Z / (Z + (1 − w)), written so that it is 1, not 0/0, when Z is below an ulp and w = 1."""
    denominator = z + (1.0 - w)
    return 1.0 if denominator <= 0.0 else z / denominator


def block_walk(
    nodes: Sequence[int],
    tokens: Sequence[int],
    target: Sequence[Dist],
    proposals: Sequence[dict[int, float]],
    decisions: Decisions,
) -> tuple[list[int], int]:
    """(accepted path, bonus token) on the chain `nodes` (root first); target[i] = p at nodes[i], proposals[i]
    = the normalised q that nodes[i + 1] was drawn from (GBV passes its skewed q̃)."""
    gamma = len(nodes) - 1
    weights = [1.0]
    for i in range(1, gamma + 1):
        x = tokens[nodes[i]]
        q_x = proposals[i - 1].get(x, 0.0)
        ratio = target[i - 1].prob(x) / q_x if q_x > 0.0 else 0.0
        weights.append(min(1.0, weights[-1] * ratio))
    tau = 0
    order = range(gamma, 0, -1) if LAST_SUCCESS else range(1, gamma + 1)
    for i in order:  # the last success wins: test from the deepest block down
        if i == gamma:
            h = weights[i]
        else:
            h = acceptance_prob(target[i].residual(proposals[i], weights[i]).total(), weights[i])
        success = decisions.accept(h, 1.0, nodes[i], 0)
        if LAST_SUCCESS and success:
            tau = i
            break
        if not LAST_SUCCESS:
            if not success:
                break
            tau = i
    node = nodes[tau]
    if tau == gamma:
        return list(nodes), decisions.draw(node, target[tau])
    return list(nodes[: tau + 1]), decisions.draw(
        node, bonus_residual(target[tau], proposals[tau], weights[tau])
    )
