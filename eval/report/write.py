"""Writing the report files: scores.json + scores.md of one run, report.md + summary.json + report.html of a
comparison. Each file is replaced atomically (eval.atomic); the tables are built once and rendered three ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.atomic import atomic_write
from eval.gate.verdict import Verdict
from eval.report.cells import Table
from eval.report.html import html_report
from eval.report.json_out import scores_json, summary_json, to_jsonable
from eval.report.markdown import comparison_markdown, scores_markdown
from eval.report.tables import build_tables

SCORES_JSON = "scores.json"
SCORES_MD = "scores.md"
REPORT_MD, SUMMARY_JSON, REPORT_HTML = "report.md", "summary.json", "report.html"


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_scores(scored: ScoredRun) -> tuple[Path, Path]:
    run_dir = scored.loaded.run_dir
    json_path, md_path = run_dir / SCORES_JSON, run_dir / SCORES_MD
    atomic_write(json_path, _json_text(scores_json(scored)))
    atomic_write(md_path, scores_markdown(scored.scores))
    return json_path, md_path


def write_reports(
    c: Comparison, out_dir: Path, verdict: Verdict | None = None, tables: list[Table] | None = None
) -> tuple[Path, Path, Path]:
    """Write report.md, summary.json and report.html into out_dir, each with the gate's verdict (evaluated by
    the caller: `lbeval compare` runs eval.gate.rules.evaluate) in its banner; `tables`: build_tables(c), when
    the caller has built them already (for the terminal summary)."""
    tables = build_tables(c) if tables is None else tables
    paths = (out_dir / REPORT_MD, out_dir / SUMMARY_JSON, out_dir / REPORT_HTML)
    atomic_write(paths[0], comparison_markdown(c, tables, verdict))
    atomic_write(paths[1], _json_text(to_jsonable(summary_json(c, tables, verdict))))  # NaN/inf -> null
    atomic_write(paths[2], html_report(c, tables, verdict))
    return paths
