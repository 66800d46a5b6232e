"""analysis/studies/verifiers/verifier_eval.py on synthetic rows: τ per verifier × draft shape, the
orderings, speedups only beside AR timed in the same session, and the prompts restricted to those every
cell completed."""

from __future__ import annotations

from analysis import make_figures
from analysis.load import load
from analysis.studies.verifiers import verifier_eval
from goose.records.results import append_row
from tests.analysis.test_analysis import row, write

STAND = {"budget": 40, "k": 8}
SHAPED = {
    "stand": STAND,
    "stand_chain": {**STAND, "shape": "chain"},
    "stand_iid": {**STAND, "shape": "iid", "num_paths": 3, "path_len": 4},
    "stand_delayed": {**STAND, "shape": "delayed", "num_paths": 3, "trunk_len": 2, "path_len": 4},
}
# (method, verifier): forward calls for 60 tokens (τ = 60 / calls)
CALLS = {
    ("stand", "auto"): 40,
    ("stand", "traversal"): 30,
    ("stand_chain", "auto"): 50,
    ("stand_chain", "block"): 40,
    ("stand_iid", "traversal"): 30,
    ("stand_iid", "gbv"): 20,
    ("stand_delayed", "traversal"): 24,
    ("stand_delayed", "gbv"): 30,
}


def _rows(session="s1", extra_prompt=False):
    rows = []
    for t in (0.6, 1.0):
        sampled = {"temperature": t, "top_p": 1.0, "top_k": 0, "sample_seed": 5}
        for p in ("p0", "p1"):
            rows.append(row("ar", p, 60, 60, 6.0, config={}, verifier="auto", **sampled))
            for (method, verifier), calls in CALLS.items():
                rows.append(
                    row(
                        method,
                        p,
                        60,
                        calls,
                        3.0,
                        config=SHAPED[method],
                        verifier=verifier,
                        session_id=session,
                        **sampled,
                    )
                )
        if extra_prompt:  # only one cell completed p2: left out of every cell
            rows.append(row("stand", "p2", 60, 10, 1.0, config=STAND, verifier="auto", **sampled))
    return rows


def test_grid_has_tau_per_verifier_and_shape(tmp_path):
    res = load(write(tmp_path, _rows(extra_prompt=True)))
    g = verifier_eval.grid(res)
    assert len(g) == 2 * len(CALLS)
    one = g[(g["temperature"] == 0.6) & (g["shape"] == "iid") & (g["verifier"] == "gbv")].iloc[0]
    assert one["drafter"] == "stand" and one["tau"] == 3.0 and one["n"] == 2
    assert one["speedup"] == 2.0  # AR timed in the same session: 6 s against 3 s
    tree = g[(g["shape"] == "tree") & (g["verifier"] == "auto")]
    assert (tree["tau"] == 60 / 40).all()  # p2 (tau 6) is not in every cell: left out


def test_orderings_report_each_claim_whichever_way_it_goes(tmp_path):
    res = load(write(tmp_path, _rows()))
    found = {r[4]: r[-1] for r in verifier_eval.orderings(verifier_eval.grid(res)) if r[2] == "0.6"}
    assert found["Traversal ≥ RRS on trees"] == "yes"
    assert found["Block ≥ token-level on chains"] == "yes"
    assert found["GBV (K ≥ 2 paths) > BV (one chain)"] == "yes"
    assert found["delayed ≥ root i.i.d. (Traversal)"] == "yes"  # τ 2.5 against 2
    assert found["delayed ≥ root i.i.d. (GBV)"] == "no"  # τ 2 against 3: reported as it comes


def test_no_speedup_without_ar_in_the_same_session(tmp_path):
    res = load(write(tmp_path, _rows(session="s2")))
    assert verifier_eval.grid(res)["speedup"].isna().all()


def test_build_writes_the_tables_and_figure_and_is_registered(tmp_path):
    res = load(write(tmp_path, _rows()))
    files = verifier_eval.build(res, tmp_path / "out").files
    names = {f.name for f in files}
    assert {"verifier_eval.md", "verifier_orderings.md", "verifier_eval.png"} <= names
    assert verifier_eval in make_figures.SCRIPTS


def test_the_matched_evaluation_folder_beside_the_results_is_preferred(tmp_path):
    """`make figures` reads results/reference; the side-by-side verifier runs live in results/verifiers."""
    greedy = [row("ar", "p0", 60, 60, 6.0, config={}), row("stand", "p0", 60, 30, 3.0, config=STAND)]
    res = load(write(tmp_path, greedy))  # tmp_path/results: no sampled rows of its own
    for r in _rows():
        append_row(tmp_path / "studies" / "verifiers" / "run" / r["model"] / f"{r['bench']}.jsonl", r)
    g = verifier_eval.grid(res)
    assert len(g) == 2 * len(CALLS)
