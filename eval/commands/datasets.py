"""`lbeval datasets`: the 21 LongBench v1 datasets with metric, output limit and chat/raw mode; LongBench v2
(`longbench_v2`) with its modes (0shot, cot, nocontext) and their output limits."""

from __future__ import annotations

import argparse
import json

from eval.benchmarks.longbench.spec import load_specs
from eval.benchmarks.longbench_v2.spec import DEFAULT_V2_MODE, V2_CHAT_MODE, V2_DATASET, V2_METRIC, V2_MODES
from eval.terminal import echo

HELP = (
    "List the LongBench v1 datasets with their metric, official output limit and chat/raw mode, and LongBench v2 "
    "with its modes."
)


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
        rows.append(v2_entry())
        echo(json.dumps(rows, indent=2))
        return 0
    echo(f"{'dataset':<22} {'metric':<15} {'max_tokens':>10}  {'mode':<5} lang")
    for s in specs.values():
        echo(f"{s.name:<22} {s.metric:<15} {s.max_tokens:>10}  {s.mode:<5} {s.language}")
    echo(f"{len(specs)} datasets; LongBench-E variants are selected as <name>_e (e.g. qasper_e).")
    echo("")
    default = V2_MODES[DEFAULT_V2_MODE]
    echo(f"{V2_DATASET:<22} {V2_METRIC:<15} {default.max_tokens:>10}  {V2_CHAT_MODE:<5} en  (LongBench v2)")
    for mode in V2_MODES.values():
        limits = f"{mode.max_tokens}" + (f" then {mode.answer_max_tokens}" if mode.answer_max_tokens else "")
        echo(f"  --v2-mode {mode.name:<10} max_tokens {limits:<14} {mode.description}")
    return 0


def v2_entry() -> dict[str, object]:
    """The `--json` entry of LongBench v2: its modes, each with its template files and output limits."""
    default = V2_MODES[DEFAULT_V2_MODE]
    modes = {
        m.name: {
            "templates": m.template_files(),
            "max_tokens": m.max_tokens,
            "answer_max_tokens": m.answer_max_tokens,
        }
        for m in V2_MODES.values()
    }
    return {
        "dataset": V2_DATASET, "metric": V2_METRIC, "max_tokens": default.max_tokens, "mode": V2_CHAT_MODE,
        "language": "en", "first_line_only": False, "v2_modes": modes, "default_v2_mode": DEFAULT_V2_MODE,
    }  # fmt: skip
