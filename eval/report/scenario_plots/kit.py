"""What a scenario's plot module uses: the registry of plot functions by scenario name, and the pieces every
attribution plot shares (the two runs with their colors, the sub-rows either run measured, a row's point)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from eval.analyze.attribution import Attribution
from eval.analyze.compare import Comparison
from eval.records.scenario_kinds.parts import ScenarioParts
from eval.report.svg import Point

__all__ = [
    "BASE_COLOR", "DELTA_AXIS", "EQUAL_AXIS", "VARIANT_COLOR", "WARM_SHADE", "ZERO_DELTA_LOG", "PlotsOf", "plots_of",
    "points", "register_plots", "sides", "sub_rows", "unregister_plots",
]  # fmt: skip

BASE_COLOR, VARIANT_COLOR = "#1f77b4", "#d62728"
WARM_SHADE = "88"  # the warm path's series: the side's color, translucent
ZERO_DELTA_LOG = -9.0  # where a bit-identical pair (max delta 0) is drawn on the log axis
EQUAL_AXIS, DELTA_AXIS = (
    "% equal outputs",
    "log10 max |top-k logprob delta|",
)  # the y axes of the two measures

PlotsOf = Callable[[Comparison], list[str]]  # a comparison -> its SVG plots ([]: nothing to draw)


def _none(c: Comparison) -> list[str]:
    return []


_PLOTS: ScenarioParts[PlotsOf] = ScenarioParts("plot function", _none)


def register_plots(name: str, plots: PlotsOf) -> PlotsOf:
    """A scenario's plot function, under the scenario's name; a second one, or one of no registered scenario, is
    refused."""
    return _PLOTS.register(name, plots)


def unregister_plots(name: str) -> None:
    """Take a plot function away (a test's); KeyError when none has that name."""
    _PLOTS.unregister(name)


def plots_of(name: str) -> PlotsOf:
    """The scenario's plot function; one that draws nothing when it registered none."""
    return _PLOTS.of(name)


def sides(c: Comparison) -> tuple[tuple[str, Attribution | None, str], ...]:
    """(side, its attribution, its color) of the base and the variant."""
    return (
        ("base", c.base.scores.attribution, BASE_COLOR),
        ("variant", c.variant.scores.attribution, VARIANT_COLOR),
    )


def sub_rows(c: Comparison, prefix: str) -> list[tuple[str, str]]:
    """(row key, category label) of the measured sub-rows whose key starts with prefix, over both sides."""
    seen: dict[str, str] = {}
    for run in (c.base, c.variant):
        att = run.scores.attribution
        for r in att.rows if att is not None else []:
            if r.level == 1 and r.measured and r.key.startswith(prefix) and r.key not in seen:
                seen[r.key] = str(r.value)
    return list(seen.items())


def points(att: Attribution | None, keys: Sequence[str], measure: str) -> list[Point | None]:
    """Per row key, its point: "equal" the % of its pairs with equal outputs, else log10 of its max |top-k
    logprob delta| (0 drawn at ZERO_DELTA_LOG); None where the run has no measured pair there."""
    out: list[Point | None] = []
    for key in keys:
        r = att.row(key) if att is not None else None
        s = r.pairs if r is not None and r.measured else None
        if s is None or s.n_total == 0:
            out.append(None)
        elif measure == "equal":
            out.append(Point(100.0 * s.text_equal / s.n_total))
        elif s.max_delta is None or not math.isfinite(s.max_delta):
            out.append(None)
        else:
            out.append(Point(math.log10(s.max_delta) if s.max_delta > 0 else ZERO_DELTA_LOG))
    return out
