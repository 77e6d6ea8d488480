"""eval.report.format: the helpers the Markdown and HTML reports share."""

from __future__ import annotations

import math

import pytest

from eval.report.format import first_char_difference, fmt3


@pytest.mark.parametrize(
    ("a", "b", "at"),
    [
        ("", "", 0),
        ("abc", "abc", 3),
        ("abc", "abd", 2),
        ("abc", "ab", 2),  # a prefix: the length of the shorter
        ("", "x", 0),
        ("x", "y", 0),
        ("héllo", "hello", 1),
    ],
)
def test_first_char_difference(a: str, b: str, at: int) -> None:
    assert first_char_difference(a, b) == at
    assert first_char_difference(b, a) == at


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "n/a"),
        (math.nan, "n/a"),
        (-math.inf, "n/a"),
        (0.0, "0"),
        (0.123456, "0.123"),
        (1234.5, "1.23e+03"),
    ],
)
def test_fmt3(value: float | None, text: str) -> None:
    assert fmt3(value) == text
