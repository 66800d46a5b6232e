"""A closed loop of requests through the batched engine at a fixed concurrency (continuous batching): up to
`concurrency` requests are active; each step every active request drafts its own tree (its own drafter and
sizer), the batch is verified in one forward, and a finished request's slot is given to the next waiting
one before the following step. Each request's output is what batch-1 decoding would give (docs/batching.md).

Per request: a `Generation` (wall time from its admission to its last token) and its first-token and
finish times; per step of the batch: a `BatchStep`. Every request gets a fresh drafter and sizer from
`make_speculator`. `batch_state` "isolated": nothing learnt in one request reaches another; "shared": every
request's drafter reads and writes the first request's run-long state (Token Recycling's table,
SuffixDecoding's global tree; `Drafter.share_run_state`), as one server-wide table would; sizers stay per
request.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from goose.engine.batch.budget import POLICIES, batch_cap
from goose.engine.batch.engine import BatchEngine
from goose.engine.budget.auto_budget import AutoBudget, prefix_tree
from goose.engine.core.decode import Generation, StepRecord, draft_step, step_record
from goose.engine.core.drafter import Drafter
from goose.engine.core.sampling import GREEDY, SamplingParams
from goose.engine.core.sizing import Speculator, StepTiming
from goose.engine.core.tree import DraftTree
from goose.engine.core.verifier import sync_clock

# Where run-long drafter state lives across the requests of a batch (`serve`'s batch_state).
BATCH_STATES = ("isolated", "shared")


@dataclass(frozen=True)
class Request:
    """One request: its prompt's token ids, how many tokens it wants and its sampling seed."""

    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    seed: int = 0


@dataclass(frozen=True)
class BatchStep:
    """One forward of the batch: requests in it, verified nodes (Σ n_b) and padded rows (k · n_max), seconds of
    drafting (all requests), the forward (to the host sync), the walks and compaction, and the updates."""

    active: int
    nodes: int
    padded: int
    accepted: int  # drafted tokens accepted over the batch
    draft_s: float
    forward_s: float
    walk_s: float
    update_s: float
    cap: int = 0  # budget_policy "batch": the common cap on every tree's size (0: none)


@dataclass
class Served:
    """A closed-loop run: each request's `Generation` (request order) with its admission, first-token and
    finish times (seconds from the run's start), the batch's steps and the run's wall time."""

    generations: list[Generation]
    admitted_s: list[float]
    first_token_s: list[float]
    finished_s: list[float]
    steps: list[BatchStep] = field(default_factory=list)
    wall_time_s: float = 0.0

    @property
    def output_tokens(self) -> int:
        return sum(len(g.output_ids) for g in self.generations)

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second of the whole batch (prefills included in the time)."""
        return self.output_tokens / self.wall_time_s if self.wall_time_s else 0.0

    def request_tpot_s(self, i: int) -> float | None:
        """Request i's seconds per output token after its first (TPOT); None for a request of one token."""
        tokens = len(self.generations[i].output_ids)
        return (self.finished_s[i] - self.first_token_s[i]) / (tokens - 1) if tokens > 1 else None

    def tpot_s(self) -> list[float]:
        """Every request's TPOT; requests of one token are left out."""
        return [t for i in range(len(self.generations)) if (t := self.request_tpot_s(i)) is not None]


@dataclass
class _Live:
    """An active request as the loop tracks it."""

    index: int
    speculator: Speculator
    prompt_len: int
    max_new_tokens: int
    committed: list[int]
    output: list[int]
    admitted: float
    first_token: float
    prefill_s: float
    steps: list[StepRecord] = field(default_factory=list)
    stop: str = ""


def _cap_trees(live: list[_Live], trees: list[DraftTree]) -> tuple[list[DraftTree], int]:
    """Every tree cut to the batch's common cap (goose.engine.batch.budget.batch_cap)."""
    sizers = [r.speculator.sizer for r in live]
    expected = [s.expected_tokens(t) for s, t in zip(sizers, trees, strict=True)]
    cap = batch_cap(expected, sizers[0].step_latency)
    return [prefix_tree(t, cap) if t.acceptable > cap else t for t in trees], cap


def serve(
    engine: BatchEngine,
    make_speculator: Callable[[], Speculator],
    requests: Sequence[Request],
    concurrency: int,
    sampling: SamplingParams | None = None,
    budget_policy: str = "per_request",
    batch_state: str = "isolated",
) -> Served:
    """Run `requests` in order through `engine` with at most `concurrency` active at once. `budget_policy`:
    "per_request" (each tree as its own sizer sizes it) or "batch" (every tree then cut to the common cap of
    goose.engine.batch.budget, which needs budget=auto's sizer on every request). `batch_state`: "isolated"
    or "shared" (module docstring; ValueError for a drafter whose run-long state cannot be shared)."""
    if budget_policy not in POLICIES:
        raise ValueError(f"budget_policy = {budget_policy!r}: choose from {', '.join(POLICIES)}")
    if batch_state not in BATCH_STATES:
        raise ValueError(f"batch_state = {batch_state!r}: choose from {', '.join(BATCH_STATES)}")
    if not 1 <= concurrency <= engine.cache.slots:
        raise ValueError(
            f"concurrency must lie in [1, {engine.cache.slots}] (the engine's slots), got {concurrency}"
        )
    sampling = sampling or GREEDY
    device = engine.device
    eos = set(engine.eos_token_ids)
    n = len(requests)
    generations: list[Generation | None] = [None] * n
    admitted, first_token, finished = [0.0] * n, [0.0] * n, [0.0] * n
    pending = deque(range(n))
    live: list[_Live] = []
    batch_steps: list[BatchStep] = []
    owner: list[Drafter] = []  # batch_state "shared": the drafter whose run-long state every request uses
    t_start = sync_clock(device)

    def admit(i: int) -> None:
        request = requests[i]
        speculator = make_speculator()
        drafter, sizer = speculator.drafter, speculator.sizer
        if budget_policy == "batch" and not isinstance(sizer, AutoBudget):
            raise ValueError(
                "budget_policy=batch weighs each request's nodes by budget=auto's acceptance model"
            )
        if drafter.needs_draft_forward:
            raise ValueError(
                "concurrency > 1: a self-draft (draft forwards over the target's cache) is not batched"
            )
        if batch_state == "shared":
            drafter.check_shareable()
            if owner:
                drafter.share_run_state(owner[0])
            else:
                owner.append(drafter)
        t0 = sync_clock(device)
        drafter.set_sampling(sampling, request.seed)
        _, logits, first = engine.admit(
            request.prompt_ids, request.max_new_tokens, drafter.needs_prefill_logits, sampling, request.seed
        )
        t1 = sync_clock(device)
        sizer.begin(drafter)
        drafter.begin(list(request.prompt_ids), logits)
        live.append(
            _Live(
                i,
                speculator,
                len(request.prompt_ids),
                request.max_new_tokens,
                [*request.prompt_ids, first],
                [first],
                t0 - t_start,
                t1 - t_start,
                t1 - t0,
            )
        )

    def stop_reason(r: _Live, slot: int) -> str:
        if r.output[-1] in eos:
            return "eos"
        if len(r.output) >= r.max_new_tokens:
            return "max_new_tokens"
        if engine.context_length - 1 - engine.prefix_len(slot) < 0:
            return "context"
        return ""

    def retire(slot: int) -> None:
        r = live[slot]
        r.speculator.drafter.end()
        sizer_stats = r.speculator.sizer.end()
        t_end = sync_clock(device) - t_start
        generations[r.index] = Generation(
            output_ids=r.output,
            forward_calls=1 + len(r.steps),
            wall_time_s=t_end - r.admitted,
            prefill_s=r.prefill_s,
            steps=r.steps,
            drafter_stats={**r.speculator.drafter.stats, **sizer_stats},
            stop=r.stop,
        )
        admitted[r.index], first_token[r.index], finished[r.index] = r.admitted, r.first_token, t_end
        engine.release(slot)
        live[slot] = live[-1]
        live.pop()

    while True:
        while pending and len(live) < concurrency:
            i = pending.popleft()
            if requests[i].max_new_tokens <= 0:
                generations[i] = Generation(output_ids=[], forward_calls=0, wall_time_s=0.0, prefill_s=0.0)
                continue
            admit(i)
        done = False
        for slot in reversed(range(len(live))):
            live[slot].stop = stop_reason(live[slot], slot)
            if live[slot].stop:
                retire(slot)
                done = True
        if done and pending:
            continue
        if not live:
            break
        t0 = sync_clock(device)
        trees, budgets, routes, draft_s = [], [], [], []
        for slot, r in enumerate(live):
            ts = sync_clock(device)
            room = engine.context_length - 1 - engine.prefix_len(slot)
            budget = r.max_new_tokens - len(r.output)
            drafter = r.speculator.drafter
            depth = room if drafter.verifies_full_tree else min(room, budget - 1)
            tree, route, drafted, cut = draft_step(drafter, r.speculator.sizer, r.committed, depth)
            trees.append(tree)
            budgets.append(budget)
            routes.append((route, drafted, cut))
            draft_s.append(sync_clock(device) - ts)
        cap = 0
        if budget_policy == "batch" and len(trees) > 1:
            trees, cap = _cap_trees(live, trees)
        t1 = sync_clock(device)
        outcomes = engine.verify(trees, budgets)
        t2 = sync_clock(device)
        forward_s = min(engine.last_forward_s, t2 - t1)
        for slot, (r, tree, outcome) in enumerate(zip(live, trees, outcomes, strict=True)):
            tu = sync_clock(device)
            route, drafted, cut = routes[slot]
            sizer = r.speculator.sizer
            if sizer.plain_step(drafted, cut):
                r.speculator.drafter.observe_plain(r.committed, outcome, sizer.plain_learns)
            else:
                r.speculator.drafter.observe(tree, outcome)
            update_s = sync_clock(device) - tu
            sizer.observe(tree, outcome, StepTiming(draft_s[slot], t2 - t1, update_s, 0.0, drafted))
            r.steps.append(
                step_record(tree, outcome, route, drafted, draft_s[slot], t2 - t1, update_s, forward_s, cut)
            )
            r.output.extend(outcome.new_tokens)
            r.committed.extend(outcome.new_tokens)
        t3 = sync_clock(device)
        batch_steps.append(
            BatchStep(
                active=len(trees),
                nodes=sum(len(t) for t in trees),
                padded=len(trees) * max(len(t) for t in trees),
                accepted=sum(len(o.accepted_nodes) - 1 for o in outcomes),
                draft_s=t1 - t0,
                forward_s=forward_s,
                walk_s=t2 - t1 - forward_s,
                update_s=t3 - t2,
                cap=cap,
            )
        )
    wall = sync_clock(device) - t_start
    return Served(generations, admitted, first_token, finished, batch_steps, wall)
