"""Which verifier applies to which draft (VERIFY.md §8.2), checked when a run is composed, before the model
loads. A drafter declares its draft shape (`Drafter.draft_shape()`):

- chain:   one child per node, each drawn from q;
- tree:    siblings drawn without replacement from q_u, in draw order (STAND's best-first trees);
- iid:     K i.i.d. paths from the anchor, merged into their trie (DraftTree.paths);
- delayed: a trunk of L1 draws, then K i.i.d. paths of L2 (arXiv 2602.16994, Def. 5.2).

Every verifier but `auto` needs a real proposal q (a drafter that `samples_drafts`) and T > 0: with one-hot
drafts sample-and-match is already optimal, and at T = 0 the greedy path runs.
"""

from __future__ import annotations

VERIFIERS = ("auto", "rrs", "rrs_iid", "traversal", "block", "gbv")
SHAPES = ("chain", "tree", "iid", "delayed")

# The draft shapes on which each verifier is exact, and why the others are refused.
APPLIES: dict[str, tuple[str, ...]] = {
    "rrs": SHAPES,  # siblings without replacement; deduplicated i.i.d. draws are such a sequence
    "rrs_iid": ("chain", "iid", "delayed"),  # with replacement: i.i.d. draws with their repeats
    "traversal": SHAPES,
    "block": ("chain",),
    "gbv": ("iid", "delayed"),  # its q̃ is the law of the best of K i.i.d. paths
}
NEEDS = {
    "rrs_iid": "children drawn i.i.d. (with replacement): draft shape chain, iid or delayed; on siblings "
    "drawn without replacement the with-replacement update is lossy",
    "block": "a chain (one child per node): draft shape chain",
    "gbv": "K i.i.d. paths: draft shape iid or delayed",
}


def check_verifier(
    verifier: str, *, samples_drafts: bool, shape: str, temperature: float, method: str
) -> None:
    """Raise ValueError naming what `verifier` needs unless it applies to `method`'s drafts."""
    if verifier not in VERIFIERS:
        raise ValueError(f"sampling.verifier = {verifier!r}: must be one of {', '.join(VERIFIERS)}")
    if verifier == "auto":
        return
    if temperature == 0.0:
        raise ValueError(
            f"sampling.verifier = {verifier}: needs sampling (temperature > 0); greedy decoding "
            "(temperature 0) verifies by argmax matching: use sampling.verifier=auto"
        )
    if not samples_drafts:
        raise ValueError(
            f"sampling.verifier = {verifier}: needs a drafter that samples its drafts from a proposal q "
            f"(e.g. method=stand); method={method} drafts deterministically, where sample-and-match "
            "(sampling.verifier=auto) is already optimal"
        )
    if shape not in SHAPES:
        raise ValueError(f"draft shape {shape!r} of method={method}: must be one of {', '.join(SHAPES)}")
    if shape not in APPLIES[verifier]:
        raise ValueError(
            f"sampling.verifier = {verifier}: needs {NEEDS[verifier]}; method={method} drafts shape {shape} "
            f"(verifiers for it: auto, {', '.join(v for v in APPLIES if shape in APPLIES[v])})"
        )
