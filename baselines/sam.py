"""SAM-Decoding (Hu et al., arXiv 2411.10666, ACL 2025) with Token Recycling as the auxiliary method.

A per-prompt suffix automaton (goose/sources/suffix_automaton.py, the "dynamic SAM") holds the longest
earlier-occurring suffix. Each step: a match of at least `match_threshold` drafts the tokens after its
earliest occurrence as one chain ("sam_chain", SPINE); else TR's tree ("tr_tree", BRANCH) or AR. A chain
*or* a tree, as the reference's `DraftModel.lookup`; Goose hangs both sources on one tree, which makes SAM
the closest prior art.

TR is reused unchanged: its table learns from every verified tree, not from the prefill, and persists
across prompts, so `sam` differs from `tr` only by the chains. The static corpus SAM is left out (no corpus
offline, and it would carry information across prompts); defaults (`SamConfig`) are the reference code's
(hyx1999/SAM-Decoding: samd/samd_config.py and scripts/inference_samd.sh, the paper's Spec-Bench runs with
--samd_n_predicts 40 --samd_len_threshold 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from baselines.token_recycling import TR_K, TokenRecyclingDrafter
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import SPINE, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.suffix_automaton import SuffixAutomaton
from goose.validation import check_bool, check_int, check_str


@dataclass(frozen=True)
class SamConfig(DrafterConfig):
    """SAM-Decoding's hyperparameters, at the reference code's values. No static corpus SAM, hence no
    len_bias."""

    owner = "SamDrafter"
    max_draft_len: int = 39  # copied tokens per chain: n_predicts = 40 verified positions incl. the anchor
    match_threshold: int = 5  # l_threshold (len_threshold = 5): shorter matches draft TR's tree
    climb_suffix_links: bool = True  # DynSAM.to_anc: few tokens after the match: copy after a shorter suffix
    k: int = TR_K  # TR's K (TOPK = 8 in the reference's token_recycle.py; docs/paper.md's TR: 8)

    def _validate(self) -> None:
        owner = self.owner_name()
        check_int(f"{owner}.max_draft_len", self.max_draft_len, low=1, why="tokens copied per chain")
        check_int(
            f"{owner}.match_threshold",
            self.match_threshold,
            low=1,
            why="l_threshold, shortest match that drafts the chain",
        )
        check_bool(f"{owner}.climb_suffix_links", self.climb_suffix_links)
        super()._validate()  # k, by goose.validation.HYPERPARAMETERS


class SamDrafter(Drafter):
    """SAM-Decoding: an automaton chain of `max_draft_len` tokens when the match is at least `match_threshold`
    long, TR's tree (K = `k`) otherwise; `climb_suffix_links` is the reference's `to_anc`. Keyword arguments
    are `SamConfig`'s fields.
    """

    config_class = SamConfig
    name = "sam"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=check_str("SamDrafter.name", self.name if name is None else name))
        self.cfg = SamConfig(**hyperparameters)
        self.max_draft_len = self.cfg.max_draft_len
        self.match_threshold = self.cfg.match_threshold
        self.climb_suffix_links = self.cfg.climb_suffix_links
        self.k = self.cfg.k
        self.automaton = SuffixAutomaton()
        self.tr = TokenRecyclingDrafter(k=self.k)

    def config(self) -> dict[str, Any]:
        """`SamConfig`'s fields, the fixed choices (earliest occurrence, no static SAM, TR as the auxiliary)
        and TR's logged settings."""
        tr = self.tr.config()
        return {
            **self.cfg.as_dict(),
            "occurrence": "earliest",
            "static_sam": False,
            "aux": "tr",
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

    shares_run_state = True

    def share_run_state(self, source: Any) -> None:
        """TR's table shared with `source`'s TR (batch_state "shared"); the automaton stays per request."""
        if not isinstance(source, type(self)):
            raise ValueError(f"batch_state=shared: {self.name} shares TR's table only with its own kind")
        self.tr.share_run_state(source.tr)

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

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """TR's table learns from the anchor (only with `learn_logits`); the automaton catches up at the next
        propose."""
        self.tr.observe_plain(committed, outcome, learn_logits)

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """TR's table learns from every verified tree, the automaton's chains included."""
        self.tr.observe(tree, outcome)

    def end(self) -> None:
        self.tr.end()
