"""Hardware-aware tree (`hw_tree`): Sequoia's size-b optimal tree and hardware-aware size (Chen et al., arXiv
2402.12374, §3.1 and §3.3) over every training-free source of this harness, composed rather than copied:

- the context matcher's chain (Goose's spine, extended as Goose §4.3 extends it; PLD's chain),
- the same n-gram's other occurrences in the context (`alt_matches` of them, newest first),
- SuffixDecoding's frequency tree (arXiv 2411.04975; baselines.suffix, used as a source),
- the adjacency table's successors under every node (Goose's branches), and, for a token that has no row yet
  in this prompt, the row an earlier prompt wrote (TR keeps its table for the whole run; `run_table`).

They are merged into one candidate trie (baselines.hw_tree.pool); each edge gets r = P(accepted | parent
accepted) from an online, calibrated estimator keyed by (source mask, depth, source confidence)
(baselines.hw_tree.acceptance), learnt in hindsight over the whole pool: every pool node whose parent lies
on the tokens committed since is labelled by whether it equals the committed token there (what
sample-and-match verification accepts), so nodes past the verified cut teach as much as verified ones and
the estimates carry no selection bias toward the sizes verified so far; a best-first heap orders the pool
so that each prefix of b nodes is the subtree of size b with the largest E[accepted]; with a latency curve
(budget=auto hands it over through `use_latency`) the verified b maximises E[committed | b] / t(b), else
b = `budget`. The adjacency table is filled only from the logits of the nodes verified, so a node whose token
has no row yet is worth more than its P(path accepted): it is ranked and sized with g more, g the tokens
accepted later per row that only a rejected node wrote, learnt online (baselines.hw_tree.acceptance.RowValue;
`row_value`). With `request_scale` (off by default) the size rule weighs the run-level estimates by c, this
request's accepted over predicted drafted nodes (baselines.hw_tree.request_scale). Goose's own rules are
untouched (`method=goose`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from baselines.hw_tree.acceptance import (
    AcceptanceEstimator,
    Calibration,
    RowValue,
    SizeOutcomes,
    node_cell,
    source_priors,
)
from baselines.hw_tree.config import HwTreeConfig
from baselines.hw_tree.pool import (
    ADJ,
    ALT,
    CONF_BINS,
    CTX,
    RUN,
    SOURCE_BITS,
    SUF,
    TABLE_BITS,
    CandidatePool,
    Selection,
    best_size,
    conf_bin,
    occurrence_bins,
    scaled,
    select_best_first,
)
from baselines.hw_tree.request_scale import RequestScale
from baselines.shared.adjacency_drafter import AdjacencyDrafter, prev_of_anchor
from baselines.suffix import SuffixDecodingDrafter
from goose.engine.core.acceptance_prior import load_prior
from goose.engine.core.drafter import VerifyOutcome
from goose.engine.core.tree import BRANCH, ROOT, SPINE, DraftTree
from goose.method.confidence import extension_limit, match_confidence
from goose.sources.adjacency import AdjacencyTable
from goose.sources.context_matcher import ContextMatch, ContextMatcher

CONTEXT_BITS = (
    (1 << CTX) | (1 << ALT) | (1 << SUF)
)  # nodes labelled SPINE (context-derived); ADJ-only: BRANCH


class HwTreeDrafter(AdjacencyDrafter):
    """The hardware-aware tree over every source; keyword arguments are `HwTreeConfig`'s fields.

    stats per prompt: hw_steps, hw_pool_nodes (selected before sizing), hw_verified_nodes (anchors included),
    hw_expected_accepted (Σ predicted P(accepted) of verified nodes), hw_src_offered / hw_src_accepted
    (verified / accepted nodes per source bit: ctx, alt, suf, adj), hw_calib_nodes / _accepted / _predicted
    (per tenth of predicted P(path accepted)), hw_size_* (the size rule's decisions against their
    outcomes per bucket of the verified size, greedy only: SizeOutcomes; their predictions weighed by c),
    hw_scale_sum (Σ over steps of the request's calibration c the size rule used: RequestScale),
    route_<route>.
    """

    config_class = HwTreeConfig
    sizes_itself = True  # budget=auto: b chosen against t(n) (`use_latency`), never cut after

    def __init__(self, **hyperparameters: Any) -> None:
        super().__init__("hw_tree", HwTreeConfig(**hyperparameters))
        cfg: HwTreeConfig = self.cfg  # type: ignore[assignment]
        self.matcher = ContextMatcher(cfg.ngram_lengths, cfg.max_chain)
        self.suffix_source = (
            SuffixDecodingDrafter(
                mode="tree",
                max_depth=cfg.suffix_max_depth,
                min_token_prob=cfg.suffix_min_token_prob,
                name="hw_tree_suffix",
            )
            if cfg.suffix
            else None
        )
        prior = source_priors(cfg.ctx_prior, cfg.alt_prior, cfg.suf_prior, cfg.adj_prior, cfg.run_prior)
        calibrated = load_prior(cfg.acceptance_prior, "hw_tree", self.name)
        self.estimator = AcceptanceEstimator(prior, cfg.prior_strength, cfg.decay, cfg.chain_gain, calibrated)
        self.row_value_model = RowValue(cfg.row_prior, cfg.row_prior_rows, cfg.decay)
        self.scale_model = RequestScale(cfg.scale_prior_nodes, cfg.scale_decay)
        self._row_gain = 0.0
        # tokens whose row only a rejected node wrote (this prompt), and the pool nodes drafted from such rows
        self._explored: set[int] = set()
        self._from_explored: set[int] = set()
        self._latency: Callable[[int], float] | None = None
        # the rows of the run's finished prompts (run_table), consulted for a token without a row this prompt
        self.run_rows: AdjacencyTable | None = None
        self._calib = Calibration()
        self._sizes = SizeOutcomes()
        self.last_pool: CandidatePool | None = None
        self.last_selection: Selection | None = None
        self._verified = 0  # nodes of the last selection that were proposed
        # pools still being labelled in hindsight: [pool, anchor's place in the tokens, deepest node on them]
        self._pending: list[list[Any]] = []
        # True: select up to B nodes even where the latency shows they cannot pay (for recording pools)
        self.full_pool = False

    def config(self) -> dict[str, Any]:
        """The hyperparameters; `acceptance_prior` (when one was asked for) names the prior that ran."""
        out = self.cfg.as_dict()
        if "acceptance_prior" in out:
            out["acceptance_prior"] = self.estimator.prior_name
        return out

    def use_latency(self, latency: Callable[[int], float]) -> None:
        """budget=auto: size each tree with this latency (seconds of a step of n nodes), never cut after."""
        self._latency = latency

    # The learnt rates and the run's table outlive a prompt and are checkpointed by the runner.
    carries_run_state = True

    def run_state(self) -> Any:
        return {
            "rates": self.estimator.state(),
            "rows": self.row_value_model.state(),
            "run_table": copy.deepcopy(self.run_rows),
        }

    def restore_run_state(self, state: Any) -> None:
        self.estimator.restore(state["rates"])
        self.row_value_model.restore(state["rows"])
        self.run_rows = copy.deepcopy(state.get("run_table"))

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Fresh adjacency table, context pool and suffix tree; the learnt rates stay."""
        super().begin(prompt_ids, prefill_logits)
        self.matcher.reset()
        self.matcher.append(prompt_ids)
        if self.suffix_source is not None:
            self.suffix_source.begin(prompt_ids, prefill_logits)
        self._calib = Calibration()
        self._sizes = SizeOutcomes()
        self.scale_model.begin()
        width = len(SOURCE_BITS)
        self.stats.update({"hw_src_offered": [0] * width, "hw_src_accepted": [0] * width})
        self.stats.update(self._calib.as_stats())
        self.stats.update(self._sizes.as_stats())
        self.last_pool = self.last_selection = None
        self._pending = []
        self._explored = set()

    # ------------------------------------------------------------------ the candidate pool
    def _context_chain(self, found: ContextMatch) -> list[int]:
        chain = list(found.chain)
        if chain and self.extend_chain:
            c = match_confidence(len(chain), found.consensus, self.long_match)
            if c > self.chain_extension_threshold:
                limit = extension_limit(c, self.max_extended_chain)
                chain = self.matcher.extend_chain(chain, limit, require_consensus=c >= 1.0)
        return chain

    def _add_context(self, pool: CandidatePool) -> None:
        found = self.matcher.match()
        if not found.chain:
            return
        chain = self._context_chain(found)
        pool.add_path(0, chain, CTX, [min(found.n, CONF_BINS) - 1] * len(chain), lazy=True)
        if not self.alt_matches:
            return
        tokens, n = self.matcher.tokens, found.n
        starts = self.matcher.occurrences(tokens[len(tokens) - n :])
        others = [s for s in reversed(starts) if s != found.start][: self.alt_matches]
        conts = [tokens[s + n : s + n + self.alt_chain] for s in others]
        conts = [c for c in conts if c]
        for cont, bins in zip(conts, occurrence_bins(chain[: self.alt_chain], conts), strict=True):
            pool.add_path(0, cont, ALT, bins, lazy=True)

    def _add_suffix(self, pool: CandidatePool, committed: list[int]) -> None:
        if self.suffix_source is None:
            return
        draft, _ = self.suffix_source.speculate(committed)
        probs = draft.probs
        bins = [
            conf_bin(p / (probs[q] if q >= 0 else 1.0)) for p, q in zip(probs, draft.parents, strict=True)
        ]
        pool.add_tree(draft.tokens, draft.parents, SUF, bins)

    def _expand(self, pool: CandidatePool, node: int) -> None:
        """Adjacency successors under `node` (lazily, when it enters the tree): this prompt's row, else the
        run's (`run_table`); nodes only a table proposed get none at depth D."""
        if not self.adj_width or (
            pool.masks[node] & ~TABLE_BITS == 0 and pool.depths[node] >= self.max_depth
        ):
            return
        prev = self._prev_anchor if node == 0 else pool.tokens[pool.parents[node]]
        token = pool.tokens[node]
        ids, scores, source = self.adjacency_row(token, prev)
        explored = source == ADJ and token in self._explored
        for successor, score in zip(ids[: self.adj_width], scores[: self.adj_width], strict=True):
            child = pool.add(node, successor, source, conf_bin(score))
            if explored and pool.masks[child] == 1 << ADJ:
                self._from_explored.add(child)

    def adjacency_row(self, token: int, prev: int | None) -> tuple[list[int], list[float], int]:
        """The row `token`'s adjacency children are drafted from, with its source bit: this prompt's (ADJ),
        else, for a token without one, the run's (RUN, `run_table`)."""
        assert self.table is not None, "begin() must be called before propose()"
        if self.run_rows is not None and not self.table.has_row(token):
            ids, scores = self.run_rows.successors(token, None, self.min_score)
            return ids, scores, RUN
        ids, scores = self.successors(token, prev)
        return ids, scores, ADJ

    def _gain(self, pool: CandidatePool, node: int) -> float:
        """A node whose token has no table row is worth the learnt value of a row (RowValue) past its step."""
        assert self.table is not None
        return 0.0 if self.table.has_row(pool.tokens[node]) else self._row_gain

    def _rate(self, pool: CandidatePool, node: int) -> float:
        return self.estimator.rate(node_cell(pool, node))

    def propose(self, committed: list[int]) -> DraftTree:
        if self.table is None:
            raise RuntimeError("HwTreeDrafter.begin() must be called before propose()")
        self.matcher.sync(committed)
        anchor = int(committed[-1])
        self._prev_anchor = prev_of_anchor(committed)
        pool = CandidatePool.rooted(anchor)
        self._add_context(pool)
        self._add_suffix(pool, committed)
        self._from_explored = set()
        self._row_gain = self.row_value_model.gain() if self.row_value else 0.0
        stop_early = None if self.full_pool else self._latency
        gain = self._gain if self.row_value else None
        scale = self.scale_model.scale() if self.request_scale else 1.0
        sel = select_best_first(
            pool, self._rate, self.budget, self._expand, stop_early, gain, self._row_gain, scale
        )
        if self._latency is None or len(sel) == 1:
            b = len(sel)
        else:
            b = best_size(sel.expected_committed(), self._latency)
        self.last_pool, self.last_selection, self._verified = pool, sel, b
        self._pending.append([pool, len(committed) - 1, 0])
        tree = DraftTree(
            [pool.tokens[i] for i in sel.order[:b]],
            list(sel.parents[:b]),
            [ROOT, *(SPINE if pool.masks[i] & CONTEXT_BITS else BRANCH for i in sel.order[1:b])],
        )
        self.route = "ar" if b < 2 else "chain" if max(tree.depths) == b - 1 else "tree"
        self.count("hw_steps")
        self.count("hw_pool_nodes", len(sel))
        self.stats["hw_scale_sum"] = self.stats.get("hw_scale_sum", 0.0) + scale
        self.count(f"route_{self.route}")
        return tree

    @property
    def kept_anchor_alone(self) -> bool:
        """The last proposal kept the anchor alone (no candidate, or none worth verifying): the anchor's row
        is learnt from later drafted trees' nodes, so the step may be a plain one."""
        return self._verified == 1

    # ------------------------------------------------------------------ learning
    def _proposed_index(self, tree: DraftTree) -> list[int] | None:
        """Per verified node its place in the selection (the engine may cut the tree's depth), or None."""
        sel, pool = self.last_selection, self.last_pool
        if sel is None or pool is None:
            return None
        top = max(tree.depths)
        places = [j for j in range(self._verified) if pool.depths[sel.order[j]] <= top][: len(tree)]
        if len(places) != len(tree) or any(
            pool.tokens[sel.order[j]] != t for j, t in zip(places, tree.tokens, strict=True)
        ):
            return None
        return places

    def _label_in_hindsight(self, tokens: list[int]) -> tuple[list[int], list[bool], list[bool]]:
        """Per pending pool, walk the committed `tokens` down from its anchor: every child of a node on them
        is reached, and accepted iff it is the next committed token. A pool leaves once it falls off them
        (or has no deeper node); the others wait for more tokens."""
        cells: list[int] = []
        hits: list[bool] = []
        keep = []
        for entry in self._pending:
            pool, at, node = entry
            alive = True
            while at + pool.depths[node] + 1 < len(tokens):
                kids = pool.children(node)
                if not kids:
                    alive = False
                    break
                nxt = tokens[at + pool.depths[node] + 1]
                for token, child in kids.items():
                    cells.append(node_cell(pool, child))
                    hits.append(token == nxt)
                node = kids.get(nxt, -1)
                if node < 0:
                    alive = False
                    break
            if alive and pool.children(node):
                entry[2] = node
                keep.append(entry)
        self._pending = keep
        return cells, [True] * len(cells), hits

    def _learn_row_value(self, tree: DraftTree, outcome: VerifyOutcome, places: list[int] | None) -> None:
        """Before the table takes this step's logits: rows only rejected nodes write join `_explored`, an
        accepted node's token leaves it (its row would exist anyway), and accepted nodes drafted from an
        explored row are that row's credit."""
        assert self.table is not None
        accepted_tokens = {tree.tokens[i] for i in outcome.accepted_nodes}
        new_rows = {t for t in tree.tokens if not self.table.has_row(t)} - accepted_tokens
        self._explored = (self._explored - accepted_tokens) | new_rows
        credit = 0
        if places is not None and self.last_selection is not None:
            order = self.last_selection.order
            credit = sum(1 for i in outcome.accepted_nodes if order[places[i]] in self._from_explored)
        self.row_value_model.update(len(new_rows), credit)
        self.count("hw_rows_explored", len(new_rows))
        self.count("hw_rows_credit", credit)

    def _count_size_outcome(self, tree: DraftTree, outcome: VerifyOutcome, places: list[int] | None) -> None:
        """SizeOutcomes of this step, greedy only (a smaller prefix's walk is read off the greedy outcome)."""
        if self.sampling.temperature != 0:
            return
        if len(tree) == 1:
            values, gains = [1.0], [0.0]
        elif places is not None and self.last_selection is not None:
            c = self.last_selection.scale
            values = [1.0, *(scaled(self.last_selection.values[j], c) for j in places[1:])]
            gains = [self.last_selection.gains[j] for j in places]
        else:
            return
        self._sizes.add(values, gains, list(outcome.accepted_nodes), self._latency)

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: the anchor's logits into the table (only with `learn_logits`), its tokens
        into the suffix source, and the pending pools labelled by them (as after a drafted step; no size
        outcome is counted)."""
        super().observe_plain(committed, outcome, learn_logits)
        if self.suffix_source is not None:
            self.suffix_source.observe_plain(committed, outcome)
        self.estimator.update(*self._label_in_hindsight([*committed, *outcome.new_tokens]))

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        places = self._proposed_index(tree) if len(tree) > 1 else None
        self._learn_row_value(tree, outcome, places)
        super().observe(tree, outcome)  # adjacency table from every node's logits
        if self.suffix_source is not None:
            self.suffix_source.observe(tree, outcome)  # the committed tokens into the suffix tree
        self.count("hw_verified_nodes", len(tree))
        self.estimator.update(*self._label_in_hindsight([*self.matcher.tokens, *outcome.new_tokens]))
        self._count_size_outcome(tree, outcome, places)
        if places is None:
            return
        sel, pool = self.last_selection, self.last_pool
        assert sel is not None and pool is not None
        accepted = {places[i] for i in outcome.accepted_nodes}
        offered, taken = self.stats["hw_src_offered"], self.stats["hw_src_accepted"]
        expected = 0.0
        for j in places[1:]:
            mask, ok = pool.masks[sel.order[j]], j in accepted
            self._calib.add(sel.values[j], ok)
            expected += sel.values[j]
            for s in range(len(SOURCE_BITS)):
                if mask >> s & 1:
                    offered[s] += 1
                    taken[s] += int(ok)
        self.stats["hw_expected_accepted"] = self.stats.get("hw_expected_accepted", 0.0) + expected
        self.scale_model.observe(expected, len(accepted) - 1)

    def end(self) -> None:
        """The prompt's calibration and size-outcome counts into its stats (once, not every step); its
        table's rows into the run's (`run_table`)."""
        super().end()
        self.stats.update(self._calib.as_stats())
        self.stats.update(self._sizes.as_stats())
        if self.run_table and self.table is not None:
            t = self.table
            if self.run_rows is None or self.run_rows.vocab_size != t.vocab_size:
                self.run_rows = AdjacencyTable(t.vocab_size, t.k, use_scores=True)
            self.run_rows.absorb(t)
