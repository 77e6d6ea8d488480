"""`lbeval datasets`: the 21 LongBench v1 datasets with metric, output limit and chat/raw mode."""

from __future__ import annotations

import argparse
import json

from eval.prepare.dataset_specs import load_specs
from eval.terminal import echo

HELP = "List the LongBench v1 datasets with their metric, official output limit and chat/raw mode."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    specs = load_specs()
    if args.json:
        rows = [
            {
                "dataset": s.name,
                "metric": s.metric,
                "max_tokens": s.max_tokens,
                "mode": s.mode,
                "language": s.language,
                "first_line_only": s.first_line_only,
            }
            for s in specs.values()
        ]
        echo(json.dumps(rows, indent=2))
        return 0
    echo(f"{'dataset':<22} {'metric':<15} {'max_tokens':>10}  {'mode':<5} lang")
    for s in specs.values():
        echo(f"{s.name:<22} {s.metric:<15} {s.max_tokens:>10}  {s.mode:<5} {s.language}")
    echo(f"{len(specs)} datasets; LongBench-E variants are selected as <name>_e (e.g. qasper_e).")
    return 0
