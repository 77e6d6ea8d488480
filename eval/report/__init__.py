"""Stage 7, report: numbers and the verdict -> cells and tables, rendered as Markdown, summary.json, HTML + SVG
and the console summary; every output renders the same cells and computes no statistics.

Entry points: `tables.build_tables` (one module per table), `write.write_reports` / `write.write_scores` (the files
written), `console` (what the commands print).
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "benchmark_tables": (
            "REPORT_TABLES",
            "BenchmarkTables",
        ),
        "cells": (
            "Blank",
            "Cell",
            "Frac",
            "Num",
            "Row",
            "Table",
            "Text",
        ),
        "console": (
            "cause_lines",
            "compare_summary",
            "gate_lines",
            "hang",
            "policy_floor",
            "score_summary",
        ),
        "summary_verdict": (
            "SummaryVerdict",
            "read_summary_verdict",
        ),
        "svg": ("grouped_bars",),
        "tables": ("build_tables",),
        "write": (
            "SUMMARY_JSON",
            "write_reports",
            "write_scores",
        ),
    },
)
