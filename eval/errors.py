"""Errors users see: one line, naming the file, row and field where there is one."""

from __future__ import annotations


class LbevalError(Exception):
    """An error the CLI prints as one line (no traceback) and exits with `exit_code`."""

    exit_code = 1


class DataError(LbevalError):
    """Bad input data: names file, line and field."""

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

    exit_code = 2
