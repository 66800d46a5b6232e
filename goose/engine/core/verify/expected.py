"""The exact law of the accepted length of a verifier on one drafted tree, without sampling noise
(arXiv 2602.16994 §4 compares verifiers on identical drafts; VERIFY.md).

Every verifier here draws its bonus token only where its walk stops, so what it accepts depends on its
accept / reject tests alone, and after each test the walk's next step is a function of the outcomes so far:
the tests form a tree with a probability on each branch. `accepted_length_law` walks every branch of that
tree (depth first, replaying the verifier's own walk with scripted outcomes, so the law is computed by the
code that verifies, not by a second implementation of each rule): recursive rejection sampling tests at
most one chain of children per level, Traversal and Block one test per deleted leaf, so a tree of n nodes
has at most n + 1 branches and a step costs O(n) replays of the walk. Branches of probability 0 are not
visited. `applicable` says which verifiers are exact on a step's tree (goose.engine.core.verify.rules, read
from the tree itself: a chain, or K i.i.d. paths).
"""

from __future__ import annotations

from goose.engine.core.verify import verify_walk
from goose.engine.core.verify.inputs import Dist
from goose.engine.core.verify.view import SampledTree


class _Scripted:
    """`Decisions` that take the outcomes of `script` in order, then accept; record each test's
    probability of acceptance. Draws return -1 (the bonus does not change what was accepted)."""

    def __init__(self, script: tuple[bool, ...]) -> None:
        self.script = script
        self.probs: list[float] = []

    def accept(self, num: float, den: float, node: int, rank: int) -> bool:
        # NoiseDecisions accepts when u·den < num for u ~ U[0, 1): probability min(1, num / den), and for
        # den = 0 exactly when num > 0.
        if den > 0.0:
            a = min(1.0, max(num, 0.0) / den)
        else:
            a = 1.0 if num > 0.0 else 0.0
        i = len(self.probs)
        self.probs.append(a)
        if i < len(self.script):
            return self.script[i]
        return a > 0.0  # unscripted: accept if possible, else reject

    def draw(self, node: int, dist: Dist) -> int:
        return -1


def accepted_length_law(verifier: str, tree: SampledTree) -> list[float]:
    """P(accepted drafted tokens = k) for k = 0 .. the tree's depth, exact up to rounding, for `verifier`
    on `tree` (ValueError where it does not apply, as `verify_walk`)."""
    law: list[float] = []
    stack: list[tuple[bool, ...]] = [()]
    while stack:
        script = stack.pop()
        decisions = _Scripted(script)
        path, _ = verify_walk(verifier, tree, decisions)
        prob = 1.0
        outcomes = list(script)
        for i, a in enumerate(decisions.probs):
            taken = outcomes[i] if i < len(outcomes) else a > 0.0
            if i >= len(outcomes):
                outcomes.append(taken)
                other = 1.0 - a if taken else a
                if other > 0.0:  # the branch not taken here, its earlier outcomes as in this run
                    stack.append((*outcomes[:i], not taken))
            prob *= a if taken else 1.0 - a
        accepted = len(path) - 1
        law.extend([0.0] * (accepted + 1 - len(law)))
        law[accepted] += prob
    return law


def expected_accepted(verifier: str, tree: SampledTree) -> float:
    """E[accepted drafted tokens] of `verifier` on `tree` (the block efficiency minus the bonus)."""
    return sum(k * p for k, p in enumerate(accepted_length_law(verifier, tree)))


def reach(law: list[float]) -> list[float]:
    """P(accepted ≥ d) for d = 1 .. len(law) - 1: block efficiency by depth."""
    tail, out = 0.0, []
    for p in reversed(law[1:]):
        tail += p
        out.append(tail)
    return out[::-1]


def applicable(tree: SampledTree) -> tuple[str, ...]:
    """The verifiers exact on this tree: recursive rejection sampling and Traversal on any; with its i.i.d.
    draws (a chain, or DraftTree.paths) also rejection sampling with replacement and GBV; on a chain also
    Block Verification."""
    chain = tree.is_chain()
    out = ["rrs", "traversal"]
    if chain or tree.paths is not None:
        out += ["rrs_iid", "gbv"]
    if chain:
        out.append("block")
    return tuple(out)
