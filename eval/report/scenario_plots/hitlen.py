"""The hitlen scenario's plots in report.html: equal outputs and max |top-k logprob delta|, primed prefix vs cold,
by hit length (the hitlen_<class> sub-rows either run measured)."""

from __future__ import annotations

from eval.analyze.compare import Comparison
from eval.report.scenario_plots.kit import (
    DELTA_AXIS,
    EQUAL_AXIS,
    ZERO_DELTA_LOG,
    points,
    register_plots,
    sides,
    sub_rows,
)
from eval.report.svg import Series, errorbar_plot

__all__ = ["hitlen_plots"]


def hitlen_plots(c: Comparison) -> list[str]:
    hits = sub_rows(c, "hitlen_")
    if not hits:
        return []
    plots = []
    for measure, y_label, title in (
        ("equal", EQUAL_AXIS, "Equal outputs, primed prefix vs cold, by hit length"),
        ("delta", DELTA_AXIS, f"Max |top-k logprob delta| by hit length (0 drawn at {ZERO_DELTA_LOG:g})"),
    ):
        series = [
            Series(side, color, points(att, [k for k, _ in hits], measure)) for side, att, color in sides(c)
        ]
        plots.append(errorbar_plot([label for _, label in hits], series, y_label, title, height=320))
    return plots


register_plots("hitlen", hitlen_plots)
