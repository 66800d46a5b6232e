"""SAM-Decoding (Hu et al., arXiv 2411.10666, ACL 2025) with Token Recycling as the auxiliary method.

A per-prompt suffix automaton (goose/sources/suffix_automaton.py, the "dynamic SAM") holds the longest
earlier-occurring suffix. Each step: a match of at least `match_threshold` drafts the tokens after its
earliest occurrence as one chain ("sam_chain", SPINE); else TR's tree ("tr_tree", BRANCH) or AR. A chain
*or* a tree, as the reference's `DraftModel.lookup`; Goose hangs both sources on one tree, which makes SAM
the closest prior art.

TR is reused unchanged: its table learns from every verified tree, not from the prefill, and persists
across prompts, so `sam` differs from `tr` only by the chains. The static corpus SAM is left out (no corpus
offline, and it would carry information across prompts); defaults are the reference code's
(hyx1999/SAM-Decoding).
"""

from __future__ import annotations

from typing import Any

import torch

from baselines.token_recycling import TR_K, TokenRecyclingDrafter
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import SPINE, DraftTree
from goose.sources.suffix_automaton import SuffixAutomaton
from goose.validation import check_bool, check_hyperparameters, check_int, check_str

# Reference defaults: n_predicts = 40 positions with the anchor (39 copied tokens); len_threshold = 5.
SAM_MAX_DRAFT_LEN = 39
SAM_MATCH_THRESHOLD = 5


class SamDrafter(Drafter):
    """SAM-Decoding: an automaton chain of `max_draft_len` tokens when the match is at least `match_threshold`
    long, TR's tree (K = `k`) otherwise; `climb_suffix_links` is the reference's `to_anc`.
    """

    def __init__(
        self,
        max_draft_len: int = SAM_MAX_DRAFT_LEN,
        match_threshold: int = SAM_MATCH_THRESHOLD,
        climb_suffix_links: bool = True,
        k: int = TR_K,
        name: str = "sam",
    ) -> None:
        super().__init__(name=check_str("SamDrafter.name", name))
        owner = "SamDrafter"
        self.max_draft_len = check_int(
            f"{owner}.max_draft_len", max_draft_len, low=1, why="tokens copied per chain"
        )
        self.match_threshold = check_int(
            f"{owner}.match_threshold",
            match_threshold,
            low=1,
            why="l_threshold, shortest match that drafts the chain",
        )
        self.climb_suffix_links = check_bool(f"{owner}.climb_suffix_links", climb_suffix_links)
        check_hyperparameters(owner, k=k)
        self.k = k
        self.automaton = SuffixAutomaton()
        self.tr = TokenRecyclingDrafter(k=k)

    def config(self) -> dict[str, Any]:
        tr = self.tr.config()
        return {
            "max_draft_len": self.max_draft_len,
            "match_threshold": self.match_threshold,
            "climb_suffix_links": self.climb_suffix_links,
            "occurrence": "earliest",
            "static_sam": False,
            "aux": "tr",
            "k": self.k,
            "tr_template_nodes": tr["template_nodes"],
            "tr_prefill_harvest": tr["prefill_harvest"],
            "tr_persistent_table": tr["persistent_table"],
        }

    # The automaton is per prompt; TR's table is what outlives a prompt.
    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        return self.tr.carries_run_state

    def run_state(self) -> Any:
        return self.tr.run_state()

    def restore_run_state(self, state: Any) -> None:
        self.tr.restore_run_state(state)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        """Fresh automaton over the prompt; TR keeps its run-long table (no prefill harvest)."""
        super().begin(prompt_ids, prefill_logits)
        self.stats = {"sam_climbs": 0}
        self.automaton.reset()
        self.automaton.extend(prompt_ids)
        self.tr.begin(prompt_ids, prefill_logits)

    def propose(self, committed: list[int]) -> DraftTree:
        anchor = committed[-1]
        sam = self.automaton
        sam.sync(committed)
        if sam.match_length >= self.match_threshold:
            chain = sam.continuation(self.max_draft_len)
            if self.climb_suffix_links and len(chain) < self.max_draft_len:
                climbed = sam.continuation(self.max_draft_len, climb=True)
                if climbed != chain:  # copied after a shorter suffix's earlier occurrence
                    self.count("sam_climbs")
                    chain = climbed
            self.route = "sam_chain"
            return DraftTree.chain(anchor, chain, SPINE)
        tree = self.tr.propose(committed)
        self.route = "tr_tree" if len(tree) > 1 else "ar"
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """TR's table learns from every verified tree, the automaton's chains included."""
        self.tr.observe(tree, outcome)

    def end(self) -> None:
        self.tr.end()
