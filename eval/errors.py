"""Errors users see: one line, naming the file, row and field where there is one; and the exit codes.

Exit codes of every lbeval command (`lbeval --help` and the README list them from EXIT_CODES):
the gate's own 0 / 1 / 2 (eval/gate/verdict.py) and `lbeval run`'s 3 (incomplete) are results; usage, data
and configuration errors have codes of their own, from BSD's sysexits.h, so a script can tell "the variant
failed the gate" (1) or "no verdict" (2) from "the command was mistyped" (64).
"""

from __future__ import annotations

EXIT_ERROR = 1  # an operation failed: a server that will not start or answer, a request it rejected
EXIT_USAGE = 64  # EX_USAGE: a bad command line (unknown option, missing argument, no run of that variant)
EXIT_DATA = 65  # EX_DATAERR: bad input data (file:line:field named)
EXIT_CONFIG = 78  # EX_CONFIG: a bad option value, launch spec or policy
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT)

EXIT_CODES: list[tuple[int, str]] = [
    (0, "success; lbeval gate: every checked rule holds"),
    (1, "lbeval gate: a rule fails; other commands: the operation failed (e.g. a server would not start)"),
    (2, "lbeval gate: no verdict (missing, damaged or incomplete runs, runs that differ, too few valid "
     "pairs); lbeval compare: the runs differ; score, compare, gate: an unreadable run manifest"),
    (3, "lbeval run: the run is incomplete (re-run the same command to resume)"),
    (EXIT_USAGE, "usage: a bad command line, or no run of the named variant (did-you-mean listed)"),
    (EXIT_DATA, "data: bad input data (the file, line and field are named)"),
    (EXIT_CONFIG, "configuration: a bad option value, launch spec or policy"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C, SIGTERM): what was recorded is kept; re-running resumes"),
]  # fmt: skip


class LbevalError(Exception):
    """An error the CLI prints as one line (no traceback) and exits with `exit_code`."""

    exit_code = EXIT_ERROR


class UsageError(LbevalError):
    """A bad command line: an argument that names nothing (e.g. a variant with no run under runs/)."""

    exit_code = EXIT_USAGE


class DataError(LbevalError):
    """Bad input data: names file, line and field."""

    exit_code = EXIT_DATA

    def __init__(self, path: object, line: int | None, field: str | None, message: str) -> None:
        where = str(path)
        if line is not None:
            where += f":{line}"
        if field is not None:
            where += f":{field}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.field = field


class ConfigError(LbevalError):
    """A bad option, spec or policy."""

    exit_code = EXIT_CONFIG
