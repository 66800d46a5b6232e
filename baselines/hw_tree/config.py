"""hw_tree's hyperparameters (`HwTreeConfig`): the candidate pool's sources, the acceptance estimator's
priors and the size rule's fallback budget, with their defaults and ranges checked once here."""

from __future__ import annotations

from dataclasses import dataclass

from goose.method.config import HAND, CalibratedPriorConfig, GooseConfig
from goose.validation import check_bool, check_float, check_int, check_positive


@dataclass(frozen=True)
class HwTreeConfig(CalibratedPriorConfig):
    """hw_tree's hyperparameters. From the candidate pool (Goose Table 5): `budget` B, the largest tree (anchor
    included), verified whole without a latency curve; `max_depth` D, the deepest adjacency-only node that
    still gets successors; `k`, `min_score`, `use_bigram`; `prefill_harvest` off (the prompt's logits at
    every position cost a long prompt more than its rows return; the table fills from verified nodes alone,
    docs/performance.md); the matcher's `ngram_lengths`
    (Goose's 5, 4, 3 and PLD's 2, 1), `max_chain`, `long_match`, `max_extended_chain`, `extend_chain` above
    `chain_extension_threshold`. Sources: `alt_matches` other occurrences of `alt_chain` tokens; `suffix`
    on/off, `suffix_max_depth` (vLLM's 24), `suffix_min_token_prob`; `adj_width` successors per node (0:
    none); `run_table`: a token with no row yet in this prompt takes the row an earlier prompt of the run
    wrote (a token new to the prompt otherwise stalls a step on the anchor alone). Estimator:
    `prior_strength`, `decay` and the priors `ctx_prior` (a 1-gram match, + 0.1 per matched token),
    `alt_prior`, `suf_prior`, `adj_prior`, `run_prior` (scales of the confidence) at depth 1, and
    `chain_gain`, the share of a copying source's prior rejection rate kept per level deeper. `row_value`:
    a node whose token has no table row gains g (RowValue), starting at `row_prior` tokens per row with
    the weight of `row_prior_rows` rows. `request_scale` (off; results/studies/hw_tree/ says why): the size
    rule weighs the estimates by this request's accepted over predicted drafted nodes (RequestScale:
    `scale_prior_nodes` pseudo-nodes at 1, decayed by `scale_decay` per verified tree, reset per request).
    `acceptance_prior`: a calibrated prior to start the estimator from
    where it has evidence (a model or family name, a prior's name or a path to a prior file:
    goose.engine.core.acceptance_prior.find_prior; none found: the hand priors above), "auto" the prior of
    the run's model (goose.harness.compose.drafter_spec), "hand" (the default; results/studies/priors/
    says why) the hand priors; the config records the prior that ran."""

    owner = "HwTreeDrafter"
    acceptance_prior: str = HAND
    prefill_harvest: bool = False
    ngram_lengths: tuple[int, ...] = (5, 4, 3, 2, 1)
    extend_chain: bool = True
    chain_extension_threshold: float = GooseConfig.chain_extension_threshold
    alt_matches: int = 4
    alt_chain: int = 10
    suffix: bool = True
    suffix_max_depth: int = 24
    suffix_min_token_prob: float = 0.1
    adj_width: int = 4
    run_table: bool = True
    prior_strength: float = 2.0
    decay: float = 0.99
    ctx_prior: float = 0.3
    alt_prior: float = 0.8
    suf_prior: float = 0.9
    adj_prior: float = 0.8
    run_prior: float = 0.5
    chain_gain: float = 0.7
    row_value: bool = True
    row_prior: float = 0.1
    row_prior_rows: float = 20.0
    request_scale: bool = False
    scale_prior_nodes: float = 2.0
    scale_decay: float = 0.95

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
        check_bool(f"{owner}.extend_chain", self.extend_chain)
        check_bool(f"{owner}.suffix", self.suffix)
        check_bool(f"{owner}.row_value", self.row_value)
        check_bool(f"{owner}.run_table", self.run_table)
        check_bool(f"{owner}.request_scale", self.request_scale)
        check_positive(f"{owner}.scale_prior_nodes", self.scale_prior_nodes, why="pseudo-nodes at c = 1")
        check_float(f"{owner}.scale_decay", self.scale_decay, 0.0, 1.0, why="per-tree forgetting, in (0, 1]")
        if self.scale_decay == 0:
            raise ValueError(f"{owner}.scale_decay = 0: must be in (0, 1] (1: never forget within a request)")
        check_float(f"{owner}.row_prior", self.row_prior, 0.0, 4.0, why="tokens committed later per new row")
        check_positive(f"{owner}.row_prior_rows", self.row_prior_rows, why="pseudo-rows of the row prior")
        check_int(f"{owner}.alt_matches", self.alt_matches, low=0, why="other occurrences drafted (0: none)")
        check_int(f"{owner}.alt_chain", self.alt_chain, low=1, why="tokens drafted per other occurrence")
        check_int(
            f"{owner}.suffix_max_depth",
            self.suffix_max_depth,
            low=2,
            why="a matched token plus a drafted one",
        )
        check_float(
            f"{owner}.suffix_min_token_prob", self.suffix_min_token_prob, 0.0, 1.0, why="a probability"
        )
        check_int(f"{owner}.adj_width", self.adj_width, low=0, why="adjacency successors per node (0: none)")
        check_positive(f"{owner}.prior_strength", self.prior_strength, why="pseudo-observations of the prior")
        check_float(f"{owner}.decay", self.decay, 0.0, 1.0, why="per-step forgetting, in (0, 1]")
        if self.decay == 0:
            raise ValueError(f"{owner}.decay = 0: must be in (0, 1] (1: never forget)")
        for name in ("ctx_prior", "alt_prior", "suf_prior", "adj_prior", "run_prior"):
            check_float(f"{owner}.{name}", getattr(self, name), 0.0, 1.0, why="a prior acceptance rate")
        check_float(
            f"{owner}.chain_gain", self.chain_gain, 0.0, 1.0, why="rejection rate kept per level, in (0, 1]"
        )
        if self.chain_gain == 0:
            raise ValueError(f"{owner}.chain_gain = 0: must be in (0, 1] (1: no depth gain)")
        object.__setattr__(self, "ngram_lengths", tuple(int(n) for n in self.ngram_lengths))
        for name in (
            "chain_extension_threshold",
            "suffix_min_token_prob",
            "prior_strength",
            "decay",
            "row_prior",
            "row_prior_rows",
            "scale_prior_nodes",
            "scale_decay",
        ):
            object.__setattr__(self, name, float(getattr(self, name)))
        for name in ("ctx_prior", "alt_prior", "suf_prior", "adj_prior", "run_prior", "chain_gain"):
            object.__setattr__(self, name, float(getattr(self, name)))
