"""The fields of a result row that a run measures or records about itself: the environment (hardware,
versions, git commit), the generation's counts and timings, and a sample of its draft trees.
The row's schema is `goose.records.row`.
"""

from __future__ import annotations

import os
import platform
import subprocess
import uuid
from pathlib import Path
from typing import Any

import torch

from goose.engine.budget.latency_cache import cpu_model
from goose.engine.core.decode import Generation
from goose.engine.core.tree import DraftTree
from goose.engine.core.verify.expected import accepted_length_law, applicable, reach
from goose.engine.forward.packed_linear import native_bf16
from goose.records.code_state import code_state

SESSION_ID = uuid.uuid4().hex[:12]


def environment() -> dict[str, Any]:
    """Hardware, library versions and git commit, recorded in every row."""
    import transformers

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=Path(__file__).resolve().parent, timeout=5
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        commit = commit + ("-dirty" if dirty else "") if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "hardware": {
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            # the widest vector ISA torch dispatches to, and whether oneDNN has bf16 kernels here
            # (without them bf16 products run as fp32, goose.engine.forward.packed_linear)
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "onednn_bf16": native_bf16(),
            "torch_threads": torch.get_num_threads(),
            "gpu": gpu,
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "git_commit": commit,
        "code_state": code_state(),
        "session_id": SESSION_ID,
    }


def sample_tree(gen_trees: list[tuple[DraftTree, list[int]]]) -> dict[str, Any] | None:
    """The largest tree among the recorded ones, as plain lists (for the topology figure)."""
    if not gen_trees:
        return None
    tree, accepted = max(gen_trees, key=lambda ta: len(ta[0]))
    return {
        "tokens": tree.tokens,
        "parents": tree.parents,
        "sources": tree.sources,
        "depths": tree.depths,
        "accepted": accepted,
    }


class TreeSampler:
    """A step callback that keeps the trees of the first `keep` steps of a prompt (for the
    topology figure) with their accepted paths, and every sampled draft's tree as its verifier saw it
    (`views`, for `exact_fields` after the generation: nothing is computed inside the timed loop)."""

    def __init__(self, keep: int = 16) -> None:
        self.keep, self.trees, self.views = keep, [], []

    def __call__(self, tree: DraftTree, outcome: Any, record: Any) -> None:
        if len(self.trees) < self.keep:
            self.trees.append((tree, outcome.accepted_nodes))
        if outcome.view is not None:
            self.views.append(outcome.view)


def exact_fields(views: list[Any]) -> dict[str, Any]:
    """The row's exact_* fields from the sampled drafts' trees: per verifier exact on every one of them,
    Σ E[accepted] and Σ P(accepted ≥ d) (goose.engine.core.verify.expected); {} without sampled drafts."""
    if not views:
        return {}
    verifiers = [v for v in applicable(views[0]) if all(v in applicable(t) for t in views[1:])]
    accepted: dict[str, float] = {}
    by_depth: dict[str, list[float]] = {}
    for verifier in verifiers:
        total, depth = 0.0, []
        for view in views:
            law = accepted_length_law(verifier, view)
            total += sum(k * p for k, p in enumerate(law))
            for d, p in enumerate(reach(law)):
                if d == len(depth):
                    depth.append(0.0)
                depth[d] += p
        accepted[verifier] = round(total, 9)
        by_depth[verifier] = [round(x, 9) for x in depth]
    return {"exact_steps": len(views), "exact_accepted": accepted, "exact_reach": by_depth}


def generation_row(gen: Generation) -> dict[str, Any]:
    """The measured fields of a row."""
    n = len(gen.output_ids)
    return {
        "generated_tokens": n,
        "forward_calls": gen.forward_calls,
        "tau": gen.tau,
        "wall_time_s": gen.wall_time_s,
        "tokens_per_s": n / gen.wall_time_s if gen.wall_time_s else 0.0,
        **gen.time_split(),
        "offered": gen.totals("offered"),
        "accepted": gen.totals("accepted"),
        "routes": gen.routes(),
        "step_accepted": [s.accepted_len for s in gen.steps],
        "step_tree_size": [s.tree_size for s in gen.steps],
        **gen.shape_totals(),  # acceptance by depth and sibling rank (goose.records.acceptance)
        "drafter_stats": gen.drafter_stats,
        "stop": gen.stop,
        "graph_captures": gen.graph_captures,
        "graph_capture_s": gen.graph_capture_s,
        "output_ids": gen.output_ids,
    }
