"""The official LongBench v1 scoring rules (eval.py), as pure functions.

- `DATASET_METRIC`: the 21 datasets and their metric.
- `score_example`: for trec, triviaqa, samsum and lsht only the prediction's first line counts
  (`pred.lstrip("\\n").split("\\n")[0]`); the example's score is the best over its reference answers,
  starting from 0.0 (no answer -> 0.0). LongBench-E names (`<dataset>_e`) score like their base dataset.
- `dataset_score`: `round(100 * total / n, 2)`, with `total` summed left to right in Python floats, exactly
  as the official `scorer` does (so the last digit matches, not just the value).
- `longbench_e_scores`: the official `scorer_e`: examples go to "0-4k" (length < 4000), "4-8k"
  (length < 8000) or "8k+"; each bucket is `round(100 * numpy.mean(scores), 2)`, numpy's mean (pairwise
  summation) and numpy's rounding of a numpy float, as the official code gets them. An empty bucket is NaN
  (numpy's mean of nothing), which the official result.json records as `NaN`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scorers.longbench.normalize import FIRST_LINE_DATASETS, first_line
from scorers.longbench.registry import best_over_answers

DATASET_METRIC: dict[str, str] = {
    "narrativeqa": "qa_f1",
    "qasper": "qa_f1",
    "multifieldqa_en": "qa_f1",
    "multifieldqa_zh": "qa_f1_zh",
    "hotpotqa": "qa_f1",
    "2wikimqa": "qa_f1",
    "musique": "qa_f1",
    "dureader": "rouge_zh",
    "gov_report": "rouge",
    "qmsum": "rouge",
    "multi_news": "rouge",
    "vcsum": "rouge_zh",
    "trec": "classification",
    "triviaqa": "qa_f1",
    "samsum": "rouge",
    "lsht": "classification",
    "passage_retrieval_en": "retrieval",
    "passage_count": "count",
    "passage_retrieval_zh": "retrieval_zh",
    "lcc": "code_sim",
    "repobench-p": "code_sim",
}

#: The 13 datasets that LongBench-E has (`<name>_e` on the Hub).
LONGBENCH_E_DATASETS: tuple[str, ...] = (
    "qasper",
    "multifieldqa_en",
    "hotpotqa",
    "2wikimqa",
    "gov_report",
    "multi_news",
    "trec",
    "triviaqa",
    "samsum",
    "passage_count",
    "passage_retrieval_en",
    "lcc",
    "repobench-p",
)

BUCKETS: tuple[str, ...] = ("0-4k", "4-8k", "8k+")


def base_dataset(name: str) -> str:
    """The v1 dataset a name scores as: itself, or `<name>` for `<name>_e`; KeyError if neither."""
    if name in DATASET_METRIC:
        return name
    if name.endswith("_e") and name[:-2] in DATASET_METRIC:
        return name[:-2]
    raise KeyError(f"unknown LongBench dataset {name!r}")


def score_example(dataset: str, prediction: str, answers: list[str], all_classes: list[str] | None) -> float:
    """The official score (0..1) of one prediction: first-line rule, then the best over the answers."""
    base = base_dataset(dataset)
    if base in FIRST_LINE_DATASETS:
        prediction = first_line(prediction)
    return best_over_answers(DATASET_METRIC[base], prediction, answers, all_classes)


def dataset_score(example_scores: Sequence[float]) -> float:
    """round(100 * mean, 2), the mean summed left to right like the official `scorer` (ValueError if empty)."""
    if len(example_scores) == 0:
        raise ValueError("a dataset score needs at least one example")
    total = 0.0
    for score in example_scores:
        total += score
    return round(100 * total / len(example_scores), 2)


def bucket_of(length: float) -> str:
    if length < 4000:
        return "0-4k"
    if length < 8000:
        return "4-8k"
    return "8k+"


def longbench_e_scores(example_scores: Sequence[float], lengths: Sequence[float]) -> dict[str, float]:
    """{"0-4k": x, "4-8k": y, "8k+": z}: the official LongBench-E bucket scores (NaN for an empty bucket)."""
    if len(example_scores) != len(lengths):
        raise ValueError(f"{len(example_scores)} scores but {len(lengths)} lengths")
    buckets: dict[str, list[float]] = {name: [] for name in BUCKETS}
    for score, length in zip(example_scores, lengths, strict=True):
        buckets[bucket_of(length)].append(score)
    return {name: _bucket_score(values) for name, values in buckets.items()}


def _bucket_score(values: list[float]) -> float:
    if not values:
        return float("nan")
    return float(round(100 * np.mean(values), 2))
