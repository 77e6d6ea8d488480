"""LongBench v2's own accuracy figures: one pass's (`V2PassAccuracy`) and a dataset's (`V2Accuracy`, the extras of
analyze's DatasetAccuracy), which accuracy.py computes and report.py renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval.analyze.accuracy_types import DatasetAccuracy
from scorers.longbench_v2.score import BUCKETS

V2_BUCKETS = BUCKETS  # overall, easy, hard, short, medium, long (result.py's column order)


@dataclass(frozen=True)
class V2PassAccuracy:
    """One pass's v2 figures, percent 0-100 per bucket (None for an empty bucket)."""

    n: dict[str, int]  # inputs per bucket
    lbeval: dict[str, float | None]  # every input in the denominator
    official: dict[str, float | None]  # result.py: the left-out items are in no denominator
    lbeval_compensated: dict[str, float | None]  # an unextractable answer scores 0.25
    official_compensated: dict[str, float | None]
    dropped: dict[str, int]  # per bucket: items the official figures leave out
    empty_outputs: int  # left out: an output was '' (pred.py writes no line)
    not_counted: int  # left out: no ok sample (request failed, invalid cache state, no record)
    unextractable: int  # answered without "The correct answer is (X)": 0 points, 0.25 compensated
    correct: int

    @property
    def differ(self) -> bool:
        return self.dropped["overall"] > 0

    def why(self) -> str | None:
        """Why the official figures differ from lbeval's (None when they do not)."""
        if not self.differ:
            return None
        parts = []
        if self.empty_outputs:
            parts.append(f"{self.empty_outputs} with an empty output (pred.py writes no line)")
        if self.not_counted:
            parts.append(f"{self.not_counted} without a valid sample (failed, invalid or missing)")
        return (
            f"the official figures leave out {self.dropped['overall']} of {self.n['overall']} inputs "
            f"({'; '.join(parts)}); lbeval counts them as wrong"
        )


@dataclass(frozen=True)
class V2Accuracy:
    """A v2 dataset's figures, pass -> both figures (DatasetAccuracy.extras; scores.json's `v2`)."""

    by_pass: dict[str, V2PassAccuracy]

    def json_fields(self) -> dict[str, Any]:
        return {JSON_KEY: self.by_pass}


JSON_KEY = "v2"  # the key of the figures in each accuracy entry of scores.json ({} on other datasets)


def v2_figures(acc: DatasetAccuracy) -> dict[str, V2PassAccuracy]:
    """A dataset's v2 figures by pass ({} on a dataset of another benchmark)."""
    return acc.extras.by_pass if isinstance(acc.extras, V2Accuracy) else {}
