"""LongBench v2 (THUDM/LongBench-v2, multiple choice A-D) scoring with official parity; imports nothing from eval/.

Public API:
- `extract_answer(response)`: the official answer extraction (pred.py).
- `ItemResult`, `item_result(...)`: one item's outcome; `official_accuracy`, `lbeval_accuracy`,
  `score_items` (both, with the dropped counts): overall / easy / hard / short / medium / long.
- `evaluate_folder`, `format_result`: the result.py drop-in (`python -m scorers.longbench_v2`).

The official prompts and pred.py's truncation are the benchmark's, not a metric's: eval/benchmarks/longbench_v2/.
"""

from scorers.longbench_v2.dropin import (
    FileScores,
    PredictionFileError,
    evaluate_folder,
    format_lbeval,
    format_result,
    prediction_line,
    read_expected,
)
from scorers.longbench_v2.extract import extract_answer
from scorers.longbench_v2.score import (
    Accuracy,
    Bucket,
    ExpectedItem,
    ItemResult,
    Scores,
    item_result,
    lbeval_accuracy,
    official_accuracy,
    score_items,
    with_missing,
)

__all__ = [
    "Accuracy",
    "Bucket",
    "ExpectedItem",
    "FileScores",
    "ItemResult",
    "PredictionFileError",
    "Scores",
    "evaluate_folder",
    "extract_answer",
    "format_lbeval",
    "format_result",
    "item_result",
    "lbeval_accuracy",
    "official_accuracy",
    "prediction_line",
    "read_expected",
    "score_items",
    "with_missing",
]
