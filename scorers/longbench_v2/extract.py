"""The official LongBench v2 answer extraction (`extract_answer` in THUDM/LongBench pred.py @ 2e00731f).

Behaviour, as read in the official code:
- every `*` is removed first (so Markdown bold `**(B)**` or `The correct answer is **B**` still counts);
- `re.search` (anywhere in the text, first occurrence, case-sensitive) for
  `The correct answer is \\(([A-D])\\)`; only if that finds nothing, `re.search` for
  `The correct answer is ([A-D])` (so "The correct answer is Apple" extracts "A", and a parenthesised
  answer later in the text beats a bare one earlier);
- no match -> None. The function itself does not strip; pred.py strips the model output before calling it
  (irrelevant to a search).
"""

from __future__ import annotations

import re

_PARENTHESISED = re.compile(r"The correct answer is \(([A-D])\)")
_BARE = re.compile(r"The correct answer is ([A-D])")


def extract_answer(response: str) -> str | None:
    """The letter A-D the official regexes take from a model response, or None when neither matches."""
    text = response.replace("*", "")
    match = _PARENTHESISED.search(text) or _BARE.search(text)
    return match.group(1) if match else None
