"""What figures and tables call things: benchmarks, models and methods by their readable names, the
orders they are listed in, the method groups of the paper's tables, and hyperparameter labels (no torch)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from goose.records.paper import PAPER_BENCHMARKS

BENCH_ORDER = list(PAPER_BENCHMARKS)
BENCH_NAMES = {
    "humaneval": "HumanEval",
    "mbpp": "MBPP",
    "classeval": "ClassEval",
    "gsm8k": "GSM8K",
    "mtbench": "MT-Bench",
    "alpaca": "Alpaca",
    "cnn_dm": "CNN/DM",
    "spec_bench": "Spec-Bench",
}
MODEL_NAMES = {
    "smollm2-135m": "SmolLM2-135M",
    "gemma3-270m": "Gemma-3-270M",
    "vicuna-7b": "Vicuna-7B",
    "vicuna-13b": "Vicuna-13B",
    "vicuna-33b": "Vicuna-33B",
    "llama3-8b": "Llama-3-8B",
    "qwen3-8b": "Qwen3-8B",
}
# The paper's grid plus the methods beyond it that draw on per-prompt sources only (the suffix
# decoder with a run-long global tree is a separate setting, listed after them).
PAPER_METHODS = ["ar", "pld", "tr", "iso3", "iso5", "eagle2", "goose"]
BEYOND_METHODS = ["sam", "suffix", "opt_tree"]
MAIN_METHODS = PAPER_METHODS[:-1] + BEYOND_METHODS + ["goose"]
ISO_METHODS = ["iso3", "iso5", "iso3_beff", "iso5_beff"]
ABLATIONS = ["goose_no_spine_branches", "goose_no_bigram", "goose_no_consensus", "goose_no_prefill"]
LIKE_FOR_LIKE = ["tr_per_prompt", "goose_persistent"]  # TR / Goose with the other's table lifetime
SAMPLING_METHODS = ["ar", "pld", "tr", "eagle2", "goose", "stand"]  # the sampling grid (cpu_sampling)
METHOD_ORDER = (
    MAIN_METHODS[:-1] + ["suffix_global", "iso3_beff", "iso5_beff", "goose"] + ABLATIONS + LIKE_FOR_LIKE
)
METHOD_NAMES = {
    "ar": "AR",
    "pld": "PLD",
    "tr": "TR",
    "iso3": "Iso-3",
    "iso5": "Iso-5",
    "iso3_beff": "Iso-3 @B_eff",
    "iso5_beff": "Iso-5 @B_eff",
    "eagle2": "EAGLE-2 (adj.)",
    "opt_tree": "OPT-Tree (Goose cand.)",
    "sam": "SAM-Decoding",
    "suffix": "SuffixDecoding",
    "suffix_global": "SuffixDecoding (+global tree)",
    "goose": "Goose",
    "stand": "STAND",
    "goose_no_spine_branches": "Goose w/o spine branches",
    "goose_no_bigram": "Goose w/o bigram",
    "goose_no_consensus": "Goose w/o consensus bypass",
    "goose_no_prefill": "Goose w/o prefill harvest",
    "tr_per_prompt": "TR (per-prompt table)",
    "goose_persistent": "Goose (run-long table)",
}
# Hyperparameter -> the paper's symbol, for labels (others keep their config name).
SYMBOLS = {"budget": "B", "max_depth": "D", "k": "K", "rho": "ρ", "spine_ratio_tiers": "tiers"}


def bench_name(b: str) -> str:
    return BENCH_NAMES.get(b, b)


def model_name(m: str) -> str:
    return MODEL_NAMES.get(m, m)


def method_name(m: str) -> str:
    return METHOD_NAMES.get(m, m)


def order_key(values: Iterable[str], order: list[str]) -> list[str]:
    """`values` deduplicated, the known ones in `order` first, then the rest sorted."""
    vals = list(dict.fromkeys(values))
    known = [v for v in order if v in vals]
    return known + sorted(v for v in vals if v not in order)


def format_value(v: Any) -> str:
    """A hyperparameter value for a label: lists as a/b/c, floats without trailing zeros."""
    if isinstance(v, (list, tuple)):
        return "/".join(format_value(x) for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)
