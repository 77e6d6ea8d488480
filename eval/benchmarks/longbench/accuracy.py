"""LongBench v1 scoring adapter: a model output -> the dataset's official metric (scorers.longbench) and the
secondary ROUGE-L; a dataset's figure from its examples' scores. Which record is scored is analyze's
(eval/analyze/accuracy.py: the final ok record of each input and pass)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval.benchmarks.longbench.spec import base_name, get_spec
from eval.prepare.inputs import InputRow
from scorers import longbench
from scorers.longbench.normalize import first_line

# the secondary column (Google rouge-score ROUGE-L): English rouge datasets only; its tokenizer drops
# non-ASCII text, so on rouge_zh datasets it would always be 0.0
SECONDARY_ROUGE_METRICS = ("rouge",)


@dataclass(frozen=True)
class OutputScores:
    """One output's scores, both 0..1."""

    official: float  # the dataset's official LongBench metric
    rouge_l: float | None  # secondary: rouge-score ROUGE-L F, rouge datasets only


def score_output(row: InputRow, output_text: str) -> OutputScores:
    """The row's dataset's official metric and, on rouge datasets, the secondary ROUGE-L (of the output's first
    line where the dataset keeps only that)."""
    ds = base_name(row.dataset)
    spec = get_spec(ds)
    official = longbench.score_example(ds, output_text, row.answers, row.all_classes)
    secondary = None
    if spec.metric in SECONDARY_ROUGE_METRICS:
        pred = first_line(output_text) if spec.first_line_only else output_text
        secondary = longbench.rouge_score_l(pred, row.answers)
    return OutputScores(official, secondary)


def dataset_figure(scores: Sequence[float]) -> float | None:
    """The official dataset score (0-100, 2 decimals) over the scored examples; None when there is none."""
    return longbench.dataset_score(list(scores)) if scores else None
