"""classification (trec, lsht): the official LongBench class-matching score, quirks included.

1. `matches` = the classes (from `all_classes`, in order) that occur as substrings of the prediction.
2. Walk `matches` with a list iterator while removing from the same list: every visited class that is a
   substring of the reference but not equal to it is removed (`list.remove`, i.e. its first equal entry).
   Because removal shifts the list under the iterator, the element right after a removed one is skipped and
   never considered for removal. Example: classes ["a", "ab", "abc"] all in the prediction, reference "abc":
   "a" is removed, "ab" slides into the visited slot and is skipped, "abc" stays -> matches ["ab", "abc"].
3. Score = 1 / len(matches) if the reference is in `matches`, else 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence


def surviving_matches(prediction: str, reference: str, all_classes: Sequence[str]) -> list[str]:
    """The match list after the official remove-while-iterating pass (step 2 above)."""
    matches = [name for name in all_classes if name in prediction]
    index = 0  # the position a Python list iterator would read next
    while index < len(matches):
        term = matches[index]
        index += 1
        if term in reference and term != reference:
            del matches[matches.index(term)]
    return matches


def classification(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    """The official classification score of one prediction against one reference class."""
    if all_classes is None:
        raise ValueError("classification needs all_classes (the dataset's list of class names)")
    matches = surviving_matches(prediction, reference, all_classes)
    if reference in matches:
        return 1.0 / len(matches)
    return 0.0
