"""Exact enumeration of a sampled draft and its verification on a toy (VERIFY.md §8.3): a target p and a
draft q hashed per context (Dirichlet 0.7) over a few tokens; every draw of the drafter and every branch of
the verifier (Bernoulli accepts, categorical bonus draws) is summed over, the output completed by AR from p
to N tokens and compared with p^N. Test support only: the verifiers are the product's.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from goose.engine.core.tree import BRANCH, DraftTree
from goose.engine.core.verify import SampledTree, verify_walk
from goose.engine.core.verify.inputs import Dist, candidate_sets


def dirichlet(key: tuple, size: int, alpha: float = 0.7, support: int | None = None) -> list[float]:
    rng = random.Random(repr(key))
    draws = [rng.gammavariate(alpha, 1.0) for _ in range(size)]
    if support is not None:  # a sparse q: the last tokens outside its support
        draws = [d if i < support else 0.0 for i, d in enumerate(draws)]
    total = sum(draws)
    return [d / total for d in draws]


@dataclass
class Toy:
    """p(·|context) and q(·|context) over `vocab` tokens; q is supported on the first `q_support`."""

    seed: int
    vocab: int = 3
    q_support: int | None = None

    def p(self, context: Sequence[int]) -> list[float]:
        return dirichlet(("p", self.seed, tuple(context)), self.vocab)

    def q(self, context: Sequence[int]) -> list[float]:
        return dirichlet(("q", self.seed, tuple(context)), self.vocab, support=self.q_support)

    def proposal(self, context: Sequence[int]) -> tuple[tuple[int, ...], tuple[float, ...]]:
        q = self.q(context)
        ids = tuple(x for x in range(self.vocab) if q[x] > 0.0)
        return ids, tuple(q[x] for x in ids)


class Brancher:
    """One run along a scripted sequence of choices; unscripted choices take their first option and are
    recorded, so that `enumerate_runs` can visit the others."""

    def __init__(self, script: tuple[int, ...]) -> None:
        self.script, self.taken, self.options, self.prob = script, [], [], 1.0

    def choice(self, options: Sequence[tuple[object, float]]) -> object:
        options = [(v, p) for v, p in options if p > 0.0]
        i = len(self.taken)
        pick = self.script[i] if i < len(self.script) else 0
        self.taken.append(pick)
        self.options.append(len(options))
        self.prob *= options[pick][1]
        return options[pick][0]

    def categorical(self, probs: Sequence[float]) -> int:
        return int(self.choice(list(enumerate(probs))))  # type: ignore[arg-type]


def enumerate_runs(run: Callable[[Brancher], tuple]) -> dict[tuple, float]:
    """Σ over every choice sequence of `run` of its probability, per output."""
    out: dict[tuple, float] = defaultdict(float)
    stack: list[tuple[int, ...]] = [()]
    while stack:
        script = stack.pop()
        b = Brancher(script)
        result = run(b)
        out[result] += b.prob
        for i in range(len(script), len(b.taken)):
            for alt in range(1, b.options[i]):
                stack.append((*b.taken[:i], alt))
    return dict(out)


@dataclass
class EnumDecisions:
    """`Decisions` that branch: accept with probability min(1, num/den); draw every token of the
    distribution (outside C_u in proportion to p_u). `bonus_from_p`: the broken bonus (VERIFY.md §3)."""

    b: Brancher
    tree: SampledTree
    full_p: list[list[float]]
    bonus_from_p: bool = False

    def accept(self, num: float, den: float, node: int, rank: int) -> bool:
        a = 1.0 if den <= 0.0 else min(1.0, max(num, 0.0) / den)
        return bool(self.b.choice([(True, a), (False, 1.0 - a)]))

    def draw(self, node: int, dist: Dist) -> int:
        if self.bonus_from_p:
            dist = self.tree.target[node]
        total = dist.total()
        p = self.full_p[node]
        options = []
        for x in range(len(p)):
            if x in dist.inside:
                options.append((x, dist.inside[x] / total if total > 0.0 else 0.0))
            elif dist.base_outside > 0.0:
                options.append((x, dist.outside / total * p[x] / dist.base_outside))
        if not any(prob > 0.0 for _, prob in options):
            # A numerically empty residual (its mass only the rounding of 1 - Σ p on C_u, reached with
            # probability of that order; three deep and more): the product's fallback.
            return max(dist.inside, key=lambda x: dist.inside[x])
        return int(self.b.choice(options))  # type: ignore[arg-type]


@dataclass
class Draft:
    """A drafted tree with its nodes' contexts."""

    tree: DraftTree
    contexts: list[list[int]] = field(default_factory=list)


def start(toy: Toy, prompt: Sequence[int]) -> Draft:
    tree = DraftTree.single(prompt[-1])
    tree.proposals = [None]
    return Draft(tree, [list(prompt)])


def add(toy: Toy, draft: Draft, parent: int, token: int) -> int:
    for c in range(len(draft.tree)):
        if draft.tree.parents[c] == parent and draft.tree.tokens[c] == token:
            return c
    draft.tree.proposals[parent] = toy.proposal(draft.contexts[parent])
    node = draft.tree.add(token, parent, BRANCH)
    draft.contexts.append([*draft.contexts[parent], token])
    return node


def draw_without_replacement(b: Brancher, q: Sequence[float], count: int) -> list[int]:
    left, out = list(q), []
    for _ in range(count):
        total = sum(left)
        if total <= 0.0:
            break
        x = b.categorical([v / total for v in left])
        out.append(x)
        left[x] = 0.0
    return out


def draft_fixed_tree(b: Brancher, toy: Toy, prompt, widths: Sequence[int]) -> Draft:
    """widths[d]: children drawn without replacement under each node of depth d."""
    draft = start(toy, prompt)
    frontier = [0]
    for width in widths:
        nxt = []
        for u in frontier:
            for x in draw_without_replacement(b, toy.q(draft.contexts[u]), width):
                nxt.append(add(toy, draft, u, x))
        frontier = nxt
    return draft


def draft_chain(b: Brancher, toy: Toy, prompt, length: int, stop_below: float = 0.0) -> Draft:
    """A chain; with `stop_below` it stops after a draw whose q is below it (a stopping time)."""
    draft = start(toy, prompt)
    u = 0
    for _ in range(length):
        q = toy.q(draft.contexts[u])
        x = b.categorical(q)
        u = add(toy, draft, u, x)
        if q[x] < stop_below:
            break
    return draft


def draft_paths(
    b: Brancher, toy: Toy, prompt, k: int, trunk: int, length: int, branch_below: float = 0.0
) -> Draft:
    """A (K, L1, L2) delayed tree: a trunk of `trunk` draws, then K i.i.d. paths of `length` (trunk 0: K
    i.i.d. paths from the anchor), merged into their trie; DraftTree.paths holds the K paths. With
    `branch_below`, the paths branch early at the first trunk node whose q has no token above it (the
    dynamic delay: a decision on the node's own q, made before any of its children is drawn)."""
    draft = start(toy, prompt)
    u = 0
    for _ in range(trunk):
        q = toy.q(draft.contexts[u])
        if max(q) < branch_below:
            break
        u = add(toy, draft, u, b.categorical(q))
    paths = []
    for _ in range(k):
        node, path = u, []
        for _ in range(length):
            node = add(toy, draft, node, b.categorical(toy.q(draft.contexts[node])))
            path.append(node)
        paths.append(tuple(path))
    draft.tree.paths = paths
    return draft


def sampled_view(
    toy: Toy, draft: Draft, reverse_siblings: bool = False
) -> tuple[SampledTree, list[list[float]]]:
    tree = draft.tree
    tree.validate()
    children = tree.children()
    if reverse_siblings:
        children = [kids[::-1] for kids in children]
    full_p = [toy.p(c) for c in draft.contexts]
    cands = candidate_sets([[tree.tokens[c] for c in kids] for kids in children], tree.proposals)
    target = [Dist.target(c, [full_p[u][x] for x in c]) for u, c in enumerate(cands)]
    view = SampledTree(tree.tokens, tree.parents, children, tree.proposals, target, tree.paths)
    return view, full_p


def output_distribution(
    toy: Toy,
    prompt: Sequence[int],
    drafter: Callable[[Brancher], Draft],
    verifier: str,
    n: int,
    walk: Callable | None = None,
    **broken,
) -> dict[tuple, float]:
    """P(first n output tokens) of draft + verify, completed by AR from p."""

    def run(b: Brancher) -> tuple:
        draft = drafter(b)
        view, full_p = sampled_view(toy, draft, broken.get("reverse_siblings", False))
        decisions = EnumDecisions(b, view, full_p, broken.get("bonus_from_p", False))
        path, bonus = (walk or (lambda t, d: verify_walk(verifier, t, d)))(view, decisions)
        out = [draft.tree.tokens[v] for v in path[1:]] + [bonus]
        context = [*prompt, *out]
        while len(out) < n:
            x = b.categorical(toy.p(context))
            out.append(x)
            context.append(x)
        return tuple(out[:n])

    return enumerate_runs(run)


def ar_distribution(toy: Toy, prompt: Sequence[int], n: int) -> dict[tuple, float]:
    def run(b: Brancher) -> tuple:
        context, out = list(prompt), []
        for _ in range(n):
            x = b.categorical(toy.p(context))
            out.append(x)
            context.append(x)
        return tuple(out)

    return enumerate_runs(run)


def max_error(a: dict[tuple, float], b: dict[tuple, float]) -> float:
    return max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def mean_accepted(toy, prompt, drafter, verifier) -> float:
    """E[accepted draft tokens] by enumeration."""
    total = 0.0

    def run(b: Brancher) -> tuple:
        draft = drafter(b)
        view, full_p = sampled_view(toy, draft)
        path, _ = verify_walk(verifier, view, EnumDecisions(b, view, full_p))
        return (len(path) - 1,)

    for (accepted,), prob in enumerate_runs(run).items():
        total += accepted * prob
    return total


assert math.isclose(sum(dirichlet(("x",), 3)), 1.0)
