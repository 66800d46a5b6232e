"""A training-free self-draft (SWIFT, Xia et al., arXiv 2410.06916; Draft & Verify, Zhang et al., arXiv
2309.08168): the target drafts with some attention and MLP sub-layers skipped, over the engine's KV cache
(`goose.engine.core.draft_forward`), and its proposal q is the warped, top-k-truncated logits of that forward
(`baselines.self_draft.search`). At T > 0 drafts are sampled from q, so rejection sampling keeps the target's
distribution; at T = 0 they are q's argmax and greedy verification keeps AR's output.

Shapes (`shape`):
- `chain`: one draw per node, stopping below a node whose q has top probability < `confidence` (the
  decision looks at q only, never at a draw; the first token is always drafted);
- `tree`: level by level, children drawn without replacement in draw order (Gumbel-top-k, as STAND);
  a node gets the fewest children whose q mass reaches `coverage` (at most `max_children`), and only the
  `beam` most probable nodes of a level are expanded, up to `budget` nodes and depth `max_depth`;
- `iid`: K = `paths` i.i.d. paths of `path_length` tokens, merged into their trie (`DraftTree.paths`);
- `delayed`: a trunk of L1 = `trunk` draws, then K i.i.d. paths of L2 = `path_length` (arXiv 2602.16994,
  Def. 5.2).
At T = 0 every draw is the argmax (a tree takes q's most likely tokens; i.i.d. paths collapse to a chain).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from baselines.self_draft.search import Proposal, sample_index, search_skip_set, truncated_proposals
from baselines.stand import gumbel_order
from goose.engine.core.backend import SkipSet
from goose.engine.core.draft_forward import DraftForward
from goose.engine.core.drafter import Drafter
from goose.engine.core.sampling import derive_seed
from goose.engine.core.tree import BRANCH, DraftTree
from goose.method.config import DrafterConfig
from goose.validation import check_choice, check_float, check_int, check_int_list

SHAPES = ("chain", "tree", "iid", "delayed")
OWNER = "SelfDraftDrafter"


def _skip_layers(name: str, layers: Any) -> tuple[int, ...] | None:
    """A fixed skip list: None, or distinct layer indices >= 1 (layer 0, the first, is never skipped)."""
    if layers is None:
        return None
    if isinstance(layers, (list, tuple)) and not layers:
        return ()
    return check_int_list(
        f"{OWNER}.{name}", layers, low=1, why="layer indices; the first layer (0) is never skipped"
    )


def check_skip_range(name: str, layers: tuple[int, ...], num_layers: int) -> None:
    """Every skipped layer lies in 1..L-2: never the first or the last."""
    bad = sorted(i for i in layers if not 1 <= i <= num_layers - 2)
    if bad:
        raise ValueError(
            f"{OWNER}.{name} = {list(layers)!r}: layer(s) {bad} cannot be skipped; this model has layers "
            f"0..{num_layers - 1} and only 1..{num_layers - 2} may be skipped (never the first or last)"
        )


@dataclass(frozen=True)
class SelfDraftConfig(DrafterConfig):
    """The self-draft's hyperparameters (module docstring): the draft's `shape` and its sizes, q's support
    `top_k`, and the skip set: `skip_attention` / `skip_mlp` fix it (either given), else it is searched per
    prompt over `search_trials` candidates of int(2 (L − 2) · `skip_ratio`) sub-layers, scored on the
    prompt's last `search_window` tokens. skip_ratio 0.45 is SWIFT's (13B models)."""

    owner = OWNER
    shape: str = "chain"
    top_k: int = 16  # tokens in q's truncated support
    max_depth: int = 8
    confidence: float = 0.5  # chain: stop below a node whose q has top probability < confidence
    budget: int = 24
    max_children: int = 4  # tree: children per node at most
    coverage: float = 0.8  # tree: q mass a node's children cover
    beam: int = 4  # tree: nodes expanded per level
    paths: int = 4  # iid / delayed: K, i.i.d. paths
    path_length: int = 4  # iid / delayed: tokens per i.i.d. path
    trunk: int = 2  # delayed: L1, the trunk
    skip_attention: tuple[int, ...] | None = None
    skip_mlp: tuple[int, ...] | None = None
    skip_ratio: float = 0.45
    search_trials: int = 16
    search_window: int = 32

    def _validate(self) -> None:
        check_choice(f"{OWNER}.shape", self.shape, SHAPES)
        super()._validate()  # budget and max_depth, by goose.validation.HYPERPARAMETERS
        check_int(f"{OWNER}.top_k", self.top_k, low=1, why="tokens in q's truncated support")
        check_float(f"{OWNER}.confidence", self.confidence, 0.0, 1.0, why="chain stop threshold")
        check_int(f"{OWNER}.max_children", self.max_children, low=1)
        check_float(f"{OWNER}.coverage", self.coverage, 0.0, 1.0, why="q mass a node's children cover")
        check_int(f"{OWNER}.beam", self.beam, low=1, why="nodes expanded per tree level")
        check_int(f"{OWNER}.paths", self.paths, low=1, why="K, i.i.d. paths")
        check_int(f"{OWNER}.path_length", self.path_length, low=1, why="tokens per i.i.d. path")
        check_int(f"{OWNER}.trunk", self.trunk, low=0, why="L1, the delayed tree's trunk")
        object.__setattr__(self, "skip_attention", _skip_layers("skip_attention", self.skip_attention))
        object.__setattr__(self, "skip_mlp", _skip_layers("skip_mlp", self.skip_mlp))
        check_float(f"{OWNER}.skip_ratio", self.skip_ratio, 0.0, 1.0, why="share of sub-layers")
        check_int(f"{OWNER}.search_trials", self.search_trials, low=1)
        check_int(f"{OWNER}.search_window", self.search_window, low=1, why="prompt tokens")


class SelfDraftDrafter(Drafter):
    """Layer-skip self-draft (module docstring); keyword arguments are `SelfDraftConfig`'s fields."""

    samples_drafts = True
    needs_draft_forward: ClassVar[bool] = True
    # budget=auto: the tree is sized while drafting (budget, confidence), never cut after its draws (a cut
    # that depends on them would bias rejection sampling); the latency is not used.
    sizes_itself: ClassVar[bool] = True
    config_class = SelfDraftConfig
    name = "self_draft"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=self.name if name is None else name)
        self.cfg = cfg = SelfDraftConfig(**hyperparameters)
        self.shape = cfg.shape
        self.top_k = cfg.top_k
        self.max_depth = cfg.max_depth
        self.confidence = cfg.confidence
        self.budget = cfg.budget
        self.max_children = cfg.max_children
        self.coverage = cfg.coverage
        self.beam = cfg.beam
        self.paths = cfg.paths
        self.path_length = cfg.path_length
        self.trunk = cfg.trunk
        self.skip_attention = cfg.skip_attention
        self.skip_mlp = cfg.skip_mlp
        self.skip_ratio = cfg.skip_ratio
        self.search_trials = cfg.search_trials
        self.search_window = cfg.search_window
        self.draft_forward: DraftForward | None = None
        self.skip = SkipSet()
        self._rng = random.Random(0)

    @property
    def fixed_skip(self) -> bool:
        return self.skip_attention is not None or self.skip_mlp is not None

    @property
    def needs_prefill_logits(self) -> bool:  # type: ignore[override]
        return not self.fixed_skip  # the search compares with the full model's argmax on the prompt

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    def use_draft_forward(self, draft_forward: DraftForward) -> None:
        """The engine's skipped forward for this prompt (before `begin`); checks a fixed skip set against L."""
        num_layers = draft_forward.num_layers
        for name, layers in (("skip_attention", self.skip_attention), ("skip_mlp", self.skip_mlp)):
            if layers is not None:
                check_skip_range(name, layers, num_layers)
        self.draft_forward = draft_forward

    def draft_shape(self) -> str:
        return self.shape

    def set_sampling(self, sampling, seed: int) -> None:
        super().set_sampling(sampling, seed)
        self._rng = random.Random(derive_seed(seed, "self-draft"))

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        fwd = self._forward()
        if self.fixed_skip:
            self.skip = SkipSet(frozenset(self.skip_attention or ()), frozenset(self.skip_mlp or ()))
        else:
            rng = random.Random(derive_seed(self.sampling_seed, "self-draft-search"))
            self.skip, score, scored = search_skip_set(
                fwd, prompt_ids, prefill_logits, self.skip_ratio, self.search_trials, self.search_window, rng
            )
            self.stats.update(skip_matchness=score, search_candidates=scored, search_forwards=fwd.forwards)
        self.stats.update(
            skip_attention=sorted(self.skip.attention),
            skip_mlp=sorted(self.skip.mlp),
            sublayers_per_forward=2 * fwd.num_layers,
            draft_sublayers_per_forward=self.skip.sublayers_run(fwd.num_layers),
        )
        self._search_forwards, self._search_sublayers = fwd.forwards, fwd.sublayers_run

    def _forward(self) -> DraftForward:
        if self.draft_forward is None:
            raise RuntimeError(f"{OWNER} needs the engine's draft forward (use_draft_forward) before begin")
        return self.draft_forward

    def propose(self, committed: list[int]) -> DraftTree:
        builder = {"chain": self._chain, "tree": self._tree, "iid": self._iid, "delayed": self._iid}[
            self.shape
        ]
        tree, proposals = builder(committed[-1])
        self.count("steps")
        self.count("drafted_nodes", len(tree) - 1)
        self.route = "ar" if len(tree) == 1 else self.shape
        if not self.sampling.greedy and len(tree) > 1:
            tree.proposals = proposals
        return tree

    def end(self) -> None:
        fwd = self._forward()
        steps = max(self.stats.get("steps", 0), 1)
        self.stats["draft_forwards"] = fwd.forwards - self._search_forwards
        self.stats["draft_sublayers"] = fwd.sublayers_run - self._search_sublayers
        self.stats["mean_drafted_nodes"] = self.stats.get("drafted_nodes", 0) / steps
        # draft cost per step in full target forwards, counted in sub-layers run (no clock)
        self.stats["draft_cost_per_step"] = self.stats["draft_sublayers"] / (2 * fwd.num_layers * steps)

    # --- shapes: each returns the tree and per node the q its children were drawn from (None: a leaf)

    def _expand(self, tokens: list[int], parents: list[int], first: int) -> list[Proposal]:
        """q of nodes first.. of the draft so far, from one skipped forward."""
        logits = self._forward().tree(tokens, parents, first, self.skip)
        return truncated_proposals(logits, self.sampling, self.top_k)

    def _draw(self, q: Proposal) -> int:
        """One token from q: sampled at T > 0, the most likely at T = 0."""
        return q[0][0] if self.sampling.greedy else q[0][sample_index(q[1], self._rng)]

    def _chain(self, anchor: int) -> tuple[DraftTree, list[Proposal | None]]:
        tree = DraftTree.single(anchor)
        proposals: list[Proposal | None] = [None]
        q = self._expand(tree.tokens, tree.parents, 0)[0]
        node = 0
        for depth in range(self.max_depth):
            if depth > 0 and q[1][0] < self.confidence:  # q's top probability (most likely first)
                break
            proposals[node] = q
            node = tree.add(self._draw(q), node, BRANCH)
            proposals.append(None)
            if depth + 1 < self.max_depth:
                q = self._expand(tree.tokens, tree.parents, node)[0]
        return tree, proposals

    def _width(self, q: Proposal) -> int:
        """The fewest of q's most likely tokens whose mass reaches `coverage`, at most `max_children`."""
        mass, width = 0.0, 0
        for p in q[1]:
            width += 1
            mass += p
            if mass >= self.coverage or width >= self.max_children:
                break
        return width

    def _tree(self, anchor: int) -> tuple[DraftTree, list[Proposal | None]]:
        tree = DraftTree.single(anchor)
        proposals: list[Proposal | None] = [None]
        values = [1.0]
        frontier, qs = [0], self._expand(tree.tokens, tree.parents, 0)
        for depth in range(self.max_depth):
            level_start = len(tree)
            ranked = sorted(range(len(frontier)), key=lambda j: -values[frontier[j]])[: self.beam]
            for j in sorted(ranked):
                if len(tree) >= self.budget:
                    break
                node, q = frontier[j], qs[j]
                width = self._width(q)
                order = list(range(len(q[0]))) if self.sampling.greedy else gumbel_order(q[1], self._rng)
                for index in order[:width]:
                    if len(tree) >= self.budget:
                        break
                    proposals[node] = q
                    tree.add(q[0][index], node, BRANCH)
                    proposals.append(None)
                    values.append(values[node] * q[1][index])
            if len(tree) == level_start or len(tree) >= self.budget or depth + 1 == self.max_depth:
                break
            frontier = list(range(level_start, len(tree)))
            qs = self._expand(tree.tokens, tree.parents, level_start)
        return tree, proposals

    def _iid(self, anchor: int) -> tuple[DraftTree, list[Proposal | None]]:
        """`iid` (no trunk) or `delayed`: K i.i.d. paths after a trunk, merged into their trie."""
        tree = DraftTree.single(anchor)
        proposals: list[Proposal | None] = [None]
        q_of: dict[int, Proposal] = {0: self._expand(tree.tokens, tree.parents, 0)[0]}
        kids: dict[tuple[int, int], int] = {}
        trunk = self.trunk if self.shape == "delayed" else 0
        steps = trunk + self.path_length
        heads = [0]  # the trunk is one path; K paths after it
        walked: list[list[int]] = [[]]
        for step in range(min(steps, self.max_depth)):
            if step == trunk:
                # the paths start after the trunk: a trunk is one draw, not K draws that agreed (GBV, rrs_iid)
                heads, walked = heads * self.paths, [[] for _ in range(self.paths)]
            first = len(tree)
            for k, node in enumerate(heads):
                q = q_of[node]
                token = self._draw(q)
                child = kids.get((node, token))
                if child is None:
                    proposals[node] = q
                    child = kids[(node, token)] = tree.add(token, node, BRANCH)
                    proposals.append(None)
                heads[k] = child
                walked[k].append(child)
            if step + 1 < min(steps, self.max_depth) and len(tree) > first:
                new = self._expand(tree.tokens, tree.parents, first)
                q_of.update(zip(range(first, len(tree)), new, strict=True))
        tree.paths = [tuple(w) for w in walked] if len(walked) == self.paths else None
        return tree, proposals
