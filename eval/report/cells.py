"""The report's cells and tables: typed values that every output format renders the same way.

Tables hold typed cells (`Num`, `Frac`, `Interval`, `Sci`, `Text`, `Flag`, `Ints`, `Blank`); the Markdown and
HTML reports render them with `cell_text`, and summary.json stores `cell_json` of each, so the numbers in every
output are the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Num:
    value: float | None
    decimals: int = 2
    suffix: str = ""
    signed: bool = False


@dataclass(frozen=True)
class Frac:
    k: int
    n: int


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    decimals: int = 1
    suffix: str = "%"


@dataclass(frozen=True)
class Sci:
    value: float | None  # shown to 3 significant digits


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Flag:
    value: bool


@dataclass(frozen=True)
class Ints:
    values: tuple[int, ...]


@dataclass(frozen=True)
class Blank:
    """A cell that does not apply to its row (e.g. a cross-variant row's per-variant columns)."""


BLANK_TEXT = "—"

Cell = Num | Frac | Interval | Sci | Text | Flag | Ints | Blank | None


def _round(value: float, decimals: int) -> float:
    return round(float(value), decimals) + 0.0  # + 0.0 turns -0.0 into 0.0


def _sig3(value: float) -> float:
    return float(f"{value:.3g}")


def _missing(value: float | None) -> bool:
    """No number to show: absent, or NaN/inf (e.g. from a logprob the server sent as null)."""
    return value is None or not math.isfinite(value)


def cell_json(cell: Cell) -> Any:
    """The number(s) a cell shows, exactly as shown (rounded to the displayed precision); null for n/a."""
    if cell is None or isinstance(cell, Blank):
        return None
    if isinstance(cell, Num):
        return None if cell.value is None or _missing(cell.value) else _round(cell.value, cell.decimals)
    if isinstance(cell, Frac):
        return {"k": cell.k, "n": cell.n}
    if isinstance(cell, Interval):
        return {
            k: _round(v, cell.decimals)
            for k, v in (("estimate", cell.estimate), ("low", cell.low), ("high", cell.high))
        }
    if isinstance(cell, Sci):
        return None if cell.value is None or _missing(cell.value) else _sig3(cell.value)
    if isinstance(cell, Text):
        return cell.text
    if isinstance(cell, Flag):
        return cell.value
    return list(cell.values)


def _fmt(value: float, decimals: int, signed: bool) -> str:
    text = f"{_round(value, decimals):{'+' if signed else ''}.{decimals}f}"
    return text


def cell_text(cell: Cell) -> str:
    """Plain (unescaped) text of a cell; `n/a` for a missing value."""
    if cell is None:
        return "n/a"
    if isinstance(cell, Num):
        if cell.value is None or _missing(cell.value):
            return "n/a"
        return _fmt(cell.value, cell.decimals, cell.signed) + cell.suffix
    if isinstance(cell, Frac):
        return f"{cell.k}/{cell.n}"
    if isinstance(cell, Interval):
        d, s = cell.decimals, cell.suffix
        return f"{_fmt(cell.estimate, d, True)}{s} [{_fmt(cell.low, d, True)}, {_fmt(cell.high, d, True)}]"
    if isinstance(cell, Sci):
        return "n/a" if cell.value is None or _missing(cell.value) else f"{_sig3(cell.value):.3g}"
    if isinstance(cell, Text):
        return cell.text
    if isinstance(cell, Flag):
        return "yes" if cell.value else "no"
    if isinstance(cell, Blank):
        return BLANK_TEXT
    return ", ".join(str(v) for v in cell.values) if cell.values else "none"


@dataclass(frozen=True)
class Row:
    key: str  # stable machine name (summary.json)
    label: str  # shown in the first column
    cells: list[Cell]


@dataclass(frozen=True)
class Table:
    id: str
    title: str
    reading: str  # one line: what the table says
    columns: list[str]  # including the first (label) column
    rows: list[Row]
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "reading": self.reading,
            "columns": self.columns,
            "note": self.note,
            "rows": [
                {
                    "key": r.key,
                    "label": r.label,
                    "cells": {c: cell_json(v) for c, v in zip(self.columns[1:], r.cells, strict=True)},
                }
                for r in self.rows
            ],
        }
