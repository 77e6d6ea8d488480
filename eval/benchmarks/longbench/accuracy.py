"""LongBench v1 scoring adapter: a model output -> the dataset's official metric (scorers.longbench) and the
secondary ROUGE-L; a dataset's figure from its examples' scores. Which records are scored is analyze's
(eval/analyze/accuracy.py: the final ok record of each input and pass); analyze calls `example_score` and
`dataset_accuracy` (its SCORING mapping)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eval.analyze.accuracy_types import SECONDARY_ROUGE_METRICS, DatasetAccuracy, ExampleScore, PassScore
from eval.analyze.memo import ScoreMemo
from eval.benchmarks.longbench.spec import base_name, get_spec
from eval.prepare.inputs import InputRow
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, ok_record
from scorers import longbench
from scorers.longbench.normalize import first_line


def score_output(row: InputRow, output_text: str) -> ExampleScore:
    """The row's dataset's official metric and, on rouge datasets, the secondary ROUGE-L (of the output's first
    line where the dataset keeps only that)."""
    ds = base_name(row.dataset)
    spec = get_spec(ds)
    official = longbench.score_example(ds, output_text, row.answers, row.all_classes)
    secondary = None
    if spec.metric in SECONDARY_ROUGE_METRICS:
        pred = first_line(output_text) if spec.first_line_only else output_text
        secondary = longbench.rouge_score_l(pred, row.answers)
    return ExampleScore(official, secondary)


def dataset_figure(scores: Sequence[float]) -> float | None:
    """The official dataset score (0-100, 2 decimals) over the scored examples; None when there is none."""
    return longbench.dataset_score(list(scores)) if scores else None


def example_score(
    row: InputRow, sel: Selection, pass_name: str, memo: ScoreMemo | None
) -> ExampleScore | None:
    """The scores of the input's final ok output in the pass (None without one); kept in `memo` when given."""
    rec = ok_record(sel, row.key, pass_name)
    if rec is None or rec.output_text is None:
        return None
    text = rec.output_text
    return score_output(row, text) if memo is None else memo.output(row, rec, lambda: score_output(row, text))


def dataset_accuracy(
    dataset: str, rows: Sequence[InputRow], per_pass: Mapping[str, Mapping[Key, ExampleScore]]
) -> DatasetAccuracy:
    """The dataset's official score (and ROUGE-L) per pass over its scored examples."""
    passes: dict[str, PassScore] = {}
    for pass_name, scores in per_pass.items():
        got = [scores[r.key] for r in rows if r.key in scores]
        official = dataset_figure([g.official for g in got])
        rouge_l = dataset_figure([g.rouge_l for g in got if g.rouge_l is not None])
        passes[pass_name] = PassScore(official, len(got), len(rows), rouge_l)
    return DatasetAccuracy(dataset, get_spec(dataset).metric, passes)
