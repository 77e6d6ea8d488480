"""`lbeval compare BASE VARIANT`: the four tables, report.md, summary.json and report.html."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from eval.terminal import echo

if TYPE_CHECKING:
    from eval.analyze.compare import Comparison
    from eval.analyze.score import ScoredRun

HELP = "Compare two runs (base vs variant): accuracy, agreement, timing and cache tables; Markdown, JSON and HTML reports."


def add_run_pair_arguments(p: argparse.ArgumentParser) -> None:
    """BASE, VARIANT and --runs: shared by `lbeval compare` and `lbeval gate`."""
    p.add_argument("base", metavar="BASE", help="base run folder, or a variant name (its latest run)")
    p.add_argument(
        "variant", metavar="VARIANT", help="variant run folder, or a variant name (its latest run)"
    )
    p.add_argument(
        "--runs", type=Path, default=Path("runs"), help="where variant names are looked up (default runs/)"
    )


def add_policy_argument(p: argparse.ArgumentParser) -> None:
    """--policy: shared by `lbeval compare` (the report's verdict banner) and `lbeval gate`."""
    p.add_argument(
        "--policy", type=Path, help="policy file (default: the shipped eval/gate/policy_default.toml)"
    )


def add_aa_floor_argument(p: argparse.ArgumentParser) -> None:
    """--aa-floor RUN_A RUN_B: shared by `lbeval compare` and `lbeval gate`."""
    p.add_argument(
        "--aa-floor",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="the two run folders of an A/A session (lbeval ab X X, same inputs): the report shows their noise "
        "floor beside each timing change; the policy's max_change_aa_multiple needs it",
    )


def with_aa_floor(args: argparse.Namespace, comparison: Comparison) -> Comparison:
    """The comparison with the A/A floor of --aa-floor's runs (unchanged without the flag); AaFloorError (exit 2)
    when they are not one A/A session or asked other inputs than the compared runs."""
    if not args.aa_floor:
        return comparison
    from eval.analyze.aa_floor import aa_floor, check_against  # heavy (scorers): imported when used
    from eval.analyze.compare import BOOTSTRAP_RESAMPLES
    from eval.analyze.score import score_run
    from eval.records.run_folder import resolve_run

    a, b = (score_run(resolve_run(name, args.runs)) for name in args.aa_floor)
    floor = aa_floor(a, b, seed=comparison.seed, resamples=BOOTSTRAP_RESAMPLES)
    check_against(floor, comparison.base, comparison.variant)
    return replace(comparison, aa_floor=floor)


def score_pair(args: argparse.Namespace) -> tuple[ScoredRun, ScoredRun]:
    """Score the BASE and VARIANT runs named on the command line."""
    from eval.analyze.score import score_run  # heavy (scorers): imported when used
    from eval.records.run_folder import resolve_run

    return score_run(resolve_run(args.base, args.runs)), score_run(resolve_run(args.variant, args.runs))


def configure(p: argparse.ArgumentParser) -> None:
    add_run_pair_arguments(p)
    p.add_argument("--out", type=Path, help="output folder (default <runs>/compare/<BASE>__<VARIANT>/)")
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare runs that asked different things (inputs, model, sampling settings); the report warns",
    )
    p.add_argument("--seed", type=int, help="bootstrap seed (default 20260909)")
    add_policy_argument(p)
    add_aa_floor_argument(p)
    add_full_argument(p, "report.md")


def add_full_argument(p: argparse.ArgumentParser, what: str) -> None:
    """--full: shared by `lbeval score` and `lbeval compare` (default: the compact summary)."""
    p.add_argument(
        "--full", action="store_true", help=f"print the whole {what} instead of the compact summary"
    )


def run(args: argparse.Namespace) -> int:
    from eval.analyze.compare import BOOTSTRAP_SEED  # heavy (scorers): imported when used
    from eval.gate.policy import load_policy
    from eval.gate.settle import compare_and_gate
    from eval.report.console import compare_summary, policy_floor
    from eval.report.tables import build_tables
    from eval.report.write import write_reports

    policy = load_policy(args.policy)  # a bad policy stops here, before the scoring
    base, variant = score_pair(args)
    # the report's banner shows the gate's verdict: the one evaluation `lbeval gate` also uses (a stopped
    # lbeval ab session: both on the inputs run, eval/gate/settle.py)
    gated = compare_and_gate(
        base,
        variant,
        policy,
        allow_mismatch=args.allow_mismatch,
        seed=BOOTSTRAP_SEED if args.seed is None else args.seed,
        adjust=lambda c: with_aa_floor(args, c),
    )
    comparison, verdict = gated.comparison, gated.verdict
    out = args.out or args.runs / "compare" / comparison.name
    tables = build_tables(comparison)
    paths = write_reports(comparison, out, verdict, tables)
    if args.full:
        echo(paths[0].read_text(encoding="utf-8"), end="")
        echo("wrote " + ", ".join(str(p.resolve()) for p in paths))
        return 0
    summary = compare_summary(
        comparison, tables, verdict, (paths[2], paths[0], paths[1]), policy_floor(policy)
    )
    for line in summary:
        echo(line)
    return 0
