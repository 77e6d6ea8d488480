"""What lbeval prints: secrets redacted (eval.redact) and control characters made visible.

Server error bodies, model outputs and log tails can hold terminal escapes (`\\x1b[2J` clears the screen,
`\\x1b]0;...\\x07` retitles the window). `inert(text)` renders every C0 control character except newline and
tab, DEL and every C1 control character as a visible escape (`\\x1b`); the HTML and Markdown reports use it
too (the HTML wraps each escape in a styled span via `mark`). `printable` = redact, then inert; `echo` prints
through it, and is what commands print with.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TextIO

from eval.redact import redact_text

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(char: str) -> str:
    """One control character as the escape a reader can see: `\\x1b`."""
    return f"\\x{ord(char):02x}"


def inert(text: str, mark: Callable[[str], str] | None = None) -> str:
    """Text with control characters (other than \\n and \\t) replaced by visible escapes (wrapped by `mark`)."""
    wrap = mark or (lambda esc: esc)
    return CONTROL.sub(lambda m: wrap(visible(m.group(0))), text)


def printable(text: object) -> str:
    """What may reach a terminal: no secret, no control character other than newline and tab."""
    return inert(redact_text(str(text)))


def echo(*parts: object, file: TextIO | None = None, end: str = "\n", flush: bool = False) -> None:
    """`print` for anything that may hold server, model or environment text (stdout unless `file`)."""
    out = sys.stdout if file is None else file
    print(printable(" ".join(str(p) for p in parts)), end=printable(end), file=out, flush=flush)


def echo_err(*parts: object, end: str = "\n", flush: bool = True) -> None:
    """`echo` to stderr (messages, warnings, errors)."""
    echo(*parts, file=sys.stderr, end=end, flush=flush)
