"""LongBench v1 scoring with official parity: metrics, the dataset -> metric table, eval.py's rules.

Public API:
- `DATASET_METRIC`: the 21 datasets -> metric name; `METRICS`: metric name -> pure
  `score(prediction, reference, *, all_classes=None) -> float`.
- `score_example(dataset, prediction, answers, all_classes) -> float`: the official per-example score.
- `dataset_score(example_scores)`, `longbench_e_scores(example_scores, lengths)`: official aggregates.
- `rouge_score_l(prediction, answers)`: Google rouge-score ROUGE-L F-measure (a secondary column).
- `evaluate_folder(pred_dir, longbench_e)`: the result.json of the eval.py drop-in.
"""

from scorers.longbench.dropin import PredictionFileError, evaluate_folder, format_table, write_result
from scorers.longbench.official import (
    DATASET_METRIC,
    LONGBENCH_E_DATASETS,
    base_dataset,
    dataset_score,
    longbench_e_scores,
    score_example,
)
from scorers.longbench.registry import METRICS
from scorers.longbench.rouge_google import rouge_score_l

__all__ = [
    "DATASET_METRIC",
    "LONGBENCH_E_DATASETS",
    "METRICS",
    "PredictionFileError",
    "base_dataset",
    "dataset_score",
    "evaluate_folder",
    "format_table",
    "longbench_e_scores",
    "rouge_score_l",
    "score_example",
    "write_result",
]
