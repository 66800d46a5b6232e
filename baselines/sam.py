"""SAM-Decoding (Hu et al., "SAM Decoding: Speculative Decoding via Suffix Automaton", arXiv
2411.10666, ACL 2025) with Token Recycling as the auxiliary method, on the shared engine.

Per prompt, a suffix automaton over prompt + committed tokens (goose/sources/suffix_automaton.py,
the paper's "dynamic SAM") holds the longest suffix of the text that occurred earlier, advanced
incrementally as tokens are committed. Each step:

- match length l >= `match_threshold`: draft the `max_draft_len` tokens that followed the
  earliest occurrence of that suffix as one chain (route "sam_chain", nodes labelled SPINE);
- else: draft Token Recycling's tree (route "tr_tree", nodes labelled BRANCH), or an AR step when
  TR's table has nothing for the anchor yet (route "ar").

This is the paper's switch: a chain *or* a tree, chosen by the match length (its code, samd/draft.py
`DraftModel.lookup`, returns a "sequence" candidate when the match length reaches `len_threshold`
and the auxiliary tree otherwise; nothing is merged). Goose instead hangs both sources on one tree,
which is why SAM-Decoding is the closest prior art to compare it with.

Token Recycling is reused by composition (baselines/token_recycling.py, unchanged): its adjacency
table is overwritten from the logits of every verified tree, the SAM chains included (as the
reference code updates its TR table after every forward of either kind), it is not seeded from the
prefill, and it persists across the prompts of a run, as TR itself does in this harness (SPEC
"Baselines"). SAM-Decoding's own TR harvests the prompt's prefill logits too; this harness keeps
TR's behaviour so that `sam` differs from `tr` only by the automaton's chains.

Left out: the paper's *static* SAM over a text corpus (and its length bias `len_bias` = 5 against
the dynamic one). The offline harness ships no corpus, and a corpus built from other answers would
carry information across prompts that no other method gets; with the dynamic SAM alone the
defaults below are the reference code's (hyx1999/SAM-Decoding, samd/samd_config.py and
scripts/inference_samd.sh, the settings of the paper's Spec-Bench runs).
"""

from __future__ import annotations

from typing import Any

import torch

from baselines.token_recycling import TR_K, TokenRecyclingDrafter
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import SPINE, DraftTree
from goose.sources.suffix_automaton import SuffixAutomaton
from goose.validation import check_bool, check_hyperparameters, check_int, check_str

# Reference-code defaults (see conf/method/sam.yaml): n_predicts = 40 verified positions, the
# anchor included, i.e. 39 copied tokens; len_threshold = 5.
SAM_MAX_DRAFT_LEN = 39
SAM_MATCH_THRESHOLD = 5


class SamDrafter(Drafter):
    """SAM-Decoding: suffix-automaton chain when the longest earlier-occurring suffix is at least
    `match_threshold` tokens long, Token Recycling's tree otherwise.

    max_draft_len        tokens copied after the earliest occurrence of the match (chain length,
                         anchor excluded)
    match_threshold      l_threshold: shortest match length that drafts the chain
    climb_suffix_links   when fewer than max_draft_len tokens follow the earliest occurrence, copy
                         from a shorter suffix of the match instead (reference code's `to_anc`)
    k                    Token Recycling's K (successor ids per table row)
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

    # ------------------------------------------------------------------ state across prompts
    # The automaton is per prompt; TR's table is what outlives a prompt.
    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        return self.tr.carries_run_state

    def run_state(self) -> Any:
        return self.tr.run_state()

    def restore_run_state(self, state: Any) -> None:
        self.tr.restore_run_state(state)

    # ------------------------------------------------------------------ drafter contract
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
