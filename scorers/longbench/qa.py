"""qa_f1 (English) and qa_f1_zh (Chinese): bag-of-tokens F1, as the official LongBench metric.

F1 of two token lists: `same` = size of the multiset intersection; 0.0 when `same` is 0, else
`precision = same / len(prediction)`, `recall = same / len(reference)`, `f1 = 2 * p * r / (p + r)`
(that expression, in that order, so the floats match the official ones bit for bit).

- qa_f1: tokens = `normalize_answer(text).split()`.
- qa_f1_zh: tokens = jieba precise-mode tokens, each passed through `normalize_zh_token`, empties dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from scorers.longbench.normalize import jieba_cut, normalize_answer, normalize_zh_token


def token_f1(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """Multiset-overlap F1 of two token lists (0.0 when they share no token)."""
    same = sum((Counter(prediction) & Counter(reference)).values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(prediction)
    recall = 1.0 * same / len(reference)
    return (2 * precision * recall) / (precision + recall)


def qa_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def qa_zh_tokens(text: str) -> list[str]:
    tokens = (normalize_zh_token(t) for t in jieba_cut(text))
    return [t for t in tokens if len(t) > 0]


def qa_f1(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    """qa_f1 of one prediction against one reference answer."""
    return token_f1(qa_tokens(prediction), qa_tokens(reference))


def qa_f1_zh(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    """qa_f1_zh of one prediction against one reference answer."""
    return token_f1(qa_zh_tokens(prediction), qa_zh_tokens(reference))


def best_qa_f1(prediction: str, answers: Sequence[str], all_classes: Sequence[str] | None = None) -> float:
    """max(0.0, qa_f1 over answers), normalising the prediction once."""
    pred = qa_tokens(prediction)
    return max([0.0, *(token_f1(pred, qa_tokens(a)) for a in answers)])


def best_qa_f1_zh(prediction: str, answers: Sequence[str], all_classes: Sequence[str] | None = None) -> float:
    """max(0.0, qa_f1_zh over answers), segmenting the prediction once."""
    if not answers:
        return 0.0
    pred = qa_zh_tokens(prediction)
    return max([0.0, *(token_f1(pred, qa_zh_tokens(a)) for a in answers)])
