"""GooseDrafter: routing per cycle and the bookkeeping between cycles (Goose §4, Algorithm 2, docs/paper.md).

Per cycle: if the anchor has adjacency successors, a tree ("spine_tree" with a context chain, else
"branch_tree"; fewer than 2 nodes fall back to "ar"); else a chain ("chain"); else "ar". After verification
every node's logits update the adjacency table, and a spine tree updates the EMA a and the
spine-continuation counters. `compat="authors"` follows the official code (goose.method.compat).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import BRANCH, SPINE, DraftTree
from goose.method.compat import CompatRules, rules_for
from goose.method.confidence import SpineAcceptanceEMA, spine_ratio
from goose.method.config import GooseConfig
from goose.method.spine_tree import build_spine_tree
from goose.method.tree_shape import count_tree_shape
from goose.sources.adjacency import AdjacencyTable
from goose.sources.context_matcher import ContextMatch, ContextMatcher

ROUTES = ("spine_tree", "branch_tree", "chain", "ar")
TREE_ROUTES = ("spine_tree", "branch_tree")


class GooseDrafter(Drafter):
    """Goose: anisotropic spine trees from a context matcher (spine) and an adjacency table (branches).
    Keyword arguments are `GooseConfig`'s fields, so Hydra instantiates it from conf/method/goose.yaml.

    stats per prompt: route_<route>; chain_extensions and _tokens; b_eff_sum; tree_fallback_ar;
    spine_continuations and spine_continuation_tokens (cycles whose path left the spine through a branch,
    and the branch tokens accepted); shape_* (goose.method.tree_shape).
    """

    config_class = GooseConfig
    name = "goose"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=self.name if name is None else name)
        self.cfg = GooseConfig(**hyperparameters)
        self.rules: CompatRules = rules_for(self.cfg.compat)
        self.matcher = ContextMatcher(self.cfg.ngram_lengths, self.cfg.max_chain)
        self.ema = SpineAcceptanceEMA(self.cfg.ema_alpha, self.cfg.ema_init)
        self.table: AdjacencyTable | None = None
        self.confidence = 0.0  # c of the current cycle (0 off the tree-with-chain route)
        self.b_eff = self.cfg.budget  # B_eff of the current cycle's tree
        self._prev_anchor: int | None = None

    @classmethod
    def from_config(cls, cfg: GooseConfig, name: str | None = None) -> GooseDrafter:
        return cls(name=name, **{f: getattr(cfg, f) for f in GooseConfig.field_names()})

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    @property
    def needs_prefill_logits(self) -> bool:  # type: ignore[override]
        return self.cfg.prefill_harvest

    @property
    def logits_topk(self) -> int:  # type: ignore[override]
        """The table's K: the engine hands every verified node's top-K over (`VerifyOutcome.top`)."""
        return self.cfg.k

    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        return self.cfg.persistent_table

    @property
    def verifies_full_tree(self) -> bool:  # type: ignore[override]
        return not self.rules.cut_to_budget

    def run_state(self) -> Any:
        return copy.deepcopy(self.table) if self.cfg.persistent_table else None

    def restore_run_state(self, state: Any) -> None:
        if self.cfg.persistent_table:
            self.table = copy.deepcopy(state)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Fresh adjacency table (kept with `persistent_table`), context pool = the prompt, a = a_0."""
        super().begin(prompt_ids, prefill_logits)
        vocab = int(prefill_logits.shape[-1])
        half = self.rules.fp16_unigram_scores
        if self.table is None or self.table.vocab_size != vocab or self.table.half_unigram_scores != half:
            self.table = AdjacencyTable(
                vocab, self.cfg.k, use_scores=True, use_bigram=self.cfg.use_bigram, half_unigram_scores=half
            )
        elif not self.cfg.persistent_table:
            self.table.reset()
        if self.cfg.prefill_harvest:
            self.table.update_from_prefill(prompt_ids, prefill_logits)
        self.matcher.reset()
        self.matcher.append(prompt_ids)
        self.ema.reset()
        self.confidence = 0.0
        self._prev_anchor = None

    def propose(self, committed: list[int]) -> DraftTree:
        if self.table is None:
            raise RuntimeError("GooseDrafter.begin() must be called before propose()")
        self.matcher.sync(committed)
        anchor = int(committed[-1])
        prev = int(committed[-2]) if len(committed) >= 2 else None
        self._prev_anchor = prev
        self.confidence = 0.0
        found = self.matcher.match()
        successors, _ = self.table.successors(anchor, prev)
        if successors:
            tree = self._build_tree(anchor, prev, found)
            route = "spine_tree" if SPINE in tree.sources else "branch_tree"
            if len(tree) < 2:
                self.count("tree_fallback_ar")
                tree, route = DraftTree.single(anchor), "ar"
            else:
                self.count("b_eff_sum", self.b_eff)
        elif found.chain:
            tree, route = DraftTree.chain(anchor, found.chain, SPINE), "chain"
        else:
            tree, route = DraftTree.single(anchor), "ar"
        self.route = route
        self.count(f"route_{route}")
        return tree

    def _build_tree(self, anchor: int, prev: int | None, found: ContextMatch) -> DraftTree:
        """Confidence-adaptive setup (Goose §4.3), then the spine tree (§4.1)."""
        cfg, rules = self.cfg, self.rules
        chain = found.chain
        c = 0.0
        if chain and cfg.use_confidence:
            c = rules.confidence(len(chain), found.consensus, cfg.long_match)
            if c > cfg.chain_extension_threshold:
                limit = rules.extension_limit(c, cfg.max_extended_chain)
                if rules.cut_extension_at_limit:
                    extended = self.matcher.extend_chain(chain, limit, require_consensus=c >= 1.0)
                else:
                    extended = self.matcher.extend_chain_whole(chain, limit, saturated=c >= 1.0)
                if len(extended) > len(chain):
                    self.count("chain_extensions")
                    self.count("chain_extension_tokens", len(extended) - len(chain))
                chain = extended
        self.confidence = c
        b_eff = self.b_eff = rules.effective_budget(c, cfg.budget, cfg.max_extended_chain)
        ratio = spine_ratio(c, self.ema.value, cfg.spine_ratio_tiers, cfg.spine_ratio_thresholds)
        return build_spine_tree(
            self.table,
            anchor,
            prev,
            chain,
            budget=b_eff,
            ratio=ratio,
            rho=cfg.rho,
            max_depth=cfg.max_depth,
            k=cfg.k,
            min_score=cfg.min_score,
            rules=rules,
        )

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting (budget=auto's gate): the anchor's logits into the table with its bigram,
        as on the AR route (only with `learn_logits`); no EMA update (no spine was verified)."""
        if self.table is not None and learn_logits:
            prev = int(committed[-2]) if len(committed) >= 2 else None
            self.table.update_from_tree(committed[-1:], [-1], outcome.logits, prev, outcome.top)

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """Adjacency update from every node; EMA and spine continuation after a spine tree. The root's bigram
        is written on every route, or under compat=authors only on the chain and AR routes.
        """
        if self.table is None:
            return
        root_prev = self._prev_anchor
        if not self.rules.tree_root_bigram and self.route in TREE_ROUTES:
            root_prev = None
        self.table.update_from_tree(tree.tokens, tree.parents, outcome.logits, root_prev, outcome.top)
        count_tree_shape(self, tree)  # shape_* counters of the verified tree (goose.method.tree_shape)
        spine_nodes = tree.sources.count(SPINE)  # L of the verified tree (it may have been cut)
        if self.route != "spine_tree" or spine_nodes == 0:
            return
        path = outcome.accepted_nodes[1:]
        spine_accepted = sum(1 for u in path if tree.sources[u] == SPINE)
        branch_accepted = sum(1 for u in path if tree.sources[u] == BRANCH)
        self.ema.update(spine_accepted, spine_nodes)
        if spine_accepted and branch_accepted:
            self.count("spine_continuations")
            self.count("spine_continuation_tokens", branch_accepted)
