"""The official answer extraction: asterisks, parentheses first, the bare fallback, case, several matches."""

from __future__ import annotations

import pytest

from scorers.longbench_v2 import extract_answer

CASES = [
    # (response, expected letter, why)
    ("The correct answer is (A)", "A", "the format the prompt asks for"),
    ("Reasoning...\nThe correct answer is (D).", "D", "searched anywhere, not matched at the start"),
    ("The correct answer is **(B)**", "B", "asterisks removed before matching"),
    ("**The correct answer is (C)**", "C", "bold sentence"),
    ("The correct answer is *B*", "B", "bare fallback after removing asterisks"),
    ("The correct answer is B.", "B", "bare fallback"),
    ("The correct answer is Apple pie", "A", "bare fallback takes the first capital A-D, even inside a word"),
    (
        "The correct answer is B, not (C). The correct answer is (C)",
        "C",
        "parenthesised form wins everywhere",
    ),
    ("The correct answer is (A). Later: The correct answer is (B)", "A", "first parenthesised match"),
    ("The correct answer is B. Then: The correct answer is D", "B", "first bare match"),
    ("The correct answer is (A) or (B)", "A", "the letter right after the phrase"),
    ("the correct answer is (A)", None, "case-sensitive phrase"),
    ("The correct answer is (a)", None, "lowercase letter: neither pattern"),
    ("The correct answer is (E)", None, "only A-D"),
    ("The correct answer is: (A)", None, "a colon breaks both patterns"),
    ("The correct answer is\n(A)", None, "a newline is not the single space"),
    ("The correct  answer is (A)", None, "two spaces"),
    ("The correct answer is ( B )", None, "spaces inside the parentheses, and '(' is no letter"),
    ("Answer: B", None, "no phrase"),
    ("", None, "empty response"),
    ("The correct answer is (**A**)", "A", "asterisks inside the parentheses"),
]


@pytest.mark.parametrize(("response", "expected", "why"), CASES, ids=[c[2] for c in CASES])
def test_extract_answer(response: str, expected: str | None, why: str) -> None:
    assert extract_answer(response) == expected, why
