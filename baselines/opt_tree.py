"""OPT-Tree (Wang et al., arXiv 2406.17276) over Goose's own candidate pool: the E(A)-maximising tree.

E(A) = Σ_{v ≠ anchor} P(path to v accepted); a child's value never exceeds its parent's, so the B most
valuable candidates form the E(A)-optimal tree. Over exactly Goose's candidates (the extended context chain
as SPINE, adjacency successors as BRANCH; Goose §4.1, docs/paper.md) it differs from Goose only in how the
budget is allocated. Values are Π r(source, depth, rank) from the `AcceptanceModel` that budget=auto also
uses (goose.engine.core.acceptance), learnt across prompts; a best-first heap makes every prefix the best
tree of its size. Without a draft model r replaces the draft softmax, δ = 0, D bounds branches only, and
B is fixed.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from baselines.shared.adjacency_drafter import AdjacencyDrafter, prev_of_anchor
from goose.engine.core.acceptance import MAX_DEPTH_BUCKET, MAX_RANK_BUCKET, AcceptanceModel
from goose.engine.core.acceptance_prior import load_prior
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.method.confidence import extension_limit, match_confidence
from goose.method.config import CalibratedPriorConfig, GooseConfig
from goose.method.tree_shape import count_tree_shape
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_bool, check_float, check_positive


@dataclass(frozen=True)
class OptTreeConfig(CalibratedPriorConfig):
    """OPT-Tree's hyperparameters: Goose's candidate pool, matcher and chain extension (`extend_chain`, when
    c > `chain_extension_threshold`; Goose Table 5) plus the acceptance prior of budget=auto's learner
    (`AcceptanceModel`): `prior_strength` pseudo-observations, `spine_prior` r of a spine node,
    `branch_prior` / (j + 1) r of a rank-j branch node; `acceptance_prior`, a calibrated prior to start from
    where it has evidence (a model or family name, a prior's name or a path to a prior file:
    goose.engine.core.acceptance_prior.find_prior; none found: the hand prior), "auto" (the default) the prior
    of the run's model (goose.harness.compose.drafter_spec), "hand": the hand prior; the config records the
    prior that ran.
    """

    owner = "OptTreeDrafter"
    extend_chain: bool = True
    chain_extension_threshold: float = GooseConfig.chain_extension_threshold
    prior_strength: float = 2.0
    spine_prior: float = 0.6
    branch_prior: float = 0.35

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
        check_bool(f"{owner}.extend_chain", self.extend_chain)
        check_positive(f"{owner}.prior_strength", self.prior_strength, why="pseudo-observations of the prior")
        check_float(f"{owner}.spine_prior", self.spine_prior, 0.0, 1.0, why="a prior acceptance rate")
        check_float(f"{owner}.branch_prior", self.branch_prior, 0.0, 1.0, why="a prior acceptance rate")
        object.__setattr__(self, "ngram_lengths", tuple(int(n) for n in self.ngram_lengths))
        for name in ("prior_strength", "spine_prior", "branch_prior"):
            object.__setattr__(self, name, float(getattr(self, name)))


@dataclass(frozen=True)
class Candidate:
    """A possible child of a tree node: token, source (SPINE / BRANCH), rank among the node's candidates
    (spine child first), and rate r.
    """

    token: int
    source: int
    rank: int
    rate: float


# children(tree, node) -> the candidates of `node`, called once when it enters the tree.
ChildrenFn = Callable[[DraftTree, int], Sequence[Candidate]]


@dataclass
class SelectedTree:
    """The best-first tree and, per node, its path value and candidate rank (node 0: 1.0, 0)."""

    tree: DraftTree
    values: list[float]
    ranks: list[int]

    @property
    def expected_accepted(self) -> float:
        return sum(self.values[1:])


def select_best_first(anchor: int, children: ChildrenFn, budget: int) -> SelectedTree:
    """The `budget` most valuable nodes (anchor included) of the candidate tree spanned by `children`, in
    best-first order; every prefix is the best tree of its size.
    """
    if budget < 1:
        raise ValueError(f"budget = {budget}: must be >= 1")
    tree = DraftTree.single(anchor)
    values, ranks = [1.0], [0]
    # per tree node: its candidates as (value, rank, candidate), best first
    pending: list[list[tuple[float, int, Candidate]]] = []
    heap: list[tuple[float, int, int, int, int]] = []  # (-value, depth, parent, rank, position)

    def push(parent: int, pos: int) -> None:
        value, rank, _ = pending[parent][pos]
        heapq.heappush(heap, (-value, tree.depths[parent] + 1, parent, rank, pos))

    def open_node(node: int) -> None:
        cands = []
        for c in children(tree, node) if len(tree) < budget else ():
            if not 0.0 <= c.rate <= 1.0:
                raise ValueError(f"candidate {c}: rate must be in [0, 1]")
            cands.append((values[node] * c.rate, c.rank, c))
        cands.sort(key=lambda x: (-x[0], x[1]))
        pending.append(cands)
        if cands:
            push(node, 0)

    open_node(0)
    while heap and len(tree) < budget:
        neg_value, _, parent, rank, pos = heapq.heappop(heap)
        cand = pending[parent][pos][2]
        node = tree.add(cand.token, parent, cand.source)
        values.append(-neg_value)
        ranks.append(rank)
        if pos + 1 < len(pending[parent]):
            push(parent, pos + 1)
        open_node(node)
    return SelectedTree(tree, values, ranks)


class OptTreeDrafter(AdjacencyDrafter):
    """OPT-Tree's E(A)-maximising tree of B nodes over Goose's candidates; keyword arguments are
    `OptTreeConfig`'s fields.
    """

    config_class = OptTreeConfig

    def __init__(self, **hyperparameters: Any) -> None:
        super().__init__("opt_tree", OptTreeConfig(**hyperparameters))
        self.matcher = ContextMatcher(self.ngram_lengths, self.max_chain)
        prior = load_prior(self.acceptance_prior, "opt_tree", self.name)
        self.acceptance = AcceptanceModel(
            self.prior_strength, self.spine_prior, self.branch_prior, prior=prior
        )
        self._rates: dict[int, list[list[float]]] | None = None  # source -> [depth][rank], cached
        self._chain: list[int] = []
        self._proposed: SelectedTree | None = None

    def config(self) -> dict[str, Any]:
        """The hyperparameters; `acceptance_prior` (when one was asked for) names the prior that ran."""
        out = self.cfg.as_dict()
        if "acceptance_prior" in out:
            out["acceptance_prior"] = self.acceptance.prior_name
        return out

    # The learnt rates outlive a prompt and are checkpointed by the runner.
    carries_run_state = True

    def run_state(self) -> Any:
        return copy.deepcopy(self.acceptance)

    def restore_run_state(self, state: Any) -> None:
        self.acceptance = copy.deepcopy(state)
        self._rates = None

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Fresh adjacency table (prefill harvest if on) and context pool; the learnt rates stay."""
        super().begin(prompt_ids, prefill_logits)
        self.matcher.reset()
        self.matcher.append(prompt_ids)
        self._proposed = None

    def rate(self, source: int, depth: int, rank: int) -> float:
        if self._rates is None:
            table = self.acceptance.rate_table()
            self._rates = {s: table[s].tolist() for s in (SPINE, BRANCH)}
        return self._rates[source][min(depth, MAX_DEPTH_BUCKET)][min(rank, MAX_RANK_BUCKET)]

    def spine_chain(self) -> list[int]:
        found = self.matcher.match()
        chain = list(found.chain)
        if chain and self.extend_chain:
            c = match_confidence(len(chain), found.consensus, self.long_match)
            if c > self.chain_extension_threshold:
                limit = extension_limit(c, self.max_extended_chain)
                chain = self.matcher.extend_chain(chain, limit, require_consensus=c >= 1.0)
        return chain

    def candidates(self, tree: DraftTree, node: int) -> list[Candidate]:
        """Goose's candidates under `node`: the next spine token, then adjacency successors (skipping it);
        rank = position in this list.
        """
        source, depth = tree.sources[node], tree.depths[node]
        if source == BRANCH and depth >= self.max_depth:
            return []
        out: list[Candidate] = []
        spine_next = None
        if source in (ROOT, SPINE) and depth < len(self._chain):
            spine_next = self._chain[depth]  # spine node at depth d holds chain[d - 1]
            out.append(Candidate(spine_next, SPINE, 0, self.rate(SPINE, depth + 1, 0)))
        prev = self._prev_anchor if node == 0 else tree.tokens[tree.parents[node]]
        ids, _ = self.successors(tree.tokens[node], prev)
        for token in ids:
            if token == spine_next:
                continue
            rank = len(out)
            out.append(Candidate(int(token), BRANCH, rank, self.rate(BRANCH, depth + 1, rank)))
        return out

    def propose(self, committed: list[int]) -> DraftTree:
        if self.table is None:
            raise RuntimeError("OptTreeDrafter.begin() must be called before propose()")
        self.matcher.sync(committed)
        anchor = int(committed[-1])
        self._prev_anchor = prev_of_anchor(committed)
        self._chain = self.spine_chain()
        selected = select_best_first(anchor, self.candidates, self.budget)
        tree = selected.tree
        if len(tree) < 2:
            self._proposed = None
            route = "ar"
        else:
            self._proposed = selected
            spine, branch = SPINE in tree.sources, BRANCH in tree.sources
            route = "spine_tree" if spine and branch else "chain" if spine else "branch_tree"
        self.route = route
        self.count(f"route_{route}")
        return tree

    def verified_nodes(self, tree: DraftTree) -> list[int] | None:
        """Indices in the proposed tree of the verified tree's nodes (a budget=auto prefix and/or a depth cut
        of it), or None if it is neither.
        """
        if self._proposed is None:
            return None
        proposed = self._proposed.tree
        top = max(tree.depths)
        nodes = [i for i, d in enumerate(proposed.depths) if d <= top][: len(tree)]
        if len(nodes) != len(tree) or [proposed.tokens[i] for i in nodes] != tree.tokens:
            return None
        return nodes

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        super().observe(tree, outcome)
        count_tree_shape(self, tree)
        nodes = self.verified_nodes(tree) if len(tree) > 1 else None
        if nodes is None:
            return
        proposed = self._proposed
        assert proposed is not None
        drafted = nodes[1:]
        keys = AcceptanceModel.bucket_keys(
            [proposed.tree.sources[i] for i in drafted],
            [proposed.tree.depths[i] for i in drafted],
            [proposed.ranks[i] for i in drafted],
        )
        self.acceptance.update(tree, keys, outcome.accepted_nodes)
        self._rates = None
        expected = sum(proposed.values[i] for i in drafted)
        self.stats["opt_expected_accepted"] = self.stats.get("opt_expected_accepted", 0.0) + expected
        self._proposed = None
