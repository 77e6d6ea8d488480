"""LongBench v2 accuracy: per-item results, the official result.py figures and lbeval's.

Official behaviour (THUDM/LongBench @ 2e00731f):
- pred.py writes no line for an item whose model output is `''` (a failed request after 5 tries returns
  `''`; with `--cot` either call's `''` output), so result.py never sees it: it is dropped from every
  denominator. A whitespace-only output is written (its response strips to `''`, pred None, judge False).
- result.py: `acc = int(judge)`; with `compensated = True` (a constant edited in the script) an item with
  `pred == None` scores 0.25 instead. Buckets: `difficulty == "easy"` else hard; `length` "short",
  "medium", else long. Overall = (easy points + hard points) / items; each figure is
  `round(100 * points / n, 1)` (Python's round, printed with `str`); an empty bucket divides by zero.

lbeval's figures count every input item: a dropped item (empty output / failed request) is wrong, 0 points
(also when compensated: it is a failure, not an unextractable answer). `Scores.dropped` says how many
items, per bucket, the official figures leave out; the two agree exactly when none is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scorers.longbench_v2.extract import extract_answer

LETTERS = ("A", "B", "C", "D")
DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
BUCKETS = ("overall", "easy", "hard", "short", "medium", "long")
COMPENSATED_POINTS = 0.25  # an unextractable answer, as if guessed among four choices


@dataclass(frozen=True)
class ItemResult:
    """One item's outcome. `dropped`: the official pred.py would not have written it (empty output)."""

    id: str
    difficulty: str
    length: str
    answer: str
    pred: str | None
    judge: bool
    dropped: bool = False

    def __post_init__(self) -> None:
        if self.difficulty not in DIFFICULTIES:
            raise ValueError(f"{self.id}: difficulty {self.difficulty!r} is not one of {DIFFICULTIES}")
        if self.length not in LENGTHS:
            raise ValueError(f"{self.id}: length {self.length!r} is not one of {LENGTHS}")
        if self.answer not in LETTERS or (self.pred is not None and self.pred not in LETTERS):
            raise ValueError(f"{self.id}: answer {self.answer!r} / pred {self.pred!r} must be letters A-D")
        if self.judge != (self.pred == self.answer):
            raise ValueError(f"{self.id}: judge {self.judge} but pred {self.pred!r}, answer {self.answer!r}")
        if self.dropped and self.pred is not None:
            raise ValueError(f"{self.id}: a dropped item has no prediction")


def is_dropped_output(output: str | None) -> bool:
    """pred.py's `if output == '': continue` (None: lbeval's failed request, which pred.py returns as '')."""
    return output is None or output == ""


def item_result(
    item_id: str, difficulty: str, length: str, answer: str, outputs: Sequence[str | None]
) -> ItemResult:
    """An item's result from its raw model outputs, in call order (one call, or CoT's two)."""
    if not outputs:
        raise ValueError(f"{item_id}: no model output")
    if any(is_dropped_output(output) for output in outputs):
        return ItemResult(item_id, difficulty, length, answer, None, False, dropped=True)
    last = outputs[-1]
    pred = extract_answer(last.strip()) if last is not None else None
    return ItemResult(item_id, difficulty, length, answer, pred, pred == answer)


@dataclass(frozen=True)
class ExpectedItem:
    """What the data says of an input item (to count the ones missing from a prediction file)."""

    id: str
    difficulty: str
    length: str
    answer: str


def dropped_item(item: ExpectedItem) -> ItemResult:
    """An input item with no usable output (missing from an official prediction file)."""
    return ItemResult(item.id, item.difficulty, item.length, item.answer, None, False, dropped=True)


def item_points(item: ItemResult, compensated: bool) -> float:
    """1 right, 0 wrong; 0.25 for an unextractable answer when compensated; 0 for a dropped item."""
    if item.dropped:
        return 0.0
    if compensated and item.pred is None:
        return COMPENSATED_POINTS
    return 1.0 if item.judge else 0.0


@dataclass(frozen=True)
class Bucket:
    """Item count and points of one column."""

    n: int
    points: float

    def percent(self) -> float | None:
        """100 * points / n, computed as result.py does (None for an empty bucket, where it crashes)."""
        return 100 * self.points / self.n if self.n else None

    def official(self) -> float | None:
        """The figure result.py prints: `round(100 * points / n, 1)`."""
        value = self.percent()
        return None if value is None else round(value, 1)


@dataclass(frozen=True)
class Accuracy:
    overall: Bucket
    easy: Bucket
    hard: Bucket
    short: Bucket
    medium: Bucket
    long: Bucket

    def buckets(self) -> tuple[Bucket, ...]:
        """In result.py's column order: Overall, Easy, Hard, Short, Medium, Long."""
        return (self.overall, self.easy, self.hard, self.short, self.medium, self.long)


def accuracy(items: Iterable[ItemResult], *, compensated: bool = False) -> Accuracy:
    """Accuracy over exactly these items (dropped ones count as 0 points)."""
    n = dict.fromkeys(BUCKETS[1:], 0)
    points = dict.fromkeys(BUCKETS[1:], 0.0)
    for item in items:
        value = item_points(item, compensated)
        for key in (item.difficulty, item.length):
            n[key] += 1
            points[key] += value
    overall = Bucket(n["easy"] + n["hard"], points["easy"] + points["hard"])
    return Accuracy(overall, *(Bucket(n[key], points[key]) for key in BUCKETS[1:]))


def official_accuracy(items: Iterable[ItemResult], *, compensated: bool = False) -> Accuracy:
    """result.py's figures: dropped items are not in its input, so not in any denominator."""
    return accuracy((item for item in items if not item.dropped), compensated=compensated)


def lbeval_accuracy(items: Iterable[ItemResult], *, compensated: bool = False) -> Accuracy:
    """lbeval's figures: every input item counts; a dropped item is wrong."""
    return accuracy(items, compensated=compensated)


@dataclass(frozen=True)
class Scores:
    """Both figures and the per-bucket counts of dropped items that make them differ."""

    official: Accuracy
    lbeval: Accuracy
    dropped: Mapping[str, int]  # bucket name (BUCKETS) -> dropped items in it

    @property
    def differ(self) -> bool:
        """True when the denominators differ (some item was dropped by the official rule)."""
        return self.dropped["overall"] > 0


def score_items(items: Sequence[ItemResult], *, compensated: bool = False) -> Scores:
    """Official and lbeval accuracy of the same items, with the dropped counts."""
    dropped = [item for item in items if item.dropped]
    counts = {key: sum(1 for item in dropped if key in (item.difficulty, item.length)) for key in BUCKETS}
    counts["overall"] = len(dropped)
    return Scores(
        official_accuracy(items, compensated=compensated),
        lbeval_accuracy(items, compensated=compensated),
        counts,
    )


def with_missing(items: Sequence[ItemResult], expected: Iterable[ExpectedItem]) -> list[ItemResult]:
    """`items` plus, as dropped, every expected item whose id has no result (in `expected` order)."""
    seen = {item.id for item in items}
    return [*items, *(dropped_item(e) for e in expected if e.id not in seen)]
