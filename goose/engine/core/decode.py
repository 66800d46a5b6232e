"""The decode loop: one prompt, one drafter, one engine; records what every step did.

τ = generated tokens / target forward calls, the prefill counted as one call (docs/paper.md, Definitions).
Between `propose` and `verify` the run's `TreeSizer` sizes the tree (budget=fixed: as proposed; budget=auto:
goose.engine.budget.auto_budget), whose gate may take a step without drafting: the anchor alone is verified
and the drafter hears of it through `observe_plain` (route "ar"), as of a draft cut to the anchor alone under
a sizer without `plain_learns` (`TreeSizer.plain_step`). Wall time starts before the prefill and before
`drafter.begin`. A step's time splits into draft (propose and sizing), forward (up to the host sync), walk
(walk, stop rules, compaction) and update (what the drafter and the sizer learn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from goose.engine.core.draft_forward import DraftForward
from goose.engine.core.drafter import Drafter, VerifyOutcome
from goose.engine.core.sampling import GREEDY, SamplingParams
from goose.engine.core.sizing import StepTiming, TreeSizer
from goose.engine.core.tree import DRAFT_SOURCES, SOURCE_NAMES, DraftTree
from goose.engine.core.verifier import VerificationEngine, sync_clock


@dataclass
class StepRecord:
    """One verification step: route, tree size, per-source offered/accepted, timings (seconds)."""

    route: str
    tree_size: int
    accepted_len: int  # drafted tokens accepted (bonus excluded)
    new_tokens: int  # tokens committed (accepted + bonus, after the EOS / budget cut)
    offered: dict[str, int]
    accepted: dict[str, int]
    draft_s: float
    verify_s: float  # forward_s + walk_s
    update_s: float
    forward_s: float = 0.0  # inputs + mask + forward + argmax (up to the host sync)
    walk_s: float = 0.0  # greedy walk + stop rules + KV compaction
    # drafted / accepted nodes per tree depth (index d-1 for depth d) and per sibling rank (index
    # r: the (r+1)-th child of its parent in node order), from `shape_counts`
    depth_offered: list[int] = field(default_factory=list)
    depth_accepted: list[int] = field(default_factory=list)
    rank_offered: list[int] = field(default_factory=list)
    rank_accepted: list[int] = field(default_factory=list)
    drafted: bool = True  # False: the sizer took a plain AR step (no propose; budget=auto's gate)
    cut_to_anchor: bool = False  # the draft cut to the anchor, by the sizer or the drafter (`draft_step`)


SHAPE_FIELDS = ("depth_offered", "depth_accepted", "rank_offered", "rank_accepted")


def shape_counts(parents: Sequence[int], accepted_nodes: Sequence[int]) -> dict[str, list[int]]:
    """Drafted and accepted nodes of one verified tree per depth and per sibling rank (the
    `SHAPE_FIELDS` of a StepRecord), from its parent array and its accepted path (root first). The
    anchor (node 0) is no draft and is not counted; a node's sibling rank is its place among its
    parent's children in node order (0 = the first child)."""
    n = len(parents)
    depth, rank, kids = [0] * n, [0] * n, [0] * n
    for i in range(1, n):
        p = parents[i]
        depth[i], rank[i] = depth[p] + 1, kids[p]
        kids[p] += 1
    out = {name: [] for name in SHAPE_FIELDS}
    if n < 2:
        return out
    out["depth_offered"] = [0] * max(depth)
    out["rank_offered"] = [0] * (max(rank[1:]) + 1)
    out["depth_accepted"] = [0] * len(out["depth_offered"])
    out["rank_accepted"] = [0] * len(out["rank_offered"])
    for i in range(1, n):
        out["depth_offered"][depth[i] - 1] += 1
        out["rank_offered"][rank[i]] += 1
    for i in accepted_nodes[1:]:
        out["depth_accepted"][depth[i] - 1] += 1
        out["rank_accepted"][rank[i]] += 1
    return out


def draft_step(
    drafter: Drafter, sizer: TreeSizer, committed: list[int], depth: int
) -> tuple[DraftTree, str, bool, bool]:
    """One step's tree, cut to `depth`: the drafter's proposal as the sizer sizes it, or the anchor alone when
    the sizer takes a plain AR step. Returns (tree, route, drafted, cut to the anchor: the sizer cut the
    proposal to the anchor alone, or the drafter kept the anchor alone and needs nothing from its logits,
    `Drafter.kept_anchor_alone`)."""
    sizer.start_step(committed)
    if not sizer.drafts():
        return DraftTree.single(committed[-1]), "ar", False, False
    proposed = drafter.propose(committed)
    sized = sizer.size(proposed)
    route = drafter.route if len(sized) > 1 or len(proposed) == 1 else "ar"  # cut to the anchor: AR
    cut = len(sized) == 1 and (len(proposed) > 1 or drafter.kept_anchor_alone)
    return sized.truncate_depth(depth), route, True, cut


def step_record(
    tree: DraftTree,
    outcome: VerifyOutcome,
    route: str,
    drafted: bool,
    draft_s: float,
    verify_s: float,
    update_s: float,
    forward_s: float,
    cut_to_anchor: bool = False,
) -> StepRecord:
    """The `StepRecord` of one verified `tree`: per-source offered / accepted counts, shape counts, seconds."""
    draft_sources = tree.sources[: tree.acceptable]  # node 0 is ROOT; nodes past accept_limit are no drafts
    path_sources = [tree.sources[node] for node in outcome.accepted_nodes[1:]]
    return StepRecord(
        route=route,
        tree_size=len(tree),
        accepted_len=len(outcome.accepted_nodes) - 1,
        new_tokens=len(outcome.new_tokens),
        offered={SOURCE_NAMES[s]: draft_sources.count(s) for s in DRAFT_SOURCES},
        accepted={SOURCE_NAMES[s]: path_sources.count(s) for s in DRAFT_SOURCES},
        draft_s=draft_s,
        verify_s=verify_s,
        update_s=update_s,
        forward_s=forward_s,
        walk_s=max(verify_s - forward_s, 0.0),
        drafted=drafted,
        cut_to_anchor=cut_to_anchor,
        # drafted nodes only: those past accept_limit (Lookahead's Jacobi nodes) are never drafts
        **shape_counts(tree.parents[: tree.acceptable], outcome.accepted_nodes),
    )


def _add_counts(total: list[int], counts: list[int]) -> None:
    """total += counts, elementwise, growing total as needed."""
    total.extend([0] * (len(counts) - len(total)))
    for i, c in enumerate(counts):
        total[i] += c


@dataclass
class Generation:
    output_ids: list[int]
    forward_calls: int
    wall_time_s: float
    prefill_s: float
    steps: list[StepRecord] = field(default_factory=list)
    drafter_stats: dict[str, Any] = field(default_factory=dict)
    stop: str = "max_new_tokens"  # why it ended: max_new_tokens, eos, or context (window full)
    # CUDA graphs captured inside this prompt's wall time, and their seconds.
    graph_captures: int = 0
    graph_capture_s: float = 0.0

    @property
    def tau(self) -> float:
        """τ: generated tokens per target forward call (prefill included)."""
        return len(self.output_ids) / self.forward_calls if self.forward_calls else 0.0

    def totals(self, what: str) -> dict[str, int]:
        """Summed per-source counts over the steps; what = 'offered' or 'accepted'."""
        out = {SOURCE_NAMES[s]: 0 for s in DRAFT_SOURCES}
        for step in self.steps:
            for name, n in getattr(step, what).items():
                out[name] += n
        return out

    def shape_totals(self) -> dict[str, list[int]]:
        """The `SHAPE_FIELDS` summed over the steps (acceptance by depth and by sibling rank)."""
        out: dict[str, list[int]] = {name: [] for name in SHAPE_FIELDS}
        for step in self.steps:
            for name in SHAPE_FIELDS:
                _add_counts(out[name], getattr(step, name))
        return out

    def time_split(self) -> dict[str, float]:
        """Total seconds per phase: prefill, draft, verify (= forward + walk), update."""
        return {
            "prefill_s": self.prefill_s,
            "draft_s": sum(s.draft_s for s in self.steps),
            "verify_s": sum(s.verify_s for s in self.steps),
            "update_s": sum(s.update_s for s in self.steps),
            "forward_s": sum(s.forward_s for s in self.steps),
            "walk_s": sum(s.walk_s for s in self.steps),
        }

    def overhead_share(self) -> float:
        """Share of the steps' time outside the verification forward: what a faster engine cannot hide."""
        steps = sum(s.draft_s + s.verify_s + s.update_s for s in self.steps)
        return (steps - sum(s.forward_s for s in self.steps)) / steps if steps else 0.0

    def routes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.steps:
            counts[s.route] = counts.get(s.route, 0) + 1
        return counts


_clock = sync_clock  # time.perf_counter() after synchronising CUDA


StepCallback = Callable[[DraftTree, VerifyOutcome, StepRecord], None]


def generate(
    engine: VerificationEngine,
    drafter: Drafter,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    on_step: StepCallback | None = None,
    sampling: SamplingParams | None = None,
    seed: int = 0,
    sizer: TreeSizer | None = None,
) -> Generation:
    """Speculative generation of up to `max_new_tokens` tokens (stop at EOS, kept), greedy or sampled at
    `sampling.temperature` > 0 with this sequence's `seed`, each tree sized by `sizer` (None: verified as
    proposed). `on_step(tree, outcome, record)` runs inside the prompt's wall time, so it must be cheap.
    """
    device = engine.device
    if max_new_tokens <= 0:
        return Generation(
            output_ids=[], forward_calls=0, wall_time_s=0.0, prefill_s=0.0, stop="max_new_tokens"
        )
    sampling = sampling or GREEDY
    sizer = TreeSizer() if sizer is None else sizer
    static = engine.static
    captures_before = (static.captures, static.capture_s) if static is not None else (0, 0.0)
    t_start = _clock(device)
    drafter.set_sampling(sampling, seed)
    topk = drafter.logits_topk if sampling.greedy else 0
    engine.topk_width = topk
    prefill_logits = engine.prefill(
        prompt_ids,
        max_new_tokens=max_new_tokens,
        all_logits=drafter.needs_prefill_logits,
        sampling=sampling,
        seed=seed,
    )
    first = engine.first_token
    t_prefill = _clock(device)
    if drafter.needs_draft_forward:  # a self-draft: skipped forwards over this cache
        drafter.use_draft_forward(DraftForward(engine))
    sizer.begin(drafter)
    drafter.begin(list(prompt_ids), prefill_logits)
    del prefill_logits
    committed = [*prompt_ids, first]
    output = [first]
    steps: list[StepRecord] = []
    eos = set(engine.eos_token_ids)
    forward_calls = 1
    stop = "max_new_tokens"
    sizer_s = 0.0  # the sizer's observe of the step before, charged to the next step's timing
    while len(output) < max_new_tokens:
        if output[-1] in eos:
            stop = "eos"
            break
        room = engine.context_length - 1 - engine.prefix_len  # deepest position a node may take
        if room < 0:  # the anchor itself has no position left: the window is full
            stop = "context"
            break
        budget = max_new_tokens - len(output)
        t0 = _clock(device)
        # Cut a tree deeper than the window or the tokens still wanted (depth d commits at most d + 1 tokens);
        # a drafter that `verifies_full_tree` is cut to the window only.
        depth = room if drafter.verifies_full_tree else min(room, budget - 1)
        tree, route, drafted, cut = draft_step(drafter, sizer, committed, depth)
        t1 = _clock(device)
        plain = sizer.plain_step(drafted, cut)
        engine.topk_width = topk if not plain or sizer.plain_learns else 0  # else AR's step exactly
        outcome = engine.verify(tree, budget=budget)
        t2 = _clock(device)
        if plain:
            drafter.observe_plain(committed, outcome, sizer.plain_learns)
        else:
            drafter.observe(tree, outcome)
        t_update = _clock(device)
        sizer.observe(tree, outcome, StepTiming(t1 - t0, t2 - t1, t_update - t2, sizer_s, drafted))
        t3 = _clock(device)
        sizer_s = t3 - t_update
        forward_calls += 1
        forward_s = min(engine.last_forward_s, t2 - t1)
        record = step_record(tree, outcome, route, drafted, t1 - t0, t2 - t1, t3 - t2, forward_s, cut)
        steps.append(record)
        if on_step is not None:
            on_step(tree, outcome, record)
        output.extend(outcome.new_tokens)
        committed.extend(outcome.new_tokens)
    drafter.end()
    sizer_stats = sizer.end()
    t_end = _clock(device)
    if stop == "max_new_tokens" and output[-1] in eos:
        stop = "eos"
    captures_after = (static.captures, static.capture_s) if static is not None else (0, 0.0)
    return Generation(
        output_ids=output,
        stop=stop,
        graph_captures=captures_after[0] - captures_before[0],
        graph_capture_s=captures_after[1] - captures_before[1],
        forward_calls=forward_calls,
        wall_time_s=t_end - t_start,
        prefill_s=t_prefill - t_start,
        steps=steps,
        drafter_stats={**drafter.stats, **sizer_stats},
    )
