"""Metric name -> pure metric function, all with one signature:

    score(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float

and, for the drop-in's speed, metric name -> the best score over several answers (the prediction is
prepared once; the value is exactly `max(0.0, score(prediction, a) for a in answers)`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from scorers.longbench.classification import classification
from scorers.longbench.code import code_sim
from scorers.longbench.qa import best_qa_f1, best_qa_f1_zh, qa_f1, qa_f1_zh
from scorers.longbench.retrieval import count, retrieval, retrieval_zh
from scorers.longbench.rouge_official import best_rouge, best_rouge_zh, rouge, rouge_zh


class Metric(Protocol):
    def __call__(
        self, prediction: str, reference: str, *, all_classes: Sequence[str] | None = None
    ) -> float: ...


BestOver = Callable[[str, Sequence[str], Sequence[str] | None], float]

METRICS: dict[str, Callable[..., float]] = {
    "qa_f1": qa_f1,
    "qa_f1_zh": qa_f1_zh,
    "rouge": rouge,
    "rouge_zh": rouge_zh,
    "classification": classification,
    "retrieval": retrieval,
    "retrieval_zh": retrieval_zh,
    "count": count,
    "code_sim": code_sim,
}

_PREPARED: dict[str, BestOver] = {
    "qa_f1": best_qa_f1,
    "qa_f1_zh": best_qa_f1_zh,
    "rouge": best_rouge,
    "rouge_zh": best_rouge_zh,
}


def best_over_answers(
    metric: str, prediction: str, answers: Sequence[str], all_classes: Sequence[str] | None
) -> float:
    """max(0.0, METRICS[metric](prediction, a, all_classes=all_classes) for a in answers)."""
    prepared = _PREPARED.get(metric)
    if prepared is not None:
        return prepared(prediction, answers, all_classes)
    score = METRICS[metric]
    best = 0.0
    for answer in answers:
        best = max(best, score(prediction, answer, all_classes=all_classes))
    return best
