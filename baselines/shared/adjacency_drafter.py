"""The shared base of the drafters that read a per-prompt adjacency table (Goose §3.2's branch source):
the isotropic control, EAGLE-2-style dynamic trees, the isotropic budget control, OPT-Tree and the
hardware-aware tree. It owns the table's life cycle (allocated in `begin`, reset per prompt, seeded from
the prefill, updated from every verified node); each subclass only shapes the tree.
"""

from __future__ import annotations

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.tree import DraftTree
from goose.method.compat import HARNESS, CompatRules
from goose.method.config import CandidatePoolConfig
from goose.sources.adjacency import AdjacencyTable


def prev_of_anchor(committed: list[int]) -> int | None:
    return committed[-2] if len(committed) >= 2 else None


class AdjacencyDrafter(Drafter):
    """Shared state of the drafters reading a per-prompt adjacency table (iso, eagle2, OPT-Tree): allocated in
    `begin`, reset per prompt, seeded from the prefill if `prefill_harvest`, updated from every node. `cfg`
    (validated when built) holds the hyperparameters; each field is also an attribute.
    """

    def __init__(self, name: str, cfg: CandidatePoolConfig) -> None:
        super().__init__(name=name)
        self.cfg = cfg
        for key in cfg.field_names():
            setattr(self, key, getattr(cfg, key))
        self.table: AdjacencyTable | None = None
        self._prev_anchor: int | None = None
        self.rules: CompatRules = HARNESS  # compat rules (goose.method.compat); subclasses may set them

    @property
    def needs_prefill_logits(self) -> bool:  # type: ignore[override]
        return self.prefill_harvest

    @property
    def logits_topk(self) -> int:  # type: ignore[override]
        """The table's K: the engine hands every verified node's top-K over (`VerifyOutcome.top`)."""
        return self.k

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        vocab = prefill_logits.shape[-1]
        half = self.rules.fp16_unigram_scores
        if self.table is None or self.table.vocab_size != vocab or self.table.half_unigram_scores != half:
            self.table = AdjacencyTable(
                vocab, self.k, use_scores=True, use_bigram=self.use_bigram, half_unigram_scores=half
            )
        else:
            self.table.reset()
        if self.prefill_harvest:
            self.table.update_from_prefill(prompt_ids, prefill_logits)
        self._prev_anchor = None

    def successors(self, token: int, prev: int | None) -> tuple[list[int], list[float]]:
        assert self.table is not None, "begin() must be called before propose()"
        return self.table.successors(token, prev if self.use_bigram else None, self.min_score)

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: the anchor's logits into the table, with its bigram (as on the AR route), only
        with `learn_logits`."""
        if self.table is not None and learn_logits:
            self.table.update_from_tree(
                committed[-1:], [-1], outcome.logits, prev_of_anchor(committed), outcome.top
            )

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """Every node's logits into the table; the root's bigram (previous anchor, anchor) too,
        except from tree cycles without `rules.tree_root_bigram` (compat=authors)."""
        if self.table is not None:
            root_prev = self._prev_anchor
            if not self.rules.tree_root_bigram and self.route == "tree":
                root_prev = None
            self.table.update_from_tree(tree.tokens, tree.parents, outcome.logits, root_prev, outcome.top)
