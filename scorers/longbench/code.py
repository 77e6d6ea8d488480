"""code_sim (lcc, repobench-p): fuzzywuzzy `fuzz.ratio` of the first code line against the reference.

- The line: after `prediction.lstrip("\\n")`, split on "\\n"; the first line that contains none of
  "`", "#", "//"; "" when there is none.
- `fuzz_ratio` is fuzzywuzzy 0.18.0's `fuzz.ratio` with its pure-Python backend, the one the official
  requirements install: the decorators run in the order None -> 0, equal strings -> 100, an empty string ->
  0; otherwise `int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))` (default autojunk, Python's
  round-half-to-even). It is computed here with difflib directly, so the result never depends on whether
  python-Levenshtein (which fuzzywuzzy would silently prefer, and which gives other numbers) is installed.
- Score = ratio / 100.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher


def fuzz_ratio(a: str | None, b: str | None) -> int:
    """fuzzywuzzy 0.18.0 `fuzz.ratio(a, b)` on the difflib backend, an int in 0..100."""
    if a is None or b is None:
        return 0
    if a == b:
        return 100
    if len(a) == 0 or len(b) == 0:
        return 0
    return int(round(100 * SequenceMatcher(None, a, b).ratio()))


def first_code_line(prediction: str) -> str:
    """The first line (after leading newlines) with no backtick, '#' or '//'; "" if there is none."""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            return line
    return ""


def code_sim(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    return fuzz_ratio(first_code_line(prediction), reference) / 100
