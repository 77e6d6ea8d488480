"""LongBench v2 accuracy of one run, per generation pass: the official figures and lbeval's, compensated too.

An input's outcome in pass p (cold, warm, repeat) comes from its final records: the one call of 0shot and
nocontext inputs; for CoT inputs the reasoning call (p) and the answer call (cold_answer...), the answer call's
output holding the letter. `scorers.longbench_v2.item_result` applies the official answer extraction and pred.py's
rule that an empty output ('' from either call) writes no line.

Two denominators (scorers.longbench_v2.score):
- lbeval: every input counts; an input without a usable outcome is wrong (0 points, also when compensated).
- official (result.py): only the items pred.py would have written are counted. Left out: an empty output, and
  an input lbeval has no ok sample of (a failed request, which pred.py also drops after its retries, and a sample
  lbeval does not count: invalid cache state, or no record).
The two agree exactly when nothing is left out; otherwise both are shown, with the counts that make them differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eval.prepare.inputs import InputRow
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, ok_record
from eval.records.vocabulary import ANSWER_PASSES
from scorers.longbench_v2 import Accuracy, ItemResult, item_result, score_items
from scorers.longbench_v2.score import BUCKETS, ExpectedItem, dropped_item

V2_BUCKETS = BUCKETS  # overall, easy, hard, short, medium, long (result.py's column order)


@dataclass(frozen=True)
class V2PassAccuracy:
    """One pass's v2 figures, percent 0-100 per bucket (None for an empty bucket)."""

    n: dict[str, int]  # inputs per bucket
    lbeval: dict[str, float | None]  # every input in the denominator
    official: dict[str, float | None]  # result.py: the left-out items are in no denominator
    lbeval_compensated: dict[str, float | None]  # an unextractable answer scores 0.25
    official_compensated: dict[str, float | None]
    dropped: dict[str, int]  # per bucket: items the official figures leave out
    empty_outputs: int  # left out: an output was '' (pred.py writes no line)
    not_counted: int  # left out: no ok sample (request failed, invalid cache state, no record)
    unextractable: int  # answered without "The correct answer is (X)": 0 points, 0.25 compensated
    correct: int

    @property
    def differ(self) -> bool:
        return self.dropped["overall"] > 0

    def why(self) -> str | None:
        """Why the official figures differ from lbeval's (None when they do not)."""
        if not self.differ:
            return None
        parts = []
        if self.empty_outputs:
            parts.append(f"{self.empty_outputs} with an empty output (pred.py writes no line)")
        if self.not_counted:
            parts.append(f"{self.not_counted} without a valid sample (failed, invalid or missing)")
        return (
            f"the official figures leave out {self.dropped['overall']} of {self.n['overall']} inputs "
            f"({'; '.join(parts)}); lbeval counts them as wrong"
        )


def _percents(acc: Accuracy) -> dict[str, float | None]:
    return {name: bucket.percent() for name, bucket in zip(V2_BUCKETS, acc.buckets(), strict=True)}


def v2_item(row: InputRow, sel: Selection, pass_name: str) -> ItemResult | None:
    """The input's outcome in the pass, or None when lbeval has no ok sample of every call."""
    passes = [pass_name] + ([ANSWER_PASSES[pass_name]] if row.answer_template is not None else [])
    records = [ok_record(sel, row.key, p) for p in passes]
    if any(r is None for r in records):
        return None
    outputs = [r.output_text if r is not None else None for r in records]
    return item_result(row.id, str(row.difficulty), str(row.length_class), row.answers[0], outputs)


def expected(row: InputRow) -> ExpectedItem:
    return ExpectedItem(row.id, str(row.difficulty), str(row.length_class), row.answers[0])


def v2_pass_accuracy(rows: Sequence[InputRow], items: Mapping[Key, ItemResult]) -> V2PassAccuracy:
    """Both figures over `rows` (one dataset's v2 inputs); `items`: the outcomes lbeval has (v2_item)."""
    outcomes = [items.get(r.key) or dropped_item(expected(r)) for r in rows]
    plain, compensated = score_items(outcomes), score_items(outcomes, compensated=True)
    return V2PassAccuracy(
        n={name: b.n for name, b in zip(V2_BUCKETS, plain.lbeval.buckets(), strict=True)},
        lbeval=_percents(plain.lbeval),
        official=_percents(plain.official),
        lbeval_compensated=_percents(compensated.lbeval),
        official_compensated=_percents(compensated.official),
        dropped=dict(plain.dropped),
        empty_outputs=sum(1 for r in rows if r.key in items and items[r.key].dropped),
        not_counted=sum(1 for r in rows if r.key not in items),
        unextractable=sum(1 for o in outcomes if not o.dropped and o.pred is None),
        correct=sum(o.judge for o in outcomes),
    )


def item_points(item: ItemResult) -> float:
    """An item's score (0..1) as lbeval counts it: 1 right, else 0 (a dropped item too)."""
    return 1.0 if item.judge else 0.0
