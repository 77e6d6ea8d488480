"""Small text helpers shared by the Markdown and HTML reports."""

from __future__ import annotations

import math


def first_char_difference(a: str, b: str) -> int:
    """Index of the first character where a and b differ (len of the shorter if one is a prefix)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def fmt3(value: float | None) -> str:
    """3 significant digits; n/a for a missing or non-finite value."""
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3g}"
