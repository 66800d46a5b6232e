"""Source selection (llama.cpp's chain of speculators, PR #22546: the best p_acc · length wins): each step,
every source drafts its candidate (PLD's chain, Token Recycling's tree, SuffixDecoding's tree; the drafters of
baselines/, composed unchanged), each candidate's expected accepted length is estimated from acceptance
rates learnt online, and only the best one is verified. The foil to Goose's *merging* of the same signals
into one tree (Goose §4).

Estimates, per source: r_s(d) = P(a node at depth d accepted | depth d − 1 accepted, the candidate reaching
depth d), an EMA (α = ema_alpha, start ema_init) like Goose's spine-acceptance EMA. `rule`:
- expected_accepted: E_s = Σ_{d=1}^{D_s} Π_{j≤d} r_s(j), D_s the candidate's depth (default);
- rate_times_length: llama.cpp's p̂_s · L_s, p̂_s an EMA of accepted / drafted depth, L_s = D_s.
Ties go to the source listed first; every candidate empty, or every score 0, is an AR step.

What each source learns from a step it did not propose: PLD's matcher and the suffix tree follow the
committed tokens; TR's table learns from the verified tree's logits whoever drafted it (a source-agnostic
update). With `counterfactual`, every candidate's rates learn from the step's committed tokens too: its
longest path matching them is what it would have had accepted (greedy), known for depths <= len(new tokens).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from baselines.pld import PromptLookupDrafter
from baselines.suffix import SuffixDecodingDrafter
from baselines.token_recycling import TokenRecyclingDrafter
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.tree import DraftTree
from goose.method.config import DrafterConfig, GooseConfig
from goose.validation import check_bool, check_choice, check_float, check_str

SOURCES: tuple[str, ...] = ("pld", "tr", "suffix")
RULES: tuple[str, ...] = ("expected_accepted", "rate_times_length")
MAX_DEPTH_BUCKET = 64  # deeper nodes share the last rate


def matched_depth(tree: DraftTree, tokens: Sequence[int]) -> int:
    """Length of the longest root path of `tree` whose tokens are a prefix of `tokens` (what a greedy
    verification accepts when `tokens` are the target's next tokens)."""
    kids = tree.children()
    node, depth = 0, 0
    for token in tokens:
        nxt = next((c for c in kids[node] if tree.tokens[c] == token), None)
        if nxt is None:
            break
        node, depth = nxt, depth + 1
    return depth


class SourceEstimate:
    """One source's online acceptance estimates: per-depth rates r(d) and the overall rate p̂, EMAs."""

    def __init__(self, alpha: float, init: float) -> None:
        self.alpha = alpha
        self.rates = [init] * (MAX_DEPTH_BUCKET + 1)  # index d = 1..MAX_DEPTH_BUCKET
        self.rate = init

    def expected_accepted(self, depth: int) -> float:
        """E = Σ_{d=1}^{depth} Π_{j≤d} r(j)."""
        total, q = 0.0, 1.0
        for d in range(1, depth + 1):
            q *= self.rates[min(d, MAX_DEPTH_BUCKET)]
            total += q
        return total

    def update(self, depth: int, matched: int, known: int) -> None:
        """A candidate of `depth` levels matched `matched` of the `known` next tokens."""
        a = self.alpha
        for d in range(1, min(depth, known) + 1):
            if matched < d - 1:
                break
            b = min(d, MAX_DEPTH_BUCKET)
            self.rates[b] = (1 - a) * self.rates[b] + a * float(matched >= d)
        seen = min(depth, known)
        if seen:
            self.rate = (1 - a) * self.rate + a * min(matched, seen) / seen


@dataclass(frozen=True)
class SourceSelectConfig(DrafterConfig):
    """Source selection's hyperparameters: the sources (each at its own defaults: pld.yaml, tr.yaml,
    suffix.yaml), the scoring `rule` (module docstring) and the acceptance EMAs, whose α and start are
    Goose's (GooseConfig.ema_alpha, ema_init)."""

    owner = "SourceSelectDrafter"
    sources: tuple[str, ...] = SOURCES  # candidates, in tie-break order
    rule: str = "expected_accepted"  # Σ_d Π_{j<=d} r(j); rate_times_length: llama.cpp's p̂ · L
    ema_alpha: float = GooseConfig.ema_alpha  # α of the acceptance EMAs
    ema_init: float = GooseConfig.ema_init  # every rate's start
    counterfactual: bool = True  # unchosen candidates' rates learn from the committed tokens too

    def _validate(self) -> None:
        owner = self.owner_name()
        sources = self.sources
        names = () if isinstance(sources, (str, bytes)) else tuple(str(s) for s in sources)
        if not names or len(set(names)) != len(names) or any(s not in SOURCES for s in names):
            raise ValueError(f"{owner}.sources = {sources!r}: must be distinct names out of {list(SOURCES)}")
        check_choice(f"{owner}.rule", self.rule, RULES)
        alpha = check_float(f"{owner}.ema_alpha", self.ema_alpha, 0.0, 1.0, why="α, EMA smoothing")
        init = check_float(f"{owner}.ema_init", self.ema_init, 0.0, 1.0, why="initial rate")
        check_bool(f"{owner}.counterfactual", self.counterfactual)
        super()._validate()  # ema_alpha and ema_init, by goose.validation.HYPERPARAMETERS
        object.__setattr__(self, "sources", names)
        object.__setattr__(self, "ema_alpha", float(alpha))
        object.__setattr__(self, "ema_init", float(init))


class SourceSelectDrafter(Drafter):
    """Per step, verify only the candidate of `sources` (pld, tr, suffix) with the best estimated score.
    Keyword arguments are `SourceSelectConfig`'s fields. stats: select_<source> steps per chosen source,
    select_none."""

    config_class = SourceSelectConfig
    name = "source_select"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=check_str("SourceSelectDrafter.name", self.name if name is None else name))
        self.cfg = SourceSelectConfig(**hyperparameters)
        self.sources = self.cfg.sources
        self.rule = self.cfg.rule
        self.ema_alpha = self.cfg.ema_alpha
        self.ema_init = self.cfg.ema_init
        self.counterfactual = self.cfg.counterfactual
        makers = {"pld": PromptLookupDrafter, "tr": TokenRecyclingDrafter, "suffix": SuffixDecodingDrafter}
        self.drafters: dict[str, Drafter] = {s: makers[s]() for s in self.sources}
        self.estimates = {s: SourceEstimate(self.ema_alpha, self.ema_init) for s in self.sources}
        self._candidates: dict[str, DraftTree] = {}
        self._chosen = ""

    def config(self) -> dict[str, Any]:
        return {
            **self.cfg.as_dict(),
            **{f"{s}_{k}": v for s, d in self.drafters.items() for k, v in d.config().items()},
        }

    # TR's table and the estimates outlive a prompt.
    @property
    def carries_run_state(self) -> bool:  # type: ignore[override]
        return True

    def run_state(self) -> Any:
        inner = {s: d.run_state() for s, d in self.drafters.items() if d.carries_run_state}
        return {"inner": inner, "estimates": copy.deepcopy(self.estimates)}

    def restore_run_state(self, state: Any) -> None:
        if state is None:
            return
        for s, inner in state["inner"].items():
            self.drafters[s].restore_run_state(inner)
        self.estimates = copy.deepcopy(state["estimates"])

    def set_sampling(self, sampling: SamplingParams, seed: int) -> None:
        super().set_sampling(sampling, seed)
        for d in self.drafters.values():
            d.set_sampling(sampling, seed)

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self.stats = {f"select_{s}": 0 for s in self.sources} | {"select_none": 0}
        for d in self.drafters.values():
            d.begin(prompt_ids, prefill_logits)

    def score(self, source: str, tree: DraftTree) -> float:
        """The estimated value of verifying `tree` drafted by `source` (module docstring, `rule`)."""
        depth = max(tree.depths)
        if depth == 0:
            return 0.0
        est = self.estimates[source]
        if self.rule == "expected_accepted":
            return est.expected_accepted(depth)
        return est.rate * depth

    def choose(self, candidates: dict[str, DraftTree]) -> str:
        """The source with the largest score ("" when none is above 0); ties to the one listed first."""
        best, best_score = "", 0.0
        for s in self.sources:
            value = self.score(s, candidates[s])
            if value > best_score:
                best, best_score = s, value
        return best

    def propose(self, committed: list[int]) -> DraftTree:
        self._candidates = {s: d.propose(committed) for s, d in self.drafters.items()}
        self._chosen = self.choose(self._candidates)
        if not self._chosen:
            self.count("select_none")
            self.route = "ar"
            return DraftTree.single(committed[-1])
        self.count(f"select_{self._chosen}")
        self.route = self._chosen
        return self._candidates[self._chosen]

    def observe_plain(self, committed: list[int], outcome: VerifyOutcome, learn_logits: bool = True) -> None:
        """A step without drafting: every source hears of it; no source was chosen, so no rate learns."""
        for d in self.drafters.values():
            d.observe_plain(committed, outcome, learn_logits)

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        """Every source's tables learn (see the module docstring); the chosen source's rates learn from its
        verification, the others' from their candidates against the committed tokens (`counterfactual`)."""
        for d in self.drafters.values():
            d.observe(tree, outcome)
        known = len(outcome.new_tokens)
        if self._chosen:
            self.estimates[self._chosen].update(max(tree.depths), len(outcome.accepted_nodes) - 1, known)
        if not self.counterfactual:
            return
        for s, cand in self._candidates.items():
            if s == self._chosen or len(cand) < 2:
                continue
            self.estimates[s].update(max(cand.depths), matched_depth(cand, outcome.new_tokens), known)

    def end(self) -> None:
        for d in self.drafters.values():
            d.end()
