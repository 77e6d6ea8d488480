"""Determinism pair metrics and aggregates, against hand-computed values (dyadic logprobs: exact floats)."""

from __future__ import annotations

import pytest

from scorers.determinism import Generation, PairResult, aggregate_pairs, compare_pair, unique_outputs


def resp(tokens: list[int], text: str = "", topk: list[dict[int, float]] | None = None) -> Generation:
    return Generation(token_ids=tokens, text=text, topk=topk)


def test_identical_responses() -> None:
    topk = [{1: -0.125, 7: -2.5, 9: -3.0}, {2: -0.0625, 8: -5.0, 9: -6.0}]
    r = compare_pair(resp([1, 2], "ab", topk), resp([1, 2], "ab", [dict(t) for t in topk]))
    assert r == PairResult(True, True, True, None, None, None, 0.0, 3)


def test_divergence_compares_positions_up_to_and_including_it() -> None:
    a = [
        {1: -0.125, 7: -2.5},
        {2: -0.0625, 8: -5.0},
        {3: -0.5, 5: -0.75},
        {4: 0.0, 6: -8.0},  # after the divergence: never compared (would give 7.0)
    ]
    b = [
        {1: -0.25, 7: -2.25},  # deltas 0.125 and 0.25
        {2: -0.0625, 9: -4.0},  # only token 2 shared: overlap 1, delta 0
        {5: -0.5, 3: -0.75},  # deltas 0.25 and 0.25; margins 0.25 on both sides
        {4: 0.0, 6: -1.0},
    ]
    r = compare_pair(resp([1, 2, 3, 4], "abcd", a), resp([1, 2, 5, 4], "abed", b))
    assert r == PairResult(
        text_equal=False,
        tokens_equal=False,
        first_token_equal=True,
        first_divergence=2,
        margin_a=0.25,
        margin_b=0.25,
        topk_max_abs_delta=0.25,
        topk_min_overlap=1,
    )


def test_one_is_a_prefix_of_the_other() -> None:
    a = [{1: -0.5, 2: -1.0}, {2: -0.25, 3: -2.0}]
    b = [{1: -0.5, 2: -1.0}, {2: -0.25, 3: -1.0}, {3: -0.125, 4: -0.375}]
    r = compare_pair(resp([1, 2], "ab", a), resp([1, 2, 3], "abc", b))
    assert r.first_divergence == 2  # the shorter length
    assert r.margin_a is None  # A has no token at position 2
    assert r.margin_b == 0.25
    assert r.topk_max_abs_delta == 1.0  # position 1, token 3: |-2.0 - -1.0|; position 2 exists on B only
    assert r.topk_min_overlap == 2
    assert r.first_token_equal is True and not r.tokens_equal


def test_first_token_flip_with_k_below_20() -> None:
    a = [{10: -0.5, 11: -1.0, 12: -3.0, 13: -4.0, 14: -5.0}]
    b = [{11: -0.5, 10: -1.0, 12: -3.0, 13: -4.0, 15: -5.0}]
    r = compare_pair(resp([10], "x", a), resp([11], "y", b))
    assert r == PairResult(False, False, False, 0, 0.5, 0.5, 0.5, 4)


def test_tie_margin_is_zero() -> None:
    a = [{10: -0.75, 11: -0.75, 12: -2.0}]
    b = [{11: -0.75, 10: -0.75, 12: -2.0}]
    r = compare_pair(resp([10], "x", a), resp([11], "y", b))
    assert (r.margin_a, r.margin_b, r.topk_max_abs_delta, r.topk_min_overlap) == (0.0, 0.0, 0.0, 3)


def test_empty_outputs() -> None:
    assert compare_pair(resp([], "", []), resp([], "", [])) == PairResult(
        True, True, None, None, None, None, None, None
    )
    r = compare_pair(resp([], "", []), resp([5], "e", [{5: -0.25, 6: -1.0}]))
    assert (r.first_divergence, r.first_token_equal, r.margin_a, r.margin_b) == (0, None, None, 0.75)
    assert (r.topk_max_abs_delta, r.topk_min_overlap) == (None, None)  # no position has top-k on both sides


def test_missing_logprobs() -> None:
    r = compare_pair(resp([1, 2], "ab", None), resp([1, 3], "ac", [{1: -0.5, 2: -1.0}, {3: -0.5, 2: -1.0}]))
    assert (r.first_divergence, r.margin_a, r.margin_b) == (1, None, 0.5)
    assert (r.topk_max_abs_delta, r.topk_min_overlap) == (None, None)
    r = compare_pair(resp([1], "a", [{1: -0.5}]), resp([2], "b", [{2: -0.5}]))
    assert (r.margin_a, r.margin_b) == (None, None)  # a single alternative has no top-2
    assert (r.topk_max_abs_delta, r.topk_min_overlap) == (None, 0)  # compared, but nothing shared


def test_same_text_other_tokens() -> None:
    r = compare_pair(resp([1, 2], "ab"), resp([3], "ab"))
    assert (r.text_equal, r.tokens_equal, r.first_divergence, r.first_token_equal) == (True, False, 0, False)


def test_topk_length_must_match_tokens() -> None:
    with pytest.raises(ValueError, match="positions"):
        resp([1, 2], "ab", [{1: -0.5}])


def test_aggregate_pairs() -> None:
    results = [
        PairResult(True, True, True, None, None, None, 0.0, 20),
        PairResult(False, False, True, 7, 0.5, 0.25, 0.125, 18),
        PairResult(False, False, False, 0, 0.0, 0.0, 0.5, 19),
        PairResult(True, True, None, None, None, None, None, None),
    ]
    agg = aggregate_pairs(results, errors=2)
    assert (agg.n, agg.text_equal, agg.tokens_equal, agg.first_token_equal, agg.first_token_compared) == (
        4,
        2,
        2,
        2,
        3,
    )
    assert (agg.max_delta, agg.min_overlap, agg.divergence_positions, agg.errors) == (0.5, 18, [7, 0], 2)
    empty = aggregate_pairs([], errors=3)
    assert (empty.n, empty.max_delta, empty.min_overlap, empty.divergence_positions, empty.errors) == (
        0,
        None,
        None,
        [],
        3,
    )
    with pytest.raises(ValueError):
        aggregate_pairs(results, errors=-1)


def test_unique_outputs() -> None:
    assert unique_outputs(["x", "x", "y"]) == (2, 2 / 3)
    assert unique_outputs(["a"] * 5) == (1, 1.0)
    assert unique_outputs(["a", "b", "c", "d"]) == (4, 0.25)
    assert unique_outputs([]) == (0, 0.0)
