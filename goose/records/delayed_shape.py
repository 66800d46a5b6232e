"""The delayed tree's (K, L1, L2) per setting from the grid search's rows (experiments/delayed_grid.py):
Thomas et al.'s static a_base (arXiv 2602.16994, §5), the shape with the highest measured tokens/s on the
calibration prompts. The grid search writes its choice with it and analysis/ tables every shape's score.

A shape is scored over the prompts on which AR and every shape of its method have a row, so that each
score covers the same prompts; tokens/s = generated tokens / wall seconds summed over them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

SHAPE_KEYS = ("K", "L1", "L2")


def shape_scores(rows: list[dict[str, Any]]) -> dict[str, dict[tuple[int, ...], dict[str, float]]]:
    """{method: {shape: {tokens_per_s, tau, speedup_over_ar, prompts}}} over each method's common prompts."""
    by_key: dict[tuple[str, tuple[int, ...]], dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        by_key[(r["method"], tuple(r["shape"]))][(r["bench"], str(r["prompt_id"]))] = r
    ar = by_key.pop(("ar", ()), {})
    out: dict[str, dict[tuple[int, ...], dict[str, float]]] = {}
    for method in sorted({m for m, _ in by_key}):
        shapes = {s: runs for (m, s), runs in by_key.items() if m == method}
        common = set(ar).intersection(*shapes.values())
        if not common:
            continue
        ar_speed = sum(ar[p]["generated_tokens"] for p in common) / sum(ar[p]["wall_time_s"] for p in common)
        out[method] = {}
        for shape, runs in sorted(shapes.items()):
            tokens = sum(runs[p]["generated_tokens"] for p in common)
            speed = tokens / sum(runs[p]["wall_time_s"] for p in common)
            out[method][shape] = {
                "tokens_per_s": speed,
                "tau": tokens / sum(runs[p]["forward_calls"] for p in common),
                "speedup_over_ar": speed / ar_speed,
                "prompts": len(common),
            }
    return out


def shape_overrides(fields: list[str] | tuple[str, ...], shape: tuple[int, ...] | list[int]) -> list[str]:
    """Hydra overrides setting (K, L1, L2) = `shape` through a method's own field names for them."""
    return [f"method.drafter.{name}={value}" for name, value in zip(fields, shape, strict=True)]


def choose_shapes(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{method: {"overrides": Hydra overrides of its (K, L1, L2), "shape", score fields}} — the fastest
    shape of each method; `experiments.bench --method-overrides` reads the overrides."""
    fields = {r["method"]: r["shape_fields"] for r in rows if r["method"] != "ar"}
    chosen = {}
    for method, scored in shape_scores(rows).items():
        shape, score = max(scored.items(), key=lambda item: item[1]["tokens_per_s"])
        chosen[method] = {"overrides": shape_overrides(fields[method], shape), "shape": list(shape), **score}
    return chosen
