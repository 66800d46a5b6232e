"""Every divergence of a bench run from engine AR gets its measured top-2 margin and a verdict
(experiments/bench_divergences.py): in the run, and afterwards from the record alone, with the
same verdict; a record whose engine AR output cannot be regenerated is refused."""

from __future__ import annotations

import json

import pytest

from experiments import bench, bench_divergences

ARGS = ["--benches", "humaneval", "--limit", "1", "--max-new-tokens", "12", "--repeats", "1"]
ARGS += ["--methods", "pld", "--hf", "", "--threads", "1", "--dtype", "float32"]
INJECTED_AT = 4  # a first differing index the test plants; AR's own token there is no near-tie in fp32


def summary_with(mismatches: dict[str, list[tuple[str, int]]]) -> dict:
    return {
        "identical_to_engine_ar": {
            name: {
                "identical": 3 - len(ms),
                "prompts": 3,
                "mismatches": [{"bench": "b", "prompt_id": p, "first_diff": i} for p, i in ms],
            }
            for name, ms in mismatches.items()
        }
        | {"engine:ar across repeats": {"unstable_prompts": []}}
    }


def test_classify_asks_once_per_divergence_and_counts_verdicts():
    summary = summary_with({"engine:a": [("p0", 3), ("p1", 9)], "engine:b": [("p0", 3)], "engine:c": []})
    asked = []

    def verdict_at(bench_name, prompt_id, idx):
        asked.append((prompt_id, idx))
        return {"diff_margin": 0.0 if prompt_id == "p0" else 2.5, "near_tie": prompt_id == "p0"}

    counts = bench_divergences.classify(summary, verdict_at)

    assert sorted(asked) == [("p0", 3), ("p1", 9)]  # engine:b's divergence is engine:a's: one forward
    assert counts == {"engine:a": (1, 1), "engine:b": (1, 0), "engine:c": (0, 0)}
    a = summary["identical_to_engine_ar"]["engine:a"]["mismatches"]
    assert a[1]["diff_margin"] == 2.5
    assert a[0]["same_divergence_in"] == ["engine:b"] and a[1]["same_divergence_in"] == []
    for m in a:
        m["near_tie_threshold"] = 0.25
    assert bench_divergences.real_mismatches(summary) == [
        "engine:a b/p1@9 (margin 2.5 > 0.25; same divergence in: none)"
    ]


@pytest.fixture(scope="module")
def planted(tmp_path_factory, smollm2):
    """A tiny fp32 bench whose summary has one planted mismatch (engine:pld at INJECTED_AT), so
    that the in-run classification has something to classify; and the record it wrote."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    real_summarise = bench.summarise

    def summarise_with_a_divergence(names, prompts, runs):
        summary = real_summarise(names, prompts, runs)
        pld = summary["identical_to_engine_ar"]["engine:pld"]
        assert pld["identical"] == pld["prompts"] == 1  # fp32: the real run equals AR
        pld["identical"] = 0
        pld["mismatches"] = [
            {"bench": prompts[0].bench, "prompt_id": prompts[0].prompt_id, "first_diff": INJECTED_AT}
        ]
        return summary

    mp = pytest.MonkeyPatch()
    mp.setattr(bench, "summarise", summarise_with_a_divergence)
    try:
        record = bench.main([*ARGS, "--out", str(out)])
    finally:
        mp.undo()
    return out, record


def test_the_bench_classifies_its_divergences_and_afterwards_agrees(planted):
    out, record = planted
    entry = record["summary"]["identical_to_engine_ar"]["engine:pld"]
    (m,) = entry["mismatches"]
    assert record["summary"]["divergences_classified"] == {"when": "in the run"}
    assert m["near_tie"] is False and m["diff_margin"] > m["near_tie_threshold"]  # AR's token wins clearly
    assert (entry["near_tie"], entry["real"]) == (0, 1)

    assert bench_divergences.main([str(out)]) == 1  # a real mismatch: a failing exit status
    again = json.loads(out.read_text())["summary"]
    (m2,) = again["identical_to_engine_ar"]["engine:pld"]["mismatches"]
    assert m2["diff_top2"] == m["diff_top2"] and m2["diff_margin"] == pytest.approx(
        m["diff_margin"], abs=1e-5
    )
    assert again["divergences_classified"]["ar_regenerated_prompts"] == 1


def test_a_record_whose_ar_output_cannot_be_regenerated_is_refused(planted, tmp_path):
    out, _ = planted
    record = json.loads(out.read_text())
    n = record["per_prompt"][0]["runs"][0]["engine:ar"]["tokens"]
    record["per_prompt"][0]["runs"][0]["engine:ar"]["tokens"] = n + 1
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=f"engine AR regenerated {n} tokens, the run had {n + 1}"):
        bench_divergences.classify_record(broken)
    assert json.loads(broken.read_text()) == record  # nothing written


def test_a_sampled_record_is_not_classified(tmp_path):
    path = tmp_path / "bench_sampling.json"
    path.write_text(
        json.dumps({"args": {"temperature": 0.7}, "summary": summary_with({"hf:sample": [("p", 0)]})})
    )
    with pytest.raises(ValueError, match="sampled at temperature 0.7: only greedy records are classified"):
        bench_divergences.classify_record(path)
