"""A LongBench v2 pass's accuracy figures: the type the analysis returns (accuracy.py computes it) and the report
renders (eval/report/v2.py). Below every stage, so analyze's result types (eval/analyze/accuracy_types.py) can
hold it while this package's scoring adapter returns them."""

from __future__ import annotations

from dataclasses import dataclass

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
