"""The `lbeval` console command: parses arguments and calls one function per subcommand.

Each subcommand lives in `eval/commands/<name>.py` and exposes:
    HELP: str                                   one-line description
    configure(parser: argparse.ArgumentParser)  adds its arguments
    run(args: argparse.Namespace) -> int        does the work, returns the exit code
No logic lives here.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from collections.abc import Sequence
from typing import NoReturn

from eval import __version__
from eval.errors import EXIT_CODES, EXIT_INTERRUPTED, EXIT_USAGE, LbevalError
from eval.terminal import echo_err

# subcommand name -> module under eval.commands (imported lazily so `--help` stays fast)
COMMANDS: dict[str, str] = {
    "datasets": "datasets",
    "prepare": "prepare",
    "run": "run",
    "ab": "ab",
    "serve": "serve",
    "score": "score",
    "compare": "compare",
    "gate": "gate",
    "longbench-eval": "longbench_eval",
}


class Parser(argparse.ArgumentParser):
    """argparse, with a bad command line exiting EXIT_USAGE (64) rather than 2, the gate's "no verdict"."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def exit_codes_epilog() -> str:
    lines = [
        textwrap.fill(what, 98, initial_indent=f"  {code:>3}  ", subsequent_indent=" " * 7)
        for code, what in EXIT_CODES
    ]
    return "exit codes:\n" + "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser; the benchmarks are loaded first, since a benchmark brings its own `lbeval prepare`
    options and the stages find each dataset's benchmark in the registry."""
    from eval.benchmarks.plugins import load_benchmarks  # deferred: the benchmarks import the stages

    load_benchmarks()
    parser = Parser(
        prog="lbeval",
        description="LongBench accuracy and cold/warm prefix-cache determinism evaluation for vLLM servers.",
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lbeval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"eval.commands.{module_name}")
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(p)
        # a command may say what an interrupt left behind: `interrupted(args) -> list[str]` (lbeval run)
        p.set_defaults(_run=module.run, _interrupted=getattr(module, "interrupted", None))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "_run"):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args))
    except LbevalError as exc:
        echo_err(f"lbeval {args.command}: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        echo_err(f"lbeval {args.command}: interrupted")
        for line in args._interrupted(args) if args._interrupted else []:
            echo_err(f"lbeval {args.command}: {line}")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
