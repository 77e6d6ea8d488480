"""The HTML report's plots: timing intervals clipped at 0 (times are never negative), per-dataset timing
panels, divergence dots labelled with their input's id (labels stacked where they would overlap)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eval.report.svg import Point, Series, errorbar_plot, label_levels, strip_plot

NS = "{http://www.w3.org/2000/svg}"


def _all(svg: str, tag: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter() if e.tag in (tag, NS + tag)]


def test_an_interval_below_the_floor_is_clipped_and_dashed() -> None:
    # 3 repetitions: the 95% t-interval of a noisy mean reaches below 0 ms
    series = [Series("base", "#111", [Point(100.0, -50.0, 250.0), Point(200.0, 150.0, 250.0)])]
    svg = errorbar_plot(["a", "b"], series, "ms", "t", height=300, floor=0.0)
    lines = [e for e in _all(svg, "line") if e.get("stroke") == "#111"]
    clipped, whole = lines
    bottom = 300 - 52 - 100 + 52  # TOP + plot height: where 0 ms is drawn (the axis starts at the floor)
    assert float(clipped.get("y1", "nan")) == bottom and clipped.get("stroke-dasharray") == "3 2"
    assert whole.get("stroke-dasharray") is None and float(whole.get("y1", "nan")) < bottom
    ticks = [t.text or "" for t in _all(svg, "text") if t.get("class") == "tick"]
    assert not [t for t in ticks if t.startswith("-")]  # no negative tick
    assert "[-50, 250] (interval clipped at 0)" in svg


def test_without_a_floor_negative_values_keep_their_axis() -> None:
    svg = errorbar_plot(["a"], [Series("s", "#111", [Point(1.0, -3.0, 5.0)])], "x", "t")
    ticks = [t.text or "" for t in _all(svg, "text") if t.get("class") == "tick"]
    assert any(t.startswith("-") for t in ticks) and "clipped" not in svg


def test_divergence_dots_carry_their_input_labels() -> None:
    rows = [("variant cold/warm", "red", [(5, "qas00"), (5, "qas01"), (40, "gov00")]), ("base", "blue", [])]
    svg = strip_plot(rows, "token", "t")
    labels = [e for e in _all(svg, "text") if e.get("class") == "dot-label"]
    assert [e.text for e in labels] == ["qas00", "qas01", "gov00"]
    ys = [float(e.get("y", "nan")) for e in labels]
    assert ys[0] != ys[1] and ys[0] == ys[2]  # the two at token 5 stacked, the far one on the first row
    assert len(_all(svg, "circle")) == 3
    plain = strip_plot([("a", "red", [3, 9])], "token", "t")  # unlabelled points: no labels
    assert not [e for e in _all(plain, "text") if e.get("class") == "dot-label"]


def test_label_levels() -> None:
    # label at x with a width: the lowest free row; the last row when all are taken
    assert label_levels([(0, 30), (10, 30), (100, 30), (20, 30), (25, 30), (28, 30)]) == [0, 1, 0, 2, 3, 3]
