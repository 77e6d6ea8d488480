"""retrieval, retrieval_zh (passage_retrieval_en/_zh) and count (passage_count), as in LongBench.

All three count the runs of digits in the prediction (`re.findall(r"\\d+", prediction)`; `\\d` is Unicode, so
fullwidth digits count too) and score `right / len(numbers)`, 0.0 when the prediction has no number:
- count: a number is right when it equals the reference string.
- retrieval: the reference's paragraph id is the first `Paragraph (\\d+)` match in it; a number is right when
  it equals that id. retrieval_zh: the same with `段落(\\d+)`. A reference without an id is an error
  (the official script crashes on it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NUMBER = re.compile(r"\d+")
_PARAGRAPH_EN = re.compile(r"Paragraph (\d+)")
_PARAGRAPH_ZH = re.compile("\u6bb5\u843d(\\d+)")  # 段落


def number_share(prediction: str, target: str) -> float:
    """Share of the prediction's digit runs that equal `target` (0.0 with no digit run)."""
    numbers = _NUMBER.findall(prediction)
    if not numbers:
        return 0.0
    return float(sum(1 for n in numbers if n == target) / len(numbers))


def paragraph_id(reference: str, pattern: re.Pattern[str]) -> str:
    found = pattern.findall(reference)
    if not found:
        raise ValueError(f"reference {reference!r} names no paragraph (expected {pattern.pattern!r})")
    return str(found[0])


def count(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    return number_share(prediction, reference)


def retrieval(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    return number_share(prediction, paragraph_id(reference, _PARAGRAPH_EN))


def retrieval_zh(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    return number_share(prediction, paragraph_id(reference, _PARAGRAPH_ZH))
