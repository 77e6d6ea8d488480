"""Per-item results, official and lbeval accuracy, compensation, dropped items, result.py's rounding."""

from __future__ import annotations

import pytest

from scorers.longbench_v2 import (
    ExpectedItem,
    ItemResult,
    item_result,
    lbeval_accuracy,
    official_accuracy,
    score_items,
    with_missing,
)
from scorers.longbench_v2.score import Accuracy, Bucket, accuracy, item_points

ITEM_CASES = [
    # (outputs in call order, answer, expected (pred, judge, dropped), why)
    (["The correct answer is (B)"], "B", ("B", True, False), "right"),
    (["  The correct answer is (C)\n"], "B", ("C", False, False), "wrong, stripped"),
    (["I am not sure."], "B", (None, False, False), "unextractable"),
    (["   "], "B", (None, False, False), "whitespace-only output is written by pred.py"),
    ([""], "B", (None, False, True), "empty output: pred.py writes nothing"),
    ([None], "B", (None, False, True), "failed request"),
    (
        ["step by step...", "The correct answer is (A)"],
        "A",
        ("A", True, False),
        "CoT: the answer call counts",
    ),
    (["The correct answer is (A)", "no letter"], "A", (None, False, False), "CoT: not the first call"),
    (["", "The correct answer is (A)"], "A", (None, False, True), "CoT: empty first call"),
    (["thinking", ""], "A", (None, False, True), "CoT: empty answer call"),
]


@pytest.mark.parametrize(("outputs", "answer", "expected", "why"), ITEM_CASES, ids=[c[3] for c in ITEM_CASES])
def test_item_result(outputs: list[str | None], answer: str, expected: tuple[object, ...], why: str) -> None:
    item = item_result("x", "easy", "short", answer, outputs)
    assert (item.pred, item.judge, item.dropped) == expected, why


BAD_ITEMS = [
    # ItemResult arguments that describe no possible outcome
    (("x", "medium", "short", "A", "A", True), "difficulty"),
    (("x", "easy", "tiny", "A", "A", True), "length"),
    (("x", "easy", "short", "E", None, False), "letters"),
    (("x", "easy", "short", "A", "a", False), "letters"),
    (("x", "easy", "short", "A", "B", True), "judge"),
    (("x", "easy", "short", "A", "A", False), "judge"),
]


@pytest.mark.parametrize(("args", "message"), BAD_ITEMS)
def test_item_result_rejects_impossible_states(
    args: tuple[str, str, str, str, str | None, bool], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ItemResult(*args)


def test_dropped_item_has_no_prediction_and_an_item_needs_an_output() -> None:
    with pytest.raises(ValueError, match="no prediction"):
        ItemResult("x", "easy", "short", "A", "A", True, dropped=True)
    with pytest.raises(ValueError, match="no model output"):
        item_result("x", "easy", "short", "A", [])


def it(
    item_id: str, difficulty: str, length: str, answer: str, pred: str | None, dropped: bool = False
) -> ItemResult:
    return ItemResult(item_id, difficulty, length, answer, pred, pred == answer, dropped)


# Eight written items (like a pred.py file) and two dropped ones (empty outputs).
ITEMS = [
    it("1", "easy", "short", "A", "A"),  # right
    it("2", "easy", "medium", "B", "C"),  # wrong
    it("3", "hard", "long", "C", "C"),  # right
    it("4", "hard", "short", "D", None),  # unextractable
    it("5", "hard", "medium", "A", "A"),  # right
    it("6", "easy", "long", "B", None),  # unextractable
    it("7", "hard", "short", "B", "B"),  # right
    it("8", "hard", "long", "D", "A"),  # wrong
    it("9", "easy", "short", "A", None, dropped=True),
    it("10", "hard", "medium", "C", None, dropped=True),
]


def figures(acc: Accuracy) -> list[float | None]:
    return [bucket.official() for bucket in acc.buckets()]


FIGURE_CASES = [
    # (which figures, compensated, Overall, Easy, Hard, Short, Medium, Long), hand-computed:
    # official = items 1-8: easy {1,2,6} right {1}; hard {3,4,5,7,8} right {3,5,7};
    # short {1,4,7} right {1,7}; medium {2,5} right {5}; long {3,6,8} right {3}
    ("official", False, [50.0, 33.3, 60.0, 66.7, 50.0, 33.3]),  # 4/8 1/3 3/5 2/3 1/2 1/3
    # compensated: items 4 (hard, short) and 6 (easy, long) add 0.25 each
    # 4.5/8=56.25 -> 56.2 (round half to even); 1.25/3=41.67; 3.25/5=65; 2.25/3=75; 1/2; 1.25/3
    ("official", True, [56.2, 41.7, 65.0, 75.0, 50.0, 41.7]),
    # lbeval = items 1-10, 9 (easy, short) and 10 (hard, medium) wrong:
    # 4/10 1/4 3/6 2/4 1/3 1/3
    ("lbeval", False, [40.0, 25.0, 50.0, 50.0, 33.3, 33.3]),
    # compensated, dropped items still 0: 4.5/10; 1.25/4=31.25 -> 31.2; 3.25/6=54.17; 2.25/4=56.25 -> 56.2;
    # 1/3; 1.25/3
    ("lbeval", True, [45.0, 31.2, 54.2, 56.2, 33.3, 41.7]),
]


@pytest.mark.parametrize(("which", "compensated", "expected"), FIGURE_CASES)
def test_accuracy_figures(which: str, compensated: bool, expected: list[float]) -> None:
    function = official_accuracy if which == "official" else lbeval_accuracy
    assert figures(function(ITEMS, compensated=compensated)) == expected


def test_bucket_counts_and_points() -> None:
    acc = official_accuracy(ITEMS, compensated=True)
    assert [(b.n, b.points) for b in acc.buckets()] == [
        (8, 4.5),
        (3, 1.25),
        (5, 3.25),
        (3, 2.25),
        (2, 1.0),
        (3, 1.25),
    ]


def test_scores_report_dropped_items_per_bucket() -> None:
    scores = score_items(ITEMS)
    assert scores.differ
    # item 9: easy, short; item 10: hard, medium
    assert dict(scores.dropped) == {"overall": 2, "easy": 1, "hard": 1, "short": 1, "medium": 1, "long": 0}
    same = score_items(ITEMS[:8])
    assert not same.differ
    assert same.official == same.lbeval


def test_with_missing_adds_absent_expected_items_as_dropped() -> None:
    expected = [ExpectedItem("1", "easy", "short", "A"), ExpectedItem("11", "hard", "long", "B")]
    result = with_missing(ITEMS[:1], expected)
    assert result == [ITEMS[0], ItemResult("11", "hard", "long", "B", None, False, dropped=True)]


POINT_CASES = [
    # (item, compensated, points)
    (it("a", "easy", "short", "A", "A"), False, 1.0),
    (it("a", "easy", "short", "A", "B"), True, 0.0),
    (it("a", "easy", "short", "A", None), False, 0.0),
    (it("a", "easy", "short", "A", None), True, 0.25),
    (it("a", "easy", "short", "A", None, dropped=True), True, 0.0),
]


@pytest.mark.parametrize(("item", "compensated", "points"), POINT_CASES)
def test_item_points(item: ItemResult, compensated: bool, points: float) -> None:
    assert item_points(item, compensated) == points


ROUNDING_CASES = [
    # (right, n, printed): round(100 * right / n, 1), Python's round (exact ties go to even)
    (1, 16, 6.2),  # 6.25 exactly -> 6.2 (half up would give 6.3)
    (3, 16, 18.8),  # 18.75 exactly -> 18.8
    (2, 3, 66.7),  # 66.666...
    (1, 6, 16.7),  # 16.666...
    (0, 4, 0.0),
    (7, 7, 100.0),
]


@pytest.mark.parametrize(("right", "n", "printed"), ROUNDING_CASES)
def test_official_rounding(right: int, n: int, printed: float) -> None:
    items = [it(str(k), "easy", "short", "A", "A" if k < right else "B") for k in range(n)]
    assert accuracy(items).overall.official() == printed


def test_empty_bucket_has_no_figure() -> None:
    assert Bucket(0, 0.0).percent() is None
    assert official_accuracy([ITEMS[0]]).medium.official() is None
