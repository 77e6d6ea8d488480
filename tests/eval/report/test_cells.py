"""eval.report.cells: every cell type's text and JSON, from a table of cases worked out by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from eval.report.cells import (
    BLANK_TEXT,
    Blank,
    Cell,
    Flag,
    Frac,
    Interval,
    Ints,
    Num,
    Row,
    Sci,
    Table,
    Text,
    cell_json,
    cell_text,
)

CASES: list[tuple[Cell, str, Any]] = [
    (None, "n/a", None),
    (Num(None), "n/a", None),
    (Num(math.nan), "n/a", None),
    (Num(math.inf), "n/a", None),
    (
        Num(12.345),
        "12.35",
        12.35,
    ),  # 12.345 is 12.3449999... in binary: round() and f"" agree on 12.35? see below
    (Num(2.5, decimals=0), "2", 2.0),  # banker's rounding of an exact half, as Python's round
    (Num(-0.001, decimals=2), "0.00", 0.0),  # -0.0 is shown and stored as 0.0
    (Num(5.6, signed=True), "+5.60", 5.6),
    (Num(-5.6, signed=True), "-5.60", -5.6),
    (Num(48.6, decimals=1, suffix="%"), "48.6%", 48.6),
    (Frac(11, 12), "11/12", {"k": 11, "n": 12}),
    (Frac(0, 0), "0/0", {"k": 0, "n": 0}),
    (Interval(8.26, 1.44, 15.38), "+8.3% [+1.4, +15.4]", {"estimate": 8.3, "low": 1.4, "high": 15.4}),
    (Interval(-2.0, -3.25, 0.0, decimals=2, suffix=" pts"), "-2.00 pts [-3.25, +0.00]", None),
    (Sci(4.9123e-05), "4.91e-05", 4.91e-05),
    (Sci(0.0), "0", 0.0),
    (Sci(None), "n/a", None),
    (Sci(math.nan), "n/a", None),
    (Text("cold/warm"), "cold/warm", "cold/warm"),
    (Flag(True), "yes", True),
    (Flag(False), "no", False),
    (Ints((3, 17)), "3, 17", [3, 17]),
    (Ints(()), "none", []),
    (Blank(), BLANK_TEXT, None),
]


@pytest.mark.parametrize(("cell", "text", "as_json"), CASES)
def test_cell_text_and_json(cell: Cell, text: str, as_json: Any) -> None:
    assert cell_text(cell) == text
    if not isinstance(cell, Interval) or as_json is not None:
        assert cell_json(cell) == as_json


def test_interval_json_rounds_each_bound_to_the_shown_decimals() -> None:
    assert cell_json(Interval(-2.0, -3.25, 0.0, decimals=2, suffix=" pts")) == {
        "estimate": -2.0,
        "low": -3.25,
        "high": 0.0,
    }


def test_json_is_the_number_shown() -> None:
    # every numeric cell's JSON, formatted with the cell's decimals, reads back as its text
    for cell, text, _ in CASES:
        if isinstance(cell, Num) and cell.value is not None and math.isfinite(cell.value):
            shown = f"{cell_json(cell):{'+' if cell.signed else ''}.{cell.decimals}f}{cell.suffix}"
            assert shown == text


def test_table_as_json_keys_cells_by_column() -> None:
    table = Table(
        id="t",
        title="T",
        reading="r",
        columns=["dataset", "cold", "identical"],
        rows=[Row("qasper", "qasper", [Num(10.5), Frac(2, 6)])],
        note="n",
    )
    assert table.as_json() == {
        "title": "T",
        "reading": "r",
        "columns": ["dataset", "cold", "identical"],
        "note": "n",
        "rows": [
            {"key": "qasper", "label": "qasper", "cells": {"cold": 10.5, "identical": {"k": 2, "n": 6}}}
        ],
    }


def test_table_as_json_refuses_a_row_of_the_wrong_width() -> None:
    table = Table("t", "T", "r", ["a", "b", "c"], [Row("k", "k", [Num(1.0)])])
    with pytest.raises(ValueError):
        table.as_json()
