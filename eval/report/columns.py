"""What the comparison tables share: the two side columns and a change's interval cell."""

from __future__ import annotations

from eval.analyze.compare import Change, Comparison
from eval.report.cells import Cell, Interval


def side_columns(c: Comparison) -> tuple[str, str]:
    """The base and variant column headings, each naming its variant."""
    return f"base ({c.base.scores.run.variant})", f"variant ({c.variant.scores.run.variant})"


def change_cell(change: Change | None, suffix: str, decimals: int) -> Cell:
    """A change's estimate and interval (None when the change was not measured)."""
    if change is None:
        return None
    return Interval(change.estimate, change.low, change.high, decimals, suffix)
