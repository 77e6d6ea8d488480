"""`lbeval compare BASE VARIANT`: the four tables, report.md, summary.json and report.html."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "Compare two runs (base vs variant): accuracy, agreement, timing and cache tables; Markdown, JSON and HTML reports."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", metavar="BASE", help="base run folder, or a variant name (its latest run)")
    p.add_argument(
        "variant", metavar="VARIANT", help="variant run folder, or a variant name (its latest run)"
    )
    p.add_argument(
        "--runs", type=Path, default=Path("runs"), help="where variant names are looked up (default runs/)"
    )
    p.add_argument("--out", type=Path, help="output folder (default <runs>/compare/<BASE>__<VARIANT>/)")
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare runs that asked different things (inputs, model, sampling settings); the report warns",
    )
    p.add_argument("--seed", type=int, help="bootstrap seed (default 20260909)")


def run(args: argparse.Namespace) -> int:
    from eval.compare import BOOTSTRAP_SEED, compare, write_reports  # heavy (scorers): imported when used
    from eval.score import resolve_run, score_run

    base = score_run(resolve_run(args.base, args.runs))
    variant = score_run(resolve_run(args.variant, args.runs))
    comparison = compare(
        base,
        variant,
        allow_mismatch=args.allow_mismatch,
        seed=BOOTSTRAP_SEED if args.seed is None else args.seed,
    )
    out = args.out or args.runs / "compare" / comparison.name
    paths = write_reports(comparison, out)
    print(paths[0].read_text(encoding="utf-8"), end="")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
