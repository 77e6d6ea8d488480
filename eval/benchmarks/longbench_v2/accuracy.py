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

from eval.analyze.accuracy_types import DatasetAccuracy, ExampleScore, PassScore
from eval.analyze.memo import ScoreMemo
from eval.benchmarks.longbench_v2.figures import V2_BUCKETS, V2Accuracy, V2PassAccuracy
from eval.benchmarks.longbench_v2.inputs import v2_fields
from eval.benchmarks.longbench_v2.spec import V2_METRIC
from eval.prepare.inputs import InputRow
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, ok_record
from eval.records.vocabulary import ANSWER_PASSES
from scorers.longbench_v2 import Accuracy, ItemResult, item_result, score_items
from scorers.longbench_v2.score import ExpectedItem, dropped_item


def _percents(acc: Accuracy) -> dict[str, float | None]:
    return {name: bucket.percent() for name, bucket in zip(V2_BUCKETS, acc.buckets(), strict=True)}


def v2_item(row: InputRow, sel: Selection, pass_name: str) -> ItemResult | None:
    """The input's outcome in the pass, or None when lbeval has no ok sample of every call."""
    passes = [pass_name] + ([ANSWER_PASSES[pass_name]] if row.answer_template is not None else [])
    records = [ok_record(sel, row.key, p) for p in passes]
    if any(r is None for r in records):
        return None
    outputs = [r.output_text if r is not None else None for r in records]
    own = v2_fields(row)
    return item_result(row.id, own.difficulty, own.length_class, row.answers[0], outputs)


def expected(row: InputRow) -> ExpectedItem:
    own = v2_fields(row)
    return ExpectedItem(row.id, own.difficulty, own.length_class, row.answers[0])


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


def example_score(
    row: InputRow, sel: Selection, pass_name: str, memo: ScoreMemo | None
) -> ExampleScore | None:
    """analyze's scoring of one input in one pass (eval/analyze/accuracy.py): its points, and its outcome
    (v2_item) as the score's extras; None without an ok sample of every call; `memo` is not used (v2 outcomes
    are cheap)."""
    item = v2_item(row, sel, pass_name)
    return None if item is None else ExampleScore(item_points(item), None, item)


def dataset_accuracy(
    dataset: str, rows: Sequence[InputRow], per_pass: Mapping[str, Mapping[Key, ExampleScore]]
) -> DatasetAccuracy:
    """The dataset's accuracy per pass: PassScore.score is lbeval's overall figure (every input in the
    denominator, 2 decimals), its extras (V2Accuracy) both figures of every pass."""
    passes: dict[str, PassScore] = {}
    v2: dict[str, V2PassAccuracy] = {}
    for pass_name, scores in per_pass.items():
        items = {k: s.extras for k, s in scores.items() if isinstance(s.extras, ItemResult)}
        v2[pass_name] = figures = v2_pass_accuracy(rows, items)
        overall = figures.lbeval["overall"]
        score = None if overall is None else round(overall, 2)
        passes[pass_name] = PassScore(score, sum(1 for r in rows if r.key in items), len(rows))
    return DatasetAccuracy(dataset, V2_METRIC, passes, V2Accuracy(v2))
