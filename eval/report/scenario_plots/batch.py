"""The batch scenario's plots in report.html: equal outputs and max |top-k logprob delta|, alone vs in a batch,
by batch size, cold and warm for each run (the batch_b<B> and batch_warm_b<B> sub-rows either run measured)."""

from __future__ import annotations

from eval.analyze.compare import Comparison
from eval.report.scenario_plots.kit import (
    DELTA_AXIS,
    EQUAL_AXIS,
    WARM_SHADE,
    ZERO_DELTA_LOG,
    points,
    register_plots,
    sides,
    sub_rows,
)
from eval.report.svg import Series, errorbar_plot

__all__ = ["batch_plots"]


def batch_plots(c: Comparison) -> list[str]:
    batch = sorted(sub_rows(c, "batch_b"), key=lambda item: int(item[1]))
    if not batch:
        return []
    sizes = [label for _, label in batch]
    warm = [f"batch_warm_b{size}" for size in sizes]
    plots = []
    for measure, y_label, title in (
        ("equal", EQUAL_AXIS, "Equal outputs, alone vs in a batch, by batch size"),
        ("delta", DELTA_AXIS, f"Max |top-k logprob delta| by batch size (0 drawn at {ZERO_DELTA_LOG:g})"),
    ):
        series = []
        for side, att, color in sides(c):
            series.append(Series(f"{side} cold", color, points(att, [k for k, _ in batch], measure)))
            series.append(Series(f"{side} warm", color + WARM_SHADE, points(att, warm, measure)))
        plots.append(errorbar_plot([f"B = {s}" for s in sizes], series, y_label, title, height=300))
    return plots


register_plots("batch", batch_plots)
