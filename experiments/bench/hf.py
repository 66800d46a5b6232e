"""transformers' `generate` as a bench contender (hf:greedy / hf:sample, hf:pld): timed around the call,
its row of the runner's fields written through the same `append_row`, its output checked against engine
AR's row of the prompt. It has no drafter to plug into the engine, hence its own adapter."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from experiments.bench.contenders import Contender, Segment, Setting
from experiments.bench.load import BenchPrompt
from goose.engine.core.sampling import SamplingParams, derive_seed
from goose.engine.core.verifier import sync_clock
from goose.harness.cells import SamplingPlan
from goose.harness.rows import environment
from goose.harness.verdicts import lossless_fields
from goose.records.degenerate import degenerate_fields
from goose.records.provenance import chat_template_fields, prompt_fields, seed_fields
from goose.records.results import append_row, cell_key, read_rows

HF_KWARGS = {"greedy": {}, "pld": {"prompt_lookup_num_tokens": 10}}


def _sequence_seed(plan: SamplingPlan, sampling: SamplingParams, prompt_id: str) -> tuple[int | None, int]:
    """(sample_seed, sequence seed) of a prompt's one sample, as the runner derives them."""
    sample_seed = plan.samples(sampling)[0][1]
    return sample_seed, 0 if sample_seed is None else derive_seed(sample_seed, str(prompt_id))


def hf_contender(model: Any, eos: list[int], method: str, **generate_kwargs: Any) -> Contender:
    """transformers' `generate` as a contender: timed from before the call to after it
    (CUDA-synchronised); at temperature > 0 it samples (do_sample, the same temperature / top_p /
    top_k; torch's global seed set from the prompt's sequence seed, outside the timed region). Its
    row has the runner's cell fields, provenance and `output_ids` / `wall_time_s` /
    `generated_tokens` (a `ResultRow`, checked as it is written), compared with engine AR's output of the
    prompt in the reference pass, as every engine contender is (the verdict on a divergence is the runner's
    `lossless_fields`); a row already in the file is returned without running (resume by the same cell key;
    each results file is read once)."""
    config = {"library": "transformers", **generate_kwargs}
    # per results file: its ok rows by cell key, read once
    on_disk: dict[Path, dict[tuple, dict[str, Any]]] = {}

    def run(setting: Setting, segment: Segment, i: int) -> dict[str, Any]:
        repeat, prompts = segment
        p = prompts[i]
        cell = setting.cell(p, method, config)
        path = setting.results_file(repeat, p.bench)
        if path not in on_disk:
            on_disk[path] = {cell_key(r): r for r in read_rows(path) if r.get("status") == "ok"}
        rows = on_disk[path]
        sample_seed, seed = _sequence_seed(setting.plan, setting.sampling, p.prompt_id)
        if (key := cell.key(p.prompt.prompt_id, sample_seed)) in rows:
            return rows[key]
        ar_key = setting.cell(p, "ar", {}).key(p.prompt.prompt_id, sample_seed)
        # the reference pass's output, as the engine contenders'
        reference = setting.references.get(ar_key) or rows.get(ar_key)
        sampling = setting.sampling
        kwargs = dict(generate_kwargs)
        if sampling.greedy:
            kwargs["do_sample"] = False
        else:
            kwargs |= {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p}
            kwargs["top_k"] = sampling.top_k or None
        row = cell.row(p.prompt.prompt_id, None if sample_seed is None else 0, sample_seed)
        row.prompt_tokens = len(p.ids)
        row.fill(prompt_fields(getattr(p.prompt, "text", None), p.ids))
        row.fill(seed_fields(setting.plan.seed, sample_seed, seed))
        row.fill(environment(), strict=False)
        row.fill(setting.fields(repeat, p), strict=False)
        row.fill(chat_template_fields(setting.tokenizer, p.chat_template))
        row.timestamp = time.time()
        try:
            output, wall_s = hf_generate(model, p.ids, setting.max_new_tokens, eos, seed, kwargs)
            row.generated_tokens, row.wall_time_s, row.output_ids = len(output), wall_s, output
            row.tokens_per_s = len(output) / wall_s if wall_s else 0.0
            row.fill(degenerate_fields(row))
            row.fill(_lossless(setting, p, output, reference, seed))
            row.status = "ok"
        except (RuntimeError, ValueError) as exc:  # a failed prompt is recorded, not fatal
            row.status, row.error = "failed", f"{type(exc).__name__}: {exc}"
        append_row(path, row)
        written = row.to_dict()
        if row.status == "ok":
            rows[key] = written
        return written

    return run


def hf_generate(
    model: Any, ids: list[int], max_new: int, eos: list[int], seed: int, kwargs: dict[str, Any]
) -> tuple[list[int], float]:
    x = torch.tensor([ids], device=model.device)
    torch.manual_seed(seed)
    t0 = sync_clock(model.device)
    out = model.generate(
        x,
        attention_mask=torch.ones_like(x),
        max_new_tokens=max_new,
        eos_token_id=eos,
        pad_token_id=eos[0],
        **kwargs,
    )
    t1 = sync_clock(model.device)
    return out[0, len(ids) :].tolist(), t1 - t0


def _lossless(
    setting: Setting, p: BenchPrompt, output: list[int], reference: dict[str, Any] | None, seed: int
) -> dict[str, Any]:
    """The runner's comparison with engine AR's row (greedy: the near-tie verdict at the first
    differing token; sampled: transformers draws other noise, so only `same_as_ar`)."""
    none = {"lossless": None, "first_diff": None, "diff_margin": None, "near_tie": None}
    if reference is None:
        return none | {"lossless_error": "no engine AR row for this prompt"}
    if not setting.sampling.greedy:
        return none | {"lossless_check": "distribution", "same_as_ar": output == reference["output_ids"]}
    return lossless_fields(setting.engine, p.ids, output, reference["output_ids"], setting.sampling, seed)
