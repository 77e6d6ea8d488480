"""Accuracy of one run: the official LongBench score per dataset and generation pass, per example and overall.

Each benchmark's scoring adapter is in its package: LongBench v1 eval/benchmarks/longbench/accuracy.py (an
output -> its dataset's metric), LongBench v2 eval/benchmarks/longbench_v2/accuracy.py. v2's PassScore.score is
lbeval's accuracy over every input (an input without a usable outcome counts as wrong), and DatasetAccuracy.v2
holds, per pass, that and the official result.py figures (dropped items out of the denominator) by difficulty
and length, compensated too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eval.analyze.memo import ScoreMemo, output_scores
from eval.benchmarks.longbench.accuracy import dataset_figure
from eval.benchmarks.longbench.spec import get_spec
from eval.benchmarks.longbench_v2.accuracy import V2PassAccuracy, item_points, v2_item, v2_pass_accuracy
from eval.benchmarks.longbench_v2.spec import V2_METRIC, is_v2
from eval.prepare.inputs import InputRow
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, ok_record
from scorers.longbench_v2 import ItemResult


@dataclass(frozen=True)
class ExampleScore:
    """One example's scores in one pass, both 0..1."""

    official: float  # the dataset's official LongBench metric (v2: 1 right, 0 wrong or no answer)
    rouge_l: float | None  # secondary: rouge-score ROUGE-L F, rouge datasets only
    v2_item: ItemResult | None = None  # LongBench v2: the outcome (answer letter, dropped by pred.py's rule)


@dataclass(frozen=True)
class PassScore:
    score: float | None  # official LongBench dataset score (0-100, 2 decimals) over scored examples
    n_scored: int
    n_total: int  # every input of the dataset, including errored, invalid and missing samples
    rouge_l: float | None = None  # secondary: rouge-score ROUGE-L F (0-100), rouge datasets only


@dataclass(frozen=True)
class DatasetAccuracy:
    dataset: str
    metric: str
    passes: dict[str, PassScore]
    v2: dict[str, V2PassAccuracy] = field(default_factory=dict)  # LongBench v2: pass -> both figures


def example_scores(
    rows: Sequence[InputRow], sel: Selection, pass_name: str, memo: ScoreMemo | None = None
) -> dict[Key, ExampleScore]:
    """The scores of each example with an ok sample in the pass; `memo`: kept between scorings (memo.py)."""
    out: dict[Key, ExampleScore] = {}
    for row in rows:
        if is_v2(row.dataset):
            item = v2_item(row, sel, pass_name)
            if item is not None:
                out[row.key] = ExampleScore(item_points(item), None, item)
            continue
        rec = ok_record(sel, row.key, pass_name)
        if rec is None or rec.output_text is None:
            continue
        got = output_scores(memo, row, rec, rec.output_text)
        out[row.key] = ExampleScore(got.official, got.rouge_l)
    return out


def accuracy(
    rows: Sequence[InputRow], per_pass: Mapping[str, Mapping[Key, ExampleScore]]
) -> list[DatasetAccuracy]:
    by_ds: dict[str, list[InputRow]] = {}
    for row in rows:
        by_ds.setdefault(row.dataset, []).append(row)
    result = []
    for ds, ds_rows in by_ds.items():
        if is_v2(ds):
            result.append(_v2_accuracy(ds, ds_rows, per_pass))
            continue
        passes: dict[str, PassScore] = {}
        for pass_name, scores in per_pass.items():
            got = [scores[r.key] for r in ds_rows if r.key in scores]
            official = dataset_figure([g.official for g in got])
            rouge_l = dataset_figure([g.rouge_l for g in got if g.rouge_l is not None])
            passes[pass_name] = PassScore(official, len(got), len(ds_rows), rouge_l)
        result.append(DatasetAccuracy(ds, get_spec(ds).metric, passes))
    return result


def _v2_accuracy(
    ds: str, rows: Sequence[InputRow], per_pass: Mapping[str, Mapping[Key, ExampleScore]]
) -> DatasetAccuracy:
    passes: dict[str, PassScore] = {}
    v2: dict[str, V2PassAccuracy] = {}
    for pass_name, scores in per_pass.items():
        items = {k: s.v2_item for k, s in scores.items() if s.v2_item is not None}
        v2[pass_name] = figures = v2_pass_accuracy(rows, items)
        overall = figures.lbeval["overall"]
        score = None if overall is None else round(overall, 2)
        passes[pass_name] = PassScore(score, sum(1 for r in rows if r.key in items), len(rows))
    return DatasetAccuracy(ds, V2_METRIC, passes, v2)
