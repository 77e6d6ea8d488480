"""`lbeval score RUN`: compute a run's scores offline and write scores.json + scores.md beside its records."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval.terminal import echo

HELP = "Score a run from its records (no server): official LongBench scores, agreement, timing, cache checks."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run", metavar="RUN", help="a run folder (runs/<variant>/<run_id>) or a variant name (its latest run)"
    )
    p.add_argument(
        "--runs", type=Path, default=Path("runs"), help="where variant names are looked up (default runs/)"
    )
    p.add_argument(
        "--inputs", type=Path, help="the run's inputs manifest, if it moved (its sha256 must match)"
    )
    p.add_argument(
        "--full", action="store_true", help="print the whole scores.md instead of the compact summary"
    )


def run(args: argparse.Namespace) -> int:
    # heavy (scorers): imported when used, so `lbeval --help` stays fast
    from eval.analyze.score import score_run
    from eval.records.run_folder import resolve_run
    from eval.report.console import score_summary
    from eval.report.write import write_scores

    run_dir = resolve_run(args.run, args.runs)
    scored = score_run(run_dir, args.inputs)
    json_path, md_path = write_scores(scored)
    if args.full:
        echo(md_path.read_text(encoding="utf-8"), end="")
        echo(f"wrote {json_path.resolve()} and {md_path.resolve()}")
        return 0
    for line in score_summary(scored.scores, (md_path, json_path)):
        echo(line)
    return 0
