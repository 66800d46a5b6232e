"""AdjacencyTable: overwrite semantics, scores, bigram tier, reset, host-side lookups."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

from goose.sources.adjacency import AdjacencyTable, last_occurrence

V = 8


def logits_from(pairs: list[dict[int, float]]) -> torch.Tensor:
    """[n, V] logits: given {token: logit} per row, everything else -100."""
    out = torch.full((len(pairs), V), -100.0)
    for i, d in enumerate(pairs):
        for t, v in d.items():
            out[i, t] = v
    return out


def test_last_occurrence_picks_last_position_per_value() -> None:
    a = np.array([5, 3, 5, 1, 3, 5])
    # sorted distinct values 1, 3, 5 -> last positions 3, 4, 5
    assert last_occurrence(a).tolist() == [3, 4, 5]


def test_row_is_topk_ids_in_logit_order() -> None:
    table = AdjacencyTable(V, k=3)
    table.update([2], logits_from([{4: 1.0, 6: 3.0, 1: 2.0, 0: 0.5}]))
    ids, _ = table.successors(2)
    assert ids == [6, 1, 4]


def test_scores_are_softmax_over_the_k_logits_only() -> None:
    table = AdjacencyTable(V, k=2)
    # the third logit (0.0 for token 5) must not enter the normaliser
    table.update([0], logits_from([{3: math.log(3.0), 7: 0.0, 5: -0.5}]))
    ids, scores = table.successors(0)
    assert ids == [3, 7]
    assert scores == pytest.approx([0.75, 0.25], abs=1e-6)


def test_unseen_token_has_no_successors() -> None:
    table = AdjacencyTable(V, k=3)
    assert table.successors(4) == ([], [])
    table.update([1], logits_from([{2: 1.0}]))
    assert table.successors(4) == ([], [])
    assert table.num_rows == 1


def test_overwrite_freshest_wins_across_updates() -> None:
    table = AdjacencyTable(V, k=2)
    table.update([1], logits_from([{2: 5.0, 3: 4.0}]))
    table.update([1], logits_from([{6: 5.0, 7: 4.0}]))
    assert table.successors(1)[0] == [6, 7]


def test_duplicates_in_one_update_last_position_wins() -> None:
    table = AdjacencyTable(V, k=2)
    tokens = [1, 4, 1, 4, 1]
    logits = logits_from(
        [{2: 5.0, 3: 4.0}, {0: 5.0, 1: 4.0}, {5: 5.0, 6: 4.0}, {6: 5.0, 7: 4.0}, {7: 5.0, 0: 4.0}]
    )
    table.update(torch.tensor(tokens), logits)
    assert table.successors(1)[0] == [7, 0]  # position 4
    assert table.successors(4)[0] == [6, 7]  # position 3


def test_update_accepts_half_precision_logits() -> None:
    table = AdjacencyTable(V, k=2)
    table.update([3], logits_from([{1: 2.0, 4: 1.0}]).half())
    ids, scores = table.successors(3)
    assert ids == [1, 4]
    assert scores[0] == pytest.approx(1 / (1 + math.exp(-1.0)), abs=1e-3)


def test_ids_only_mode_gives_rank_placeholders() -> None:
    table = AdjacencyTable(V, k=3, use_scores=False)
    table.update([0], logits_from([{5: 1.0, 2: 3.0, 7: 2.0}]))
    ids, scores = table.successors(0)
    assert ids == [2, 7, 5]
    assert scores == pytest.approx([1.0, 0.5, 1 / 3])


def test_min_score_drops_weak_successors() -> None:
    table = AdjacencyTable(V, k=3)
    table.update([0], logits_from([{1: 0.0, 2: 0.0, 3: -10.0}]))
    ids, scores = table.successors(0, min_score=0.01)
    assert ids == [1, 2] or ids == [2, 1]
    assert len(scores) == 2


def test_bigram_hit_and_fallback_to_unigram() -> None:
    table = AdjacencyTable(V, k=2, use_bigram=True)
    # position 0: token 3 after 1; position 1: token 3 after 2 (overwrites the unigram row of 3)
    table.update([3, 3], logits_from([{4: 2.0, 5: 1.0}, {6: 2.0, 7: 1.0}]), prev_tokens=[1, 2])
    assert table.successors(3, prev=1)[0] == [4, 5]  # bigram (1, 3)
    assert table.successors(3, prev=2)[0] == [6, 7]  # bigram (2, 3)
    assert table.successors(3, prev=0)[0] == [6, 7]  # bigram miss -> unigram, freshest
    assert table.successors(3)[0] == [6, 7]  # no prev -> unigram
    assert table.num_bigrams == 2


def test_bigram_ignored_when_tier_off_or_prev_missing() -> None:
    off = AdjacencyTable(V, k=2, use_bigram=False)
    off.update([3, 3], logits_from([{4: 2.0, 5: 1.0}, {6: 2.0, 7: 1.0}]), prev_tokens=[1, 2])
    assert off.successors(3, prev=1)[0] == [6, 7]
    on = AdjacencyTable(V, k=2, use_bigram=True)
    on.update([3], logits_from([{4: 2.0, 5: 1.0}]), prev_tokens=[-1])  # -1: no predecessor
    assert on.num_bigrams == 0
    assert on.successors(3, prev=1)[0] == [4, 5]


def test_bigram_duplicates_last_wins_and_overwrite_later() -> None:
    table = AdjacencyTable(V, k=2, use_bigram=True)
    table.update(
        [3, 3, 3],
        logits_from([{4: 2.0, 5: 1.0}, {0: 2.0, 1: 1.0}, {6: 2.0, 7: 1.0}]),
        prev_tokens=[1, 2, 1],
    )
    assert table.successors(3, prev=1)[0] == [6, 7]
    assert table.successors(3, prev=2)[0] == [0, 1]
    table.update([3], logits_from([{2: 2.0, 1: 1.0}]), prev_tokens=[2])
    assert table.successors(3, prev=2)[0] == [2, 1]
    assert table.successors(3, prev=1)[0] == [6, 7]
    assert table.num_bigrams == 2


def test_bigram_store_stays_sorted_over_many_inserts() -> None:
    vocab = 50
    gen = torch.Generator().manual_seed(0)
    table = AdjacencyTable(vocab, k=3, use_bigram=True)
    expected: dict[tuple[int, int], list[int]] = {}
    for _ in range(40):
        n = 30
        tok = torch.randint(0, vocab, (n,), generator=gen)
        prev = torch.randint(0, vocab, (n,), generator=gen)
        logits = torch.randn(n, vocab, generator=gen)
        table.update(tok, logits, prev)
        top = logits.topk(3, dim=-1).indices
        for i in range(n):  # reference semantics: sequential overwrite
            expected[(int(prev[i]), int(tok[i]))] = top[i].tolist()
    assert table.num_bigrams == len(expected) == len(table._bg_slot)
    assert sorted(table._bg_slot.values()) == list(range(table.num_bigrams))  # one row per key
    for (p, t), ids in expected.items():
        assert table.successors(t, prev=p)[0] == ids


def test_reset_forgets_unigram_and_bigram_rows() -> None:
    table = AdjacencyTable(V, k=2, use_bigram=True)
    table.update([3], logits_from([{4: 2.0, 5: 1.0}]), prev_tokens=[1])
    table.reset()
    assert table.successors(3) == ([], [])
    assert table.successors(3, prev=1) == ([], [])
    assert table.num_rows == 0 and table.num_bigrams == 0


def test_absorb_copies_the_unigram_rows_over_and_keeps_the_others() -> None:
    run = AdjacencyTable(V, k=2)
    run.update([1, 3], logits_from([{2: 3.0, 6: 1.0}, {4: 2.0}]))
    prompt = AdjacencyTable(V, k=2, use_bigram=True)
    prompt.update([3, 5], logits_from([{7: 2.0, 0: 1.0}, {6: 1.0, 2: 0.5}]), prev_tokens=[1, -1])
    run.absorb(prompt)
    assert run.successors(3) == prompt.successors(3)  # overwritten by the fresher row
    assert run.successors(5) == prompt.successors(5)  # new
    assert run.successors(1)[0] == [2, 6]  # a row the prompt never wrote stays
    assert run.num_rows == 3 and run.num_bigrams == 0  # the bigram tier is not taken
    prompt.reset()
    assert run.successors(3)[0] == [7, 0]  # a copy: the prompt's reset leaves it
    with pytest.raises(ValueError, match="vocab"):
        run.absorb(AdjacencyTable(V + 1, k=2))
    with pytest.raises(ValueError, match="without scores"):
        run.absorb(AdjacencyTable(V, k=2, use_scores=False))


@pytest.mark.parametrize("use_scores", [True, False])
def test_a_pickled_table_keeps_every_row_and_carries_only_the_written_ones(use_scores: bool) -> None:
    vocab = 50_000
    table = AdjacencyTable(vocab, k=4, use_scores=use_scores, use_bigram=True)
    logits = torch.randn(3, vocab)
    table.update([7, 7 + vocab // 2, 9], logits, prev_tokens=[-1, 7, 3])
    table.update([11], torch.randn(1, vocab))
    table.reset()  # forgotten rows keep stale data in the store; they must stay forgotten
    table.update([7, 12], logits[:2], prev_tokens=[5, 7])
    blob = pickle.dumps(table)
    assert len(blob) < 20_000  # a V x K store would be ~1.6 MB of ids alone
    copy_ = pickle.loads(blob)
    assert copy_.num_rows == table.num_rows == 2 and copy_.num_bigrams == table.num_bigrams == 2
    for token in (7, 9, 11, 12, 7 + vocab // 2):
        assert copy_.has_row(token) == table.has_row(token)
        assert copy_.successors(token) == table.successors(token)
        for prev in (5, 7, 3):
            assert copy_.successors(token, prev=prev) == table.successors(token, prev=prev)
    more = torch.randn(2, vocab)  # the copy goes on writing as the original does
    for t in (table, copy_):
        t.update([9, 13], more, prev_tokens=[12, 9])
    for prev, token in ((12, 9), (9, 13)):
        assert copy_.successors(token) == table.successors(token)
        assert copy_.successors(token, prev=prev) == table.successors(token, prev=prev)


def test_update_from_tree_uses_parent_tokens_as_bigram_prev() -> None:
    table = AdjacencyTable(V, k=1, use_bigram=True)
    # tree: 5 (root) -> 6 -> 7, and 5 -> 7 ; committed token before the anchor: 4
    tokens, parents = [5, 6, 7, 7], [-1, 0, 1, 0]
    logits = logits_from([{0: 1.0}, {1: 1.0}, {2: 1.0}, {3: 1.0}])
    table.update_from_tree(tokens, parents, logits, prev_anchor=4)
    assert table.successors(5, prev=4)[0] == [0]
    assert table.successors(6, prev=5)[0] == [1]
    assert table.successors(7, prev=6)[0] == [2]
    assert table.successors(7, prev=5)[0] == [3]
    assert table.successors(7)[0] == [3]  # unigram: last position wins


def test_update_from_prefill_harvest() -> None:
    table = AdjacencyTable(V, k=1, use_bigram=True)
    prompt = [1, 2, 1, 3]
    logits = logits_from([{4: 1.0}, {5: 1.0}, {6: 1.0}, {7: 1.0}])
    table.update_from_prefill(prompt, logits)
    assert table.successors(1)[0] == [6]  # position 2 overwrote position 0
    assert table.successors(1, prev=2)[0] == [6]
    assert table.successors(2, prev=1)[0] == [5]
    assert table.successors(3, prev=1)[0] == [7]
    assert table.num_bigrams == 3  # (1,2), (2,1), (1,3); position 0 has no predecessor


def test_prefill_tail_logits_align_with_last_prompt_tokens() -> None:
    table = AdjacencyTable(V, k=1)
    table.update_from_prefill([1, 2, 3], logits_from([{7: 1.0}]))
    assert table.successors(3)[0] == [7]
    assert table.successors(1) == ([], [])


def test_k_larger_than_vocab_is_clamped() -> None:
    table = AdjacencyTable(3, k=10)
    table.update([0], torch.tensor([[0.0, 2.0, 1.0]]))
    assert table.successors(0)[0] == [1, 2, 0]


def test_shape_errors() -> None:
    table = AdjacencyTable(V, k=2)
    with pytest.raises(ValueError):
        table.update([0, 1], torch.zeros(1, V))
    with pytest.raises(ValueError):
        table.update([0], torch.zeros(1, V + 1))
    bigram = AdjacencyTable(V, k=2, use_bigram=True)
    for n in (1, 2):  # the single-position path checks the predecessors as the batch path does
        with pytest.raises(ValueError, match="prev tokens"):
            bigram.update(list(range(n)), torch.zeros(n, V), [0, 1, 2])
    assert bigram.num_rows == 0


# ---------------------------------------------------------------- lifetime inside the drafters
def test_token_recycling_table_persists_across_prompts() -> None:
    from baselines.token_recycling import TokenRecyclingDrafter
    from goose.engine.core.drafter import VerifyOutcome
    from goose.engine.core.tree import DraftTree

    drafter = TokenRecyclingDrafter()
    drafter.begin([1, 2], torch.zeros(2, 16))
    table = drafter.table
    logits = torch.arange(16, dtype=torch.float32).unsqueeze(0)
    drafter.observe(DraftTree.single(2), VerifyOutcome(logits, [15], [0], [15]))
    assert table.successors(2)[0] == [15, 14, 13, 12, 11, 10, 9, 8]
    drafter.end()
    drafter.begin([3, 4], torch.zeros(2, 16))  # next prompt of the run
    assert drafter.table is table
    assert table.successors(2)[0] == [15, 14, 13, 12, 11, 10, 9, 8]
    assert table.successors(3) == ([], [])  # and still no prefill harvest


def test_isotropic_table_is_fresh_per_prompt() -> None:
    from baselines.isotropic import IsotropicDrafter

    drafter = IsotropicDrafter(branching=3)
    drafter.begin([1, 2], logits_from([{5: 1.0}, {6: 1.0}]))
    assert drafter.table.successors(1)[0][0] == 5  # prefill harvest
    drafter.end()
    drafter.begin([3], logits_from([{7: 1.0}]))
    assert drafter.table.successors(1) == ([], [])
    assert drafter.table.successors(3)[0][0] == 7


def _table_state(t: AdjacencyTable) -> tuple:
    n = t.num_bigrams
    slots = [t._bg_slot[key] for key in sorted(t._bg_slot)]
    scores = None if t._scores is None else t._scores[t._seen].tolist()
    return (
        np.flatnonzero(t._seen).tolist(),
        t._ids[t._seen].tolist(),
        scores,
        sorted(t._bg_slot),
        t._bg_ids[slots].tolist() if n else [],
        t._bg_scores[slots].tolist() if n and t.use_scores else [],
    )


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("use_scores", [True, False])
def test_single_position_path_writes_what_the_batch_path_writes(half: bool, use_scores: bool) -> None:
    """update_one (a step without drafting; what update and update_from_tree take for a single position)
    against the batch path on the same row (the position given twice: duplicates, the last wins), over a
    stream of anchors that revisits tokens and bigrams (overwrites and inserts, bigram keys before and after
    existing ones, no predecessor): the two tables hold the same rows, scores and bigram store at every
    step."""
    vocab = 50
    gen = torch.Generator().manual_seed(3)
    one = AdjacencyTable(vocab, 4, use_scores=use_scores, use_bigram=True, half_unigram_scores=half)
    batch = AdjacencyTable(vocab, 4, use_scores=use_scores, use_bigram=True, half_unigram_scores=half)
    tokens = torch.randint(0, 12, (200,), generator=gen).tolist()
    prev = None
    for token in tokens:
        logits = torch.randn(1, vocab, generator=gen).to(torch.bfloat16)
        one.update_from_tree([token], [-1], logits, prev)
        p = -1 if prev is None else prev
        batch.update([token, token], logits.repeat(2, 1), [p, p])
        assert _table_state(one) == _table_state(batch)
        prev = None if token % 5 == 0 else token
    assert one.num_bigrams > 20 and one.num_rows == 12


def test_single_position_path_rejects_more_rows() -> None:
    t = AdjacencyTable(V, 2)
    with pytest.raises(ValueError, match="one row"):
        t.update_one(1, torch.zeros(2, V))


@pytest.mark.parametrize("use_bigram", [True, False])
@pytest.mark.parametrize("use_scores", [True, False])
def test_small_tree_path_writes_what_the_vectorised_path_writes(use_bigram: bool, use_scores: bool) -> None:
    """update_from_tree on trees of 2..SMALL_TREE nodes (its Python-list path) against `update` with the
    same rows and bigram predecessors (the vectorised path), over a stream of random trees whose tokens repeat
    within a tree and across trees, with and without a root predecessor and with the engine's top-K handed
    over: the same rows, scores, bigram keys and bigram slot numbers after every tree."""
    from goose.sources.adjacency import SMALL_TREE

    vocab = 40
    gen = torch.Generator().manual_seed(11)
    small = AdjacencyTable(vocab, 4, use_scores=use_scores, use_bigram=use_bigram)
    ref = AdjacencyTable(vocab, 4, use_scores=use_scores, use_bigram=use_bigram)
    sizes = [2, 3, 5, 9, SMALL_TREE]
    for step in range(120):
        n = sizes[step % len(sizes)]
        tokens = torch.randint(0, 15, (n,), generator=gen).tolist()
        parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
        logits = torch.randn(n, vocab, generator=gen).to(torch.bfloat16)
        root_prev = None if step % 4 == 0 else int(torch.randint(0, 15, (1,), generator=gen))
        top = torch.topk(logits, 6, dim=-1) if step % 2 else None
        top = None if top is None else (top.values, top.indices)
        small.update_from_tree(tokens, parents, logits, root_prev, top)
        prev = [-1 if root_prev is None else root_prev] + [tokens[p] for p in parents[1:]]
        ref.update(tokens, logits, prev if use_bigram else None, top)
        assert _table_state(small) == _table_state(ref)
        assert small._bg_slot == ref._bg_slot
    assert small.num_rows == 15
    assert (small.num_bigrams > 50) == use_bigram


def test_small_tree_path_checks_its_shapes() -> None:
    t = AdjacencyTable(V, 2, use_bigram=True)
    with pytest.raises(ValueError, match="logits"):
        t.update_from_tree([1, 2], [-1, 0], torch.zeros(3, V))
    with pytest.raises(ValueError, match="parents"):
        t.update_from_tree([1, 2], [-1], torch.zeros(2, V))
