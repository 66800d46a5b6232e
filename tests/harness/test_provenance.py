"""Provenance and acceptance fields of new rows (goose.records.provenance, runner): prompt hash,
prompt-ids hash, chat-template hash, seeds, acceptance by depth and sibling rank. None of them is
part of the cell key or the config hash, and rows written before them resume as before."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from baselines.pld import PromptLookupDrafter
from goose.harness.runner import Cell, SamplingPlan, run_cell
from goose.records.provenance import chat_template_fields, prompt_fields, sha256
from goose.records.results import cell_key, config_hash, read_rows
from goose.records.row import SCHEMA_VERSION, V0_DEFAULTS, unknown_fields
from tests.harness.test_chat_template import ChatToyTokenizer
from tests.toy_harness import one_thread, tiny_engine, toy_prompts  # noqa: F401

NEW_FIELDS = (
    "prompt_hash",
    "prompt_ids_hash",
    "chat_template_sha",
    "seeds",
    "depth_offered",
    "depth_accepted",
    "rank_offered",
    "rank_accepted",
)


def run(tmp_path: Path, prompts, chat: bool) -> list[dict]:
    cell = Cell("tiny", "toy", "pld", PromptLookupDrafter().config(), 12, "float32", chat_template=chat)
    return run_cell(
        tiny_engine(),
        ChatToyTokenizer(),
        prompts,
        cell,
        PromptLookupDrafter,
        tmp_path / "r.jsonl",
        log=lambda s: None,
        plan=SamplingPlan(seed=7),
    )


def test_hashes():
    assert sha256("abc") == hashlib.sha256(b"abc").hexdigest()
    assert sha256([1, 2]) == hashlib.sha256(b"[1,2]").hexdigest() and sha256(None) is None
    assert prompt_fields("3 5", [3, 5]) == {"prompt_hash": sha256("3 5"), "prompt_ids_hash": sha256([3, 5])}
    assert chat_template_fields(ChatToyTokenizer(), applied=False) == {"chat_template_sha": None}
    assert chat_template_fields(ChatToyTokenizer(), applied=True) == {"chat_template_sha": sha256("toy")}


def test_new_rows_carry_provenance_and_keep_their_cell_key(tmp_path):
    prompts = toy_prompts(2)
    raw = run(tmp_path, prompts, chat=False)
    chat = run(tmp_path, prompts, chat=True)
    texts = {p.prompt_id: p.text for p in prompts}
    for r in raw + chat:
        assert r["prompt_hash"] == sha256(texts[r["prompt_id"]])
        assert r["seeds"] == {"run": 7, "sample": None, "sequence": 0}  # greedy: no sample seed
        assert r["chat_template_sha"] == (sha256("toy") if r["chat_template"] else None)
        assert sum(r["depth_accepted"]) == sum(r["step_accepted"])
        assert sum(r["depth_offered"]) == sum(r["rank_offered"]) == sum(t - 1 for t in r["step_tree_size"])
        # the new fields are no part of the cell's identity
        assert cell_key(r) == cell_key({k: v for k, v in r.items() if k not in NEW_FIELDS})
        assert r["config_hash"] == config_hash(r["method_config"])
    by = {(r["method"], r["prompt_id"], r["chat_template"]): r for r in raw + chat}
    p = prompts[0].prompt_id
    # the same text, fed differently: same prompt hash, different ids hash
    assert by[("ar", p, True)]["prompt_hash"] == by[("ar", p, False)]["prompt_hash"]
    assert by[("ar", p, True)]["prompt_ids_hash"] != by[("ar", p, False)]["prompt_ids_hash"]


def test_old_rows_without_the_new_fields_resume(tmp_path):
    prompts = toy_prompts(1)
    rows = run(tmp_path, prompts, chat=False)
    old = [{k: v for k, v in r.items() if k not in NEW_FIELDS} for r in rows]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    again = run(tmp_path, prompts, chat=False)
    assert [r["timestamp"] for r in again] == [r["timestamp"] for r in old]  # resumed, not re-run
    assert len(read_rows(tmp_path / "r.jsonl")) == 2


def test_rows_carry_the_schema_version_and_only_documented_fields(tmp_path):
    rows = run(tmp_path, toy_prompts(1), chat=False)
    on_disk = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    for r in on_disk:
        assert list(r)[0] == "schema_version" and r["schema_version"] == SCHEMA_VERSION
        assert not unknown_fields(r)
    order = lambda r: (r["method"], r["prompt_id"])  # noqa: E731
    assert sorted(on_disk, key=order) == sorted(rows, key=order)  # run_cell returns the rows as on disk


def test_version_0_rows_resume(tmp_path):
    """Rows from before schema versions, chat templates and sampling (no schema_version, no chat_template,
    no temperature/top_p/top_k/sample_seed) are the same cells as the rows a run writes now."""
    prompts = toy_prompts(1)
    rows = run(tmp_path, prompts, chat=False)
    v0 = [{k: v for k, v in r.items() if k not in ("schema_version", *V0_DEFAULTS)} for r in rows]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in v0))
    again = run(tmp_path, prompts, chat=False)
    assert [r["timestamp"] for r in again] == [r["timestamp"] for r in rows]  # resumed, not re-run
    assert len(read_rows(tmp_path / "r.jsonl")) == 2
