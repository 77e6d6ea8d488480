"""The report's part of a benchmark: the tables a benchmark adds about its own figures, built by its package
(eval/benchmarks/<name>/report.py) from the analysis results as plain cells and rows (cells.py), which the report
renders like every other table (Markdown, JSON, HTML). A benchmark fills the REPORT_TABLES slot in its plugin.py;
the report asks every loaded benchmark, in load order, and never imports a benchmark package."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eval.analyze.accuracy_types import DatasetAccuracy
from eval.analyze.compare import Comparison
from eval.analyze.score import RunScores
from eval.benchmark_registry import Slot, entries
from eval.report.cells import Table


@dataclass(frozen=True)
class BenchmarkTables:
    run_table: Callable[[RunScores], Table | None]  # scores.md's table of one run (None: nothing of its)
    compare_table: Callable[[Comparison], Table | None]  # the report's base vs variant table (None: nothing)
    # the accuracy table's note on the benchmark's datasets (None: none of its datasets, or nothing to say)
    accuracy_note: Callable[[Sequence[DatasetAccuracy]], str | None]


REPORT_TABLES: Slot[BenchmarkTables] = Slot("eval/report/benchmark_tables.REPORT_TABLES")


def run_tables(scores: RunScores) -> list[Table]:
    """Every loaded benchmark's table of one run, in load order."""
    tables = [t.run_table(scores) for t in entries(REPORT_TABLES).values()]
    return [t for t in tables if t is not None]


def compare_tables(c: Comparison) -> list[Table]:
    """Every loaded benchmark's base vs variant table, in load order."""
    tables = [t.compare_table(c) for t in entries(REPORT_TABLES).values()]
    return [t for t in tables if t is not None]


def accuracy_notes(accuracy: Sequence[DatasetAccuracy]) -> list[str]:
    """The loaded benchmarks' notes for the accuracy table, in load order."""
    notes = [t.accuracy_note(accuracy) for t in entries(REPORT_TABLES).values()]
    return [n for n in notes if n]
