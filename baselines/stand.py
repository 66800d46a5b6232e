"""STAND (Song et al., arXiv 2506.04708): stochastic adaptive n-gram drafting, model-free; no reference code
is public, so choices where the paper is silent are ours.

An n-gram table (orders 1..max_order) keeps the target's raw top-K logits after each context, from every
verified node; the proposal q is the run's warp of them. Trees grow best-first over slots "draw u's next
child", scored before the draw, and children follow u's Gumbel-top-k order (without replacement): a
decision that looked at the draw would bias rejection sampling. Under budget=auto the tree is sized while
drawing (`use_latency`), never cut. At T = 0 drafts are deterministic and the output equals AR's.

Draft shapes (`shape`, for the verifiers of goose.engine.core.verify): `tree` (the above), `chain` (the
same with one child per node), `iid` (K = `num_paths` i.i.d. paths of L2 = `path_len` from the anchor, merged
into their trie) and `delayed` (a trunk of L1 = `trunk_len` draws, then K i.i.d. paths of L2; Thomas et al.,
arXiv 2602.16994, Def. 5.2, static: (K, L1, L2) fixed per setting in the YAML).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.sampling import derive_seed
from goose.engine.core.tree import BRANCH, DraftTree
from goose.method.config import DrafterConfig
from goose.sources.run_long import RunLongTable
from goose.validation import check_bool, check_choice, check_float, check_int

SHAPES = ("tree", "chain", "iid", "delayed")


@dataclass(frozen=True)
class StandConfig(DrafterConfig):
    """STAND's hyperparameters (the paper publishes none: every default is this harness's choice). B = `budget`
    (nodes incl. the anchor; the maximum under budget=auto), D = `max_depth`, `max_children` siblings per node,
    K = `k` (token, logit) pairs per n-gram, `max_order` (longest n-gram key), `prefill_harvest`,
    `persistent_table` (keep the table across prompts, as TR); `shape` and, for `iid` / `delayed`, the paths'
    count K = `num_paths`, the trunk L1 = `trunk_len` and the paths' length L2 = `path_len`; `branch_below`
    (delayed only; 0 = off): the dynamic delay, the paths branch at the first trunk node whose proposal's top
    probability is below it (the draft is unsure there), else after L1 draws (arXiv 2602.16994 §5 picks the
    expansion per step; this is its training-free rule on the draft's own confidence)."""

    owner = "StandDrafter"
    budget: int = 40
    max_depth: int = 8
    max_children: int = 4
    k: int = 8
    max_order: int = 3
    prefill_harvest: bool = True
    persistent_table: bool = True
    shape: str = "tree"
    num_paths: int = 3
    trunk_len: int = 2
    path_len: int = 4
    branch_below: float = 0.0

    def _validate(self) -> None:
        super()._validate()
        owner = self.owner_name()
        check_int(f"{owner}.max_children", self.max_children, low=1)
        check_int(f"{owner}.max_order", self.max_order, low=1, why="longest n-gram key")
        if self.max_children > self.k:
            raise ValueError(
                f"{owner}.max_children = {self.max_children}: must be <= k = {self.k} (tokens stored per n-gram)"
            )
        check_bool(f"{owner}.persistent_table", self.persistent_table)
        check_choice(f"{owner}.shape", self.shape, SHAPES, why="the draft's shape")
        check_int(f"{owner}.num_paths", self.num_paths, low=1, why="K, i.i.d. paths")
        check_int(f"{owner}.trunk_len", self.trunk_len, low=0, why="L1, draws before the paths branch")
        check_int(f"{owner}.path_len", self.path_len, low=1, why="L2, draws per path")
        check_float(
            f"{owner}.branch_below", self.branch_below, 0.0, 1.0, why="dynamic delay threshold; 0 = off"
        )
        if self.branch_below > 0.0 and self.shape != "delayed":
            raise ValueError(
                f"{owner}.branch_below = {self.branch_below}: the dynamic delay needs shape delayed, not {self.shape}"
            )
        if self.shape in ("iid", "delayed"):
            trunk = self.trunk_len if self.shape == "delayed" else 0
            nodes = 1 + trunk + self.num_paths * self.path_len
            if nodes > self.budget:
                raise ValueError(
                    f"{owner}.budget = {self.budget}: a {self.shape} tree of K = {self.num_paths} paths of "
                    f"{self.path_len} (trunk {trunk}) has up to {nodes} nodes; raise the budget or shrink K, L2"
                )

    def as_dict(self) -> dict[str, Any]:
        """The shape fields only where they shape the draft (earlier tree rows keep their config hash)."""
        out = super().as_dict()
        if self.shape not in ("iid", "delayed"):
            del out["num_paths"], out["path_len"]
        if self.shape != "delayed":
            del out["trunk_len"]
        if self.branch_below == 0.0:
            del out["branch_below"]
        if self.shape == "tree":
            del out["shape"]
        return out


class NgramDistributionTable:
    """n-gram context (orders 1..max_order) -> top-K (tokens, logits) of the target after it."""

    def __init__(self, max_order: int, k: int) -> None:
        self.max_order = max_order
        self.k = k
        self.entries: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[float, ...]]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def update(self, contexts: Sequence[Sequence[int]], logits: torch.Tensor) -> None:
        """contexts[i]: tokens up to node i; logits[i]: the target's logits after it. One top-K and one
        transfer; later rows overwrite earlier ones.
        """
        if not contexts:
            return
        top = torch.topk(logits.float(), min(self.k, logits.shape[-1]), dim=-1)
        ids, values = top.indices.tolist(), top.values.tolist()
        for context, row_ids, row_values in zip(contexts, ids, values, strict=True):
            entry = (tuple(row_ids), tuple(row_values))
            for order in range(1, min(self.max_order, len(context)) + 1):
                self.entries[tuple(context[-order:])] = entry

    def lookup(self, context: Sequence[int]) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
        for order in range(min(self.max_order, len(context)), 0, -1):
            entry = self.entries.get(tuple(context[-order:]))
            if entry is not None:
                return entry
        return None


def proposal(logits: Sequence[float], temperature: float, top_k: int = 0, top_p: float = 1.0) -> list[float]:
    """q over the stored tokens (given in descending logit order): softmax(logits / T), top-k and
    top-p as the target's warp, renormalised; T = 0 scores with T = 1."""
    t = temperature if temperature > 0 else 1.0
    scaled = [v / t for v in logits]
    if 0 < top_k < len(scaled):
        scaled = [v if i < top_k else -math.inf for i, v in enumerate(scaled)]
    peak = max(scaled)
    weights = [math.exp(v - peak) for v in scaled]
    total = sum(weights)
    probs = [w / total for w in weights]
    if top_p < 1.0:
        kept, before = [], 0.0
        for pr in probs:
            kept.append(pr if before < top_p else 0.0)
            before += pr
        total = sum(kept)
        probs = [pr / total for pr in kept]
    return probs


def gumbel_order(probs: Sequence[float], rng: random.Random) -> list[int]:
    """Indices in the order of a sequential sample without replacement from `probs` (zero-
    probability entries left out): the Gumbel-top-k trick, argsort of log p + Gumbel noise."""
    keys = [
        (math.log(p) - math.log(-math.log(rng.random() or 5e-324)), i) for i, p in enumerate(probs) if p > 0.0
    ]
    return [i for _, i in sorted(keys, reverse=True)]


class StandDrafter(RunLongTable, Drafter):
    """STAND: sampled n-gram drafts verified with their proposal q; keyword arguments are `StandConfig`'s
    fields."""

    samples_drafts = True
    sizes_itself = True  # budget=auto: sized while drawing (`use_latency`), never cut after the draws
    config_class = StandConfig
    name = "stand"

    def __init__(self, name: str | None = None, **hyperparameters: Any) -> None:
        super().__init__(name=self.name if name is None else name)
        self.cfg = cfg = StandConfig(**hyperparameters)
        self.budget, self.max_depth, self.k = cfg.budget, cfg.max_depth, cfg.k
        self.prefill_harvest, self.persistent_table = cfg.prefill_harvest, cfg.persistent_table
        self.max_children = 1 if cfg.shape == "chain" else cfg.max_children
        self.max_order = cfg.max_order
        self.table: NgramDistributionTable | None = None
        self._rng = random.Random(0)
        self._latency: Callable[[int], float] | None = None
        self._committed_tail: list[int] = []

    def draft_shape(self) -> str:
        return self.cfg.shape

    @property
    def needs_prefill_logits(self) -> bool:  # type: ignore[override]
        return self.prefill_harvest

    def config(self) -> dict[str, Any]:
        return self.cfg.as_dict()

    def use_latency(self, latency: Callable[[int], float]) -> None:
        """budget=auto: size each tree while drawing it with this latency, not cutting it afterwards."""
        self._latency = latency

    def set_sampling(self, sampling, seed: int) -> None:
        super().set_sampling(sampling, seed)
        self._rng = random.Random(derive_seed(seed, "stand-drafts"))

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        if self.table is None or not self.persistent_table:
            self.table = NgramDistributionTable(self.max_order, self.k)
        if self.prefill_harvest and prefill_logits.shape[0] == len(prompt_ids):
            contexts = [prompt_ids[max(0, j - self.max_order + 1) : j + 1] for j in range(len(prompt_ids))]
            self.table.update(contexts, prefill_logits)

    def propose(self, committed: list[int]) -> DraftTree:
        tail = committed[-self.max_order :]
        self._committed_tail = tail
        tree = self._build_paths(tail) if self.cfg.shape in ("iid", "delayed") else self._build(tail)
        self.route = "ar" if len(tree) == 1 else "tree"
        return tree

    def observe(self, tree: DraftTree, outcome: VerifyOutcome) -> None:
        if self.table is None:
            return
        contexts: list[list[int]] = []
        for i in range(len(tree)):
            path: list[int] = []
            node = i
            while node > 0 and len(path) < self.max_order:
                path.append(tree.tokens[node])
                node = tree.parents[node]
            need = self.max_order - len(path)
            if need > 0:  # the anchor, then the committed tokens before it
                path.append(tree.tokens[0])
                if need > 1:
                    path.extend(reversed(self._committed_tail[:-1][-(need - 1) :]))
            contexts.append(path[::-1])
        self.table.update(contexts, outcome.logits)

    def _proposal_at(self, context: Sequence[int]) -> tuple[tuple[int, ...], list[float]] | None:
        entry = self.table.lookup(context) if self.table is not None else None
        if entry is None:
            return None
        s = self.sampling
        return entry[0], proposal(entry[1], s.temperature, s.top_k, s.top_p)

    def _worth_growing(self, size: int, expected: float, slots: list[tuple[float, int, int]]) -> bool:
        """budget=auto: does some number m of the best open slots raise expected tokens / second?
        (Uses only what is known before the next draw.)"""
        if self._latency is None:
            return True
        now = (1.0 + expected) / self._latency(size)
        gain = 0.0
        for m, (neg_score, _, _) in enumerate(heapq.nsmallest(self.budget - size, slots), start=1):
            gain -= neg_score
            if (1.0 + expected + gain) / self._latency(size + m) > now:
                return True
        return False

    def _build(self, tail: list[int]) -> DraftTree:
        anchor = tail[-1]
        sampled = not self.sampling.greedy
        tree = DraftTree.single(anchor)
        proposals: list[Any] = [None]
        contexts: list[list[int]] = [tail]
        values = [1.0]
        state: dict[int, dict[str, Any]] = {}  # per expandable node: q, draw order, next rank
        slots: list[tuple[float, int, int]] = []  # (-score, tie-break, node)

        def open_node(node: int) -> None:
            if tree.depths[node] >= self.max_depth:
                return
            found = self._proposal_at(contexts[node])
            if found is None:
                return
            ids, q = found
            order = gumbel_order(q, self._rng) if sampled else [i for i, p in enumerate(q) if p > 0.0]
            if not order:
                return
            state[node] = {"ids": ids, "q": q, "order": order[: self.max_children], "next": 0}
            proposals[node] = (ids, tuple(q)) if sampled else None
            heapq.heappush(slots, (-values[node] * _match_mass(q, ()), len(tree) * 64, node))

        open_node(0)
        expected = 0.0
        while slots and len(tree) < self.budget:
            if not self._worth_growing(len(tree), expected, slots):
                break
            _, _, node = heapq.heappop(slots)
            st = state[node]
            index = st["order"][st["next"]]
            st["next"] += 1
            token = st["ids"][index]
            child = tree.add(token, node, BRANCH)
            proposals.append(None)
            values.append(values[node] * st["q"][index])
            expected += values[-1]
            contexts.append([*contexts[node], token][-self.max_order :])
            if st["next"] < len(st["order"]):
                taken = tuple(st["order"][: st["next"]])
                score = values[node] * _match_mass(st["q"], taken)
                heapq.heappush(slots, (-score, node * 64 + st["next"], node))
            open_node(child)
        if sampled and len(tree) > 1:
            tree.proposals = proposals
        return tree

    def _build_paths(self, tail: list[int]) -> DraftTree:
        """K i.i.d. paths of L2 draws (after a trunk of L1 when delayed), merged into their trie; a context
        the table does not know ends its path there. At T = 0: the trunk's argmax, then the K best distinct
        first tokens each followed by argmaxes (deterministic, no paths)."""
        cfg, sampled = self.cfg, not self.sampling.greedy
        tree = DraftTree.single(tail[-1])
        proposals: list[Any] = [None]
        contexts: list[list[int]] = [tail]
        found: dict[int, Any] = {}

        def step(node: int, rank: int = 0) -> int | None:
            if node not in found:
                found[node] = self._proposal_at(contexts[node])
            if found[node] is None:
                return None
            ids, q = found[node]
            if sampled:
                index = _draw(q, self._rng)
            else:
                ranked = [i for i, p in enumerate(q) if p > 0.0]
                if rank >= len(ranked):
                    return None
                index = ranked[rank]
            token = ids[index]
            proposals[node] = (ids, tuple(q)) if sampled else None
            for child in range(node + 1, len(tree)):
                if tree.parents[child] == node and tree.tokens[child] == token:
                    return child
            child = tree.add(token, node, BRANCH)
            proposals.append(None)
            contexts.append([*contexts[node], token][-self.max_order :])
            return child

        branch = 0
        for _ in range(cfg.trunk_len if cfg.shape == "delayed" else 0):
            if cfg.branch_below > 0.0:  # decided on this node's own q, before any child of it is drawn
                if branch not in found:
                    found[branch] = self._proposal_at(contexts[branch])
                if found[branch] is not None and max(found[branch][1]) < cfg.branch_below:
                    break
            nxt = step(branch)
            if nxt is None:
                return self._finish(tree, proposals, None, sampled)
            branch = nxt
        if cfg.shape == "delayed":
            self.count(f"branch_depth_{tree.depths[branch]}")  # where the paths branched (stats)
        paths = []
        for k in range(cfg.num_paths):
            node, path = branch, []
            for depth in range(cfg.path_len):
                nxt = step(node, k if depth == 0 else 0)
                if nxt is None:
                    break
                node = nxt
                path.append(node)
            paths.append(tuple(path))
        return self._finish(tree, proposals, paths, sampled)

    @staticmethod
    def _finish(tree: DraftTree, proposals: list[Any], paths: list[tuple[int, ...]] | None, sampled: bool):
        if sampled and len(tree) > 1:
            tree.proposals = proposals
            tree.paths = paths
        return tree


def _draw(q: Sequence[float], rng: random.Random) -> int:
    """An index drawn from q (inverse CDF; the last positive entry absorbs rounding)."""
    u, acc, last = rng.random(), 0.0, 0
    for i, p in enumerate(q):
        if p > 0.0:
            acc += p
            last = i
            if u < acc:
                return i
    return last


def _match_mass(q: Sequence[float], taken: Sequence[int]) -> float:
    """Σ_x q_i(x) q(x): q_i = q without the indices already drawn (`taken`), renormalised."""
    left = [0.0 if i in taken else p for i, p in enumerate(q)]
    total = sum(left)
    return sum(a * b for a, b in zip(left, q, strict=True)) / total if total > 0 else 0.0
