"""OPT-Tree (Wang et al., arXiv 2406.17276) over Goose's own candidate pool: the E(A)-maximising tree.

OPT-Tree gives each candidate node the estimated probability that its whole path is accepted and
keeps the B nodes with the largest values. The expected accepted length of a tree is

    E(A) = Σ_{v in tree, v ≠ anchor} P(path to v accepted),

and since a child's value never exceeds its parent's, the B most valuable candidates form a
tree: that tree maximises E(A) among all trees of B nodes drawn from the candidate pool. Goose
instead *prescribes* an anisotropic shape (spine ratio, ρ, harmonic split); `method=opt_tree`
builds the E(A)-optimal tree over exactly the candidates Goose draws from, so the two differ only
in how the budget is allocated.

Candidate pool (Goose's, SPEC "Goose" steps 1, 3, 5, 6):
  - spine: the context matcher's continuation (`goose.sources.context_matcher`, n-grams (5, 4, 3),
    up to max_chain tokens), extended by repeated matching as Goose does when the match
    confidence c > chain_extension_threshold (up to int(max_extended_chain * c) tokens; with
    `extend_chain`); one chain under the anchor, nodes labelled SPINE;
  - branches: the adjacency table's successors (`goose.sources.adjacency`: top-K per token, bigram
    tier first, prefill harvest, fresh per prompt, updated from every verified node; successors
    below min_score never drafted), labelled BRANCH: under the anchor and under every spine node
    (skipping the next spine token), and under every branch node shallower than D.

Node value. v(node) = Π over the path anchor -> node of r(source, depth, rank), r = P(node
accepted | parent accepted), learnt online by `goose.engine.budget.auto_budget.AcceptanceModel`, the
learner budget=auto uses: Beta-smoothed counts per (source, depth capped at 16, sibling rank
capped at 8), updated from every verified tree (a node whose parent is on the accepted path was
"reached"; it was accepted if it is on the path), halved past 256 reached nodes per cell. Counts
persist across the prompts of a run (one drafter per cell), like budget=auto's.
Priors before any observation (the learner's own): r = spine_prior = 0.6 for SPINE nodes at any
depth and rank, r = branch_prior / (rank + 1) = 0.35 / (rank + 1) for BRANCH nodes, each worth
prior_strength = 2 pseudo-observations. So the first tree of a run has spine values 0.6^d,
root alternatives 0.175, 0.117, ... and their children 0.35 times that: at B = 60 a spine of
about 8 (0.6^8 ≈ 0.017) among wide, shallow branches, until the data take over. `run_state()`
is the learner (the runner checkpoints it after each prompt).

Selection (best first). A max-heap of frontier candidates keyed by (value desc, depth asc, the
parent's position in the tree asc, rank asc): pop the best, append it to the tree, then push its
own best child and the next-best sibling it was chosen over. A child enters the heap only after
its parent is in the tree, so a child never outranks its parent even when they tie (a rate of
1.0); a tie between nodes of different depths goes to the shallower one. Each step costs
O(B (K + log B)) (one adjacency lookup and a sort of <= K + 1 candidates per kept node, <= 2
heap pushes per pop) and reads no history: the matcher and the table update incrementally and the
rate table has a fixed size. The tree comes out in pop order, so every prefix of it is the best
tree of that size: budget=auto (`goose.engine.budget.auto_budget`), which keeps a prefix, cuts it
correctly.

Design decisions where the OPT-Tree paper is silent or does not apply (no draft model here):
  - r replaces the draft model's softmax: training-free sources have no calibrated probability,
    so acceptance is measured per (source, depth, rank); the adjacency score only filters
    (min_score) and orders siblings, which is what `rank` captures (BEYOND.md §3).
  - rank = position among the parent's candidates: the spine child first (rank 0), then the
    adjacency successors by descending score, skipping the spine token. This is Goose's insertion
    order, so on a full Goose tree the keys are the ones budget=auto's learner uses.
  - OPT-Tree's layer-wise beam (top-n per layer, stop when E(A) grows by <= δ) only decides when
    to stop running the draft model; drafting here is free, so δ = 0 and the best-first heap
    returns the same top-B set without materialising n x n candidates per layer.
  - D bounds branch expansion as in Goose (branch nodes at depth >= D get no children), not
    OPT-Tree's max_depth = 10 on the whole tree: the spine may be deeper (its length bounds it).
  - B is fixed (no Goose B_eff): the method's question is the allocation of a given budget.
  - The learner is updated from the tree actually verified (a budget=auto prefix and/or the
    engine's depth cut near the end of the window or of max_new_tokens), mapped back to the
    proposed nodes.

Routes: "spine_tree" (spine and branches), "chain" (spine only), "branch_tree" (branches only),
"ar" (no candidate). stats (per prompt): route_<route>; shape_* (spine depth and branch placement
of the verified trees, `goose.method.tree_shape`); opt_expected_accepted, the summed E(A) the
verified trees were predicted to accept (compare with the row's accepted counts).
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from baselines.isotropic import AdjacencyDrafter, prev_of_anchor
from goose.engine.budget.auto_budget import MAX_DEPTH_BUCKET, MAX_RANK_BUCKET, AcceptanceModel
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.method.confidence import extension_limit, match_confidence
from goose.method.tree_shape import count_tree_shape
from goose.sources.context_matcher import ContextMatcher
from goose.validation import check_bool, check_float, check_hyperparameters, check_int, is_number


@dataclass(frozen=True)
class Candidate:
    """A possible child of a tree node.

    token   its token id (distinct among one node's candidates)
    source  SPINE or BRANCH
    rank    position among the node's candidates (spine child first, then adjacency order)
    rate    r, estimated P(accepted | parent accepted), in [0, 1]
    """

    token: int
    source: int
    rank: int
    rate: float


# children(tree, node) -> the candidates of tree node `node`; called once per node, when it enters
# the tree (the tree holds the node's path, so the callback can read its tokens).
ChildrenFn = Callable[[DraftTree, int], Sequence[Candidate]]


@dataclass
class SelectedTree:
    """The best-first tree and, per node, its path value and candidate rank (node 0: 1.0, 0)."""

    tree: DraftTree
    values: list[float]
    ranks: list[int]

    @property
    def expected_accepted(self) -> float:
        """E(A): the summed path values of the drafted nodes."""
        return sum(self.values[1:])


def select_best_first(anchor: int, children: ChildrenFn, budget: int) -> SelectedTree:
    """The `budget` (anchor included) most valuable nodes of the candidate tree that `children`
    spans from `anchor`, in best-first order (see the module docstring): value = product of the
    rates along the path; ties go to the shallower node, then to the node whose parent entered
    the tree first, then to the lower rank. Every prefix of the result is the best tree of its size.
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
    """OPT-Tree's E(A)-maximising tree of B nodes over Goose's spine and branch candidates.

    budget                     B, nodes of the tree, anchor included
    max_depth                  D, branch nodes at depth >= D get no children
    k                          K, adjacency top-k per token
    min_score                  adjacency successors scoring below this are never drafted
    max_chain                  longest continuation of one context match
    ngram_lengths              n-gram lengths of the context matcher, longest first
    extend_chain               extend confident chains by repeated matching, as Goose does
    max_extended_chain         a chain of confidence c is extended to int(max_extended_chain * c)
    long_match                 chain length from which a match counts as long (c >= 0.7)
    chain_extension_threshold  chains are extended when c > this
    use_bigram                 consult the (previous token, token) adjacency tier first
    prefill_harvest            seed the adjacency table from the prefill logits
    prior_strength             pseudo-observations of the acceptance-rate prior
    spine_prior                prior r of a spine node
    branch_prior               prior r of a branch node of rank 0 (rank j: branch_prior / (j + 1))
    """

    def __init__(
        self,
        budget: int = 60,
        max_depth: int = 6,
        k: int = 10,
        min_score: float = 0.01,
        max_chain: int = 20,
        ngram_lengths: Sequence[int] = (5, 4, 3),
        extend_chain: bool = True,
        max_extended_chain: int = 100,
        long_match: int = 8,
        chain_extension_threshold: float = 0.6,
        use_bigram: bool = True,
        prefill_harvest: bool = True,
        prior_strength: float = 2.0,
        spine_prior: float = 0.6,
        branch_prior: float = 0.35,
    ) -> None:
        owner = type(self).__name__
        check_hyperparameters(
            owner,
            budget=budget,
            max_depth=max_depth,
            max_chain=max_chain,
            ngram_lengths=ngram_lengths,
            long_match=long_match,
            chain_extension_threshold=chain_extension_threshold,
        )
        check_bool(f"{owner}.extend_chain", extend_chain)
        check_int(f"{owner}.max_extended_chain", max_extended_chain, low=max_chain, why="at least max_chain")
        if not (is_number(prior_strength) and prior_strength > 0):
            raise ValueError(
                f"{owner}.prior_strength = {prior_strength!r}: must be a number > 0 (pseudo-observations of the prior)"
            )
        check_float(f"{owner}.spine_prior", spine_prior, 0.0, 1.0, why="a prior acceptance rate")
        check_float(f"{owner}.branch_prior", branch_prior, 0.0, 1.0, why="a prior acceptance rate")
        super().__init__("opt_tree", k, min_score, use_bigram, prefill_harvest)
        self.budget = budget
        self.max_depth = max_depth
        self.max_chain = max_chain
        self.ngram_lengths = tuple(int(n) for n in ngram_lengths)
        self.extend_chain = extend_chain
        self.max_extended_chain = max_extended_chain
        self.long_match = long_match
        self.chain_extension_threshold = chain_extension_threshold
        self.prior_strength = float(prior_strength)
        self.spine_prior = float(spine_prior)
        self.branch_prior = float(branch_prior)
        self.matcher = ContextMatcher(self.ngram_lengths, max_chain)
        self.acceptance = AcceptanceModel(self.prior_strength, self.spine_prior, self.branch_prior)
        self._rates: dict[int, list[list[float]]] | None = None  # source -> [depth][rank], cached
        self._chain: list[int] = []
        self._proposed: SelectedTree | None = None

    def config(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "max_depth": self.max_depth,
            "k": self.k,
            "min_score": self.min_score,
            "max_chain": self.max_chain,
            "ngram_lengths": list(self.ngram_lengths),
            "extend_chain": self.extend_chain,
            "max_extended_chain": self.max_extended_chain,
            "long_match": self.long_match,
            "chain_extension_threshold": self.chain_extension_threshold,
            "use_bigram": self.use_bigram,
            "prefill_harvest": self.prefill_harvest,
            "prior_strength": self.prior_strength,
            "spine_prior": self.spine_prior,
            "branch_prior": self.branch_prior,
        }

    # ---------------------------------------------------------------- state across prompts
    # The learnt rates outlive a prompt (the adjacency table and the context pool do not), so the
    # runner checkpoints them after every prompt and a resumed cell restores them.
    carries_run_state = True

    def run_state(self) -> Any:
        return copy.deepcopy(self.acceptance)

    def restore_run_state(self, state: Any) -> None:
        self.acceptance = copy.deepcopy(state)
        self._rates = None

    # ---------------------------------------------------------------- per prompt
    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Fresh adjacency table (prefill harvest if on) and context pool; the learnt rates stay."""
        super().begin(prompt_ids, prefill_logits)
        self.matcher.reset()
        self.matcher.append(prompt_ids)
        self._proposed = None

    # ---------------------------------------------------------------- per cycle
    def rate(self, source: int, depth: int, rank: int) -> float:
        """r(source, depth, rank) from the learner (cached until its next update)."""
        if self._rates is None:
            table = self.acceptance.rate_table()
            self._rates = {s: table[s].tolist() for s in (SPINE, BRANCH)}
        return self._rates[source][min(depth, MAX_DEPTH_BUCKET)][min(rank, MAX_RANK_BUCKET)]

    def spine_chain(self) -> list[int]:
        """The context match's continuation, extended as Goose extends it when confident."""
        found = self.matcher.match()
        chain = list(found.chain)
        if chain and self.extend_chain:
            c = match_confidence(len(chain), found.consensus, self.long_match)
            if c > self.chain_extension_threshold:
                limit = extension_limit(c, self.max_extended_chain)
                chain = self.matcher.extend_chain(chain, limit, require_consensus=c >= 1.0)
        return chain

    def candidates(self, tree: DraftTree, node: int) -> list[Candidate]:
        """Goose's candidates under `node`: the next spine token (anchor and spine nodes), then the
        adjacency successors (anchor, spine nodes, branch nodes shallower than D), skipping the
        spine token; rank = position in this list."""
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
        """Indices in the proposed tree of the verified tree's nodes, or None if it is not the
        proposed tree, a prefix of it (budget=auto), or its depth cut (the engine's
        `truncate_depth`), or both: the nodes of depth <= the verified tree's depth, in order,
        cut to its length."""
        if self._proposed is None:
            return None
        proposed = self._proposed.tree
        top = max(tree.depths)
        nodes = [i for i, d in enumerate(proposed.depths) if d <= top][: len(tree)]
        if len(nodes) != len(tree) or [proposed.tokens[i] for i in nodes] != tree.tokens:
            return None
        return nodes

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """Adjacency update from every node; the verified nodes' acceptance updates the rates."""
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
