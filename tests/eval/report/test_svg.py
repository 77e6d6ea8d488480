"""eval.report.svg: well-formed, escaped, self-contained charts whose geometry follows the data."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from eval.report.svg import Point, Series, errorbar_plot, grouped_bars, nice_ticks, strip_plot

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert(1)</script> & "q"'


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on malformed XML or an unescaped label


def elements(root: ET.Element, tag: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.tag in (tag, NS + tag)]


@pytest.mark.parametrize(
    ("lo", "hi"), [(0.0, 1.0), (0.0, 7.3), (-3.2, 12.0), (0.0, 1480.0), (5.0, 5.0), (0.0, 0.003)]
)
def test_nice_ticks_cover_the_range_with_round_steps(lo: float, hi: float) -> None:
    ticks = nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= max(hi, lo)
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1  # evenly spaced
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1.0, 2.0, 5.0, 10.0)
    assert 2 <= len(ticks) <= 12


def test_nice_ticks_of_a_non_finite_range() -> None:
    assert nice_ticks(float("nan"), 1.0) == [0.0]


def test_errorbar_plot_draws_one_marker_per_point_and_higher_values_higher() -> None:
    series = [
        Series("base", "#1f77b4", [Point(100.0, 90.0, 110.0), Point(300.0), None]),
        Series("variant", "#ff7f0e", [Point(200.0, 150.0, 250.0), None, Point(50.0)]),
    ]
    root = parse(errorbar_plot(["q1", "q2", HOSTILE], series, "ms", "prefill " + HOSTILE))
    circles = elements(root, "circle")
    assert len(circles) == 4
    ys = {float(c.get("cy", "nan")) for c in circles}
    by_value = sorted(
        zip([100.0, 200.0, 300.0, 50.0], [float(c.get("cy", "nan")) for c in circles], strict=True)
    )
    assert [y for _, y in by_value] == sorted(ys, reverse=True)  # SVG y grows downwards
    assert (
        len([e for e in elements(root, "line") if e.get("stroke") in ("#1f77b4", "#ff7f0e")]) == 2
    )  # 2 intervals


def test_every_chart_escapes_labels_and_fetches_nothing() -> None:
    charts = [
        errorbar_plot([HOSTILE], [Series(HOSTILE, "red", [Point(1.0)])], HOSTILE, HOSTILE),
        strip_plot([(HOSTILE, "red", [3, 9])], HOSTILE, HOSTILE),
        grouped_bars([HOSTILE, "b"], [(HOSTILE, "red", [1, 2])], HOSTILE, HOSTILE, HOSTILE),
    ]
    for svg in charts:
        root = parse(svg)
        assert not elements(root, "script")
        assert "<script>" not in svg
        assert not re.search(r"(href|src)=", svg)


def test_strip_plot_has_a_dot_per_position_and_grouped_bars_a_bar_per_nonzero_count() -> None:
    strip = parse(strip_plot([("base cold/warm", "red", [3, 9, 9]), ("variant", "blue", [])], "token", "t"))
    assert len(elements(strip, "circle")) == 3
    bars = parse(
        grouped_bars(
            ["0", "1e-6", "1e-3"], [("a", "red", [2, 0, 1]), ("b", "blue", [0, 0, 4])], "x", "y", "t"
        )
    )
    # data bars carry a tooltip; the legend's swatches do not
    rects = [r for r in elements(bars, "rect") if elements(r, "title")]
    assert len(rects) == 3
    heights = sorted(float(r.get("height", "nan")) for r in rects)
    assert heights[0] < heights[1] < heights[2]  # counts 1 < 2 < 4


def test_empty_charts_say_so() -> None:
    assert "no data" in errorbar_plot([], [], "ms", "t")
    assert "no divergences" in strip_plot([("a", "red", [])], "token", "t")
    assert "no data" in grouped_bars(["a"], [("a", "red", [0])], "x", "y", "t")
