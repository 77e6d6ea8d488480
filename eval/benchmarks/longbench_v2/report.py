"""LongBench v2 accuracy tables: one run's (scores.md) and base vs variant (report.md, report.html, summary.json).

Rows per generation pass: lbeval's figures (every input in the denominator) and, when they differ, the official
result.py figures (the inputs pred.py would write no line for left out), with the count left out and why.
Columns: result.py's six (overall, easy, hard, short, medium, long), the compensated overall (an answer without
a letter scores 0.25), and the correct answers over the denominator. Cells only (eval/report/cells.py, which
the report renders like its own tables: eval/report/benchmark_tables.py); the numbers come from accuracy.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.analyze.accuracy_types import DatasetAccuracy
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.benchmarks.longbench_v2.figures import V2_BUCKETS, V2PassAccuracy, v2_figures
from eval.report.cells import Blank, Cell, Frac, Num, Row, Table, Text

TITLE = "LongBench v2 accuracy (%, official answer extraction)"
FIGURE_COLUMNS = [*V2_BUCKETS, "overall, compensated", "correct", "left out"]
NOTE = (
    "lbeval: every input is in the denominator; an input without a usable answer (a failed, invalid or missing "
    "sample, or an empty output) counts as wrong. official: LongBench v2's result.py, which only sees the lines "
    "pred.py wrote (none for an empty output or a request that failed), so those inputs are left out of every "
    "denominator; its row is shown only where it differs from lbeval's. Compensated: an answer without "
    "'The correct answer is (X)' scores 0.25. CoT: the letter comes from the answer call, whose prompt holds the "
    "same pass's reasoning (warm's answer call is built from warm's reasoning)."
)


def _v2(scores: RunScores) -> list[DatasetAccuracy]:
    return [a for a in scores.accuracy if v2_figures(a)]


def _cells(figures: V2PassAccuracy, official: bool) -> list[Cell]:
    values = figures.official if official else figures.lbeval
    compensated = figures.official_compensated if official else figures.lbeval_compensated
    denominator = figures.n["overall"] - (figures.dropped["overall"] if official else 0)
    cells: list[Cell] = [Num(values[b], 1) for b in V2_BUCKETS]
    cells += [Num(compensated["overall"], 1), Frac(figures.correct, denominator)]
    cells.append(Num(figures.dropped["overall"], 0) if official else Blank())
    return cells


def _rows(key: str, label: str, figures: V2PassAccuracy, lead: list[Cell]) -> list[Row]:
    rows = [Row(f"{key}:lbeval", label, [*lead, Text("lbeval: every input"), *_cells(figures, False)])]
    if figures.differ:
        official = [*lead, Text("official: result.py"), *_cells(figures, True)]
        rows.append(Row(f"{key}:official", label, official))
    return rows


def _whys(label: str, figures: V2PassAccuracy) -> list[str]:
    why = figures.why()
    return [f"{label}: {why}"] if why else []


def run_v2_table(scores: RunScores) -> Table | None:
    """scores.md's v2 table (None without v2 inputs)."""
    rows: list[Row] = []
    whys: list[str] = []
    for acc in _v2(scores):
        for pass_name, figures in v2_figures(acc).items():
            rows += _rows(pass_name, pass_name, figures, [])
            whys += _whys(pass_name, figures)
    if not rows:
        return None
    reading = _reading_one(scores)
    note = NOTE + (" Left out here: " + "; ".join(whys) + "." if whys else "")
    return Table("accuracy_v2", TITLE, reading, ["pass", "denominator", *FIGURE_COLUMNS], rows, note)


def _reading_one(scores: RunScores) -> str:
    parts = []
    for acc in _v2(scores):
        for pass_name, f in v2_figures(acc).items():
            overall = f.lbeval["overall"]
            shown = "n/a" if overall is None else f"{overall:.1f}%"
            parts.append(f"{pass_name} {shown} ({f.correct}/{f.n['overall']})")
    differ = any(f.differ for acc in _v2(scores) for f in v2_figures(acc).values())
    tail = (
        "; the official figures leave some inputs out (rows below)"
        if differ
        else "; the official figures agree"
    )
    return "LongBench v2 accuracy over every input: " + ", ".join(parts) + tail + "."


def v2_compare_table(c: Comparison) -> Table | None:
    """report.md's v2 table: per pass, base and variant (None without v2 inputs)."""
    base = {a.dataset: a for a in _v2(c.base.scores)}
    variant = {a.dataset: a for a in _v2(c.variant.scores)}
    rows: list[Row] = []
    whys: list[str] = []
    for ds, acc in base.items():
        other = variant.get(ds)
        for pass_name, figures in v2_figures(acc).items():
            for side, run in (
                ("base", figures),
                ("variant", v2_figures(other).get(pass_name) if other else None),
            ):
                if run is None:
                    continue
                label = f"{pass_name} {side}"
                rows += _rows(f"{pass_name}:{side}", pass_name, run, [Text(side)])
                whys += _whys(label, run)
    if not rows:
        return None
    note = NOTE + (" Left out here: " + "; ".join(whys) + "." if whys else "")
    columns = ["pass", "run", "denominator", *FIGURE_COLUMNS]
    return Table("accuracy_v2", TITLE, _reading_two(base, variant), columns, rows, note)


def _reading_two(base: dict[str, DatasetAccuracy], variant: dict[str, DatasetAccuracy]) -> str:
    parts = []
    for ds, acc in base.items():
        for pass_name in ("cold", "warm"):
            b = v2_figures(acc).get(pass_name)
            v = v2_figures(variant[ds]).get(pass_name) if ds in variant else None
            if b is None or v is None or b.lbeval["overall"] is None or v.lbeval["overall"] is None:
                continue
            parts.append(
                f"{pass_name} base {b.lbeval['overall']:.1f}% ({b.correct}/{b.n['overall']}) vs variant "
                f"{v.lbeval['overall']:.1f}% ({v.correct}/{v.n['overall']})"
            )
    differ = any(
        f.differ for side in (base, variant) for acc in side.values() for f in v2_figures(acc).values()
    )
    text = "LongBench v2 accuracy over every input: " + ("; ".join(parts) or "no pass in both runs")
    return text + ("; the official figures leave some inputs out (see the official rows)." if differ else ".")


def accuracy_note(accuracy: Sequence[DatasetAccuracy]) -> str | None:
    """The accuracy table's note on the v2 dataset (None without one)."""
    if not any(v2_figures(a) for a in accuracy):
        return None
    return (
        "longbench_v2 (LongBench v2): accuracy in % with the official answer extraction, over every input "
        "(lbeval's denominator); the official result.py figures, by difficulty and length, are in the "
        "LongBench v2 table."
    )
