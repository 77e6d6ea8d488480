"""What lbeval prints: secrets redacted (eval.redact) and control characters made visible.

Server error bodies, model outputs and log tails can hold terminal escapes (`\\x1b[2J` clears the screen,
`\\x1b]0;...\\x07` retitles the window), and Unicode's bidi and invisible format controls (U+202E turns the
rest of a line around, U+2066..U+2069 isolate a run of text, zero-width and tag characters hide text).
`inert(text)` renders every C0 control character except newline and tab, DEL, every C1 control character and
every format (Cf) or line/paragraph separator character (Zl, Zp) except the prepended concatenation marks and
the Egyptian hieroglyph format controls (KEPT_FORMAT: they shape visible glyphs of their script) as a visible
escape (`\\x1b`, `\\u202e`, `\\U000e0041`); the HTML and Markdown reports use it too (the HTML wraps each escape
in a styled span via `mark`). A zero-width joiner inside an emoji sequence is shown as `\\u200d` as well.
`printable` = redact, then inert; `echo` prints through it, and is what commands print with; each takes the
`Secrets` of whoever prints (eval.redact).
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

from eval.redact import NO_SECRETS, Secrets, redact_text

CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 (but \n and \t), DEL, C1
    r"\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"  # bidi, zero-width, separators
    r"\ufeff\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
# format characters left as they are: they join visible glyphs of their script (Arabic, Syriac, Kaithi number
# signs; Egyptian hieroglyph format controls). Every other Cf, Zl and Zp character is in CONTROL.
KEPT_FORMAT: tuple[tuple[int, int], ...] = (
    (0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F),
)  # fmt: skip


def visible(char: str) -> str:
    """One control character as the escape a reader can see: `\\x1b`, `\\u202e`, `\\U000e0041`."""
    n = ord(char)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def inert(text: str, mark: Callable[[str], str] | None = None) -> str:
    """Text with control characters (other than \\n and \\t) replaced by visible escapes (wrapped by `mark`)."""
    wrap = mark or (lambda esc: esc)
    return CONTROL.sub(lambda m: wrap(visible(m.group(0))), text)


def printable(text: object, secrets: Secrets = NO_SECRETS) -> str:
    """What may reach a terminal: no secret, no control character other than newline and tab."""
    return inert(redact_text(str(text), secrets))


def echo(
    *parts: object,
    file: TextIO | None = None,
    end: str = "\n",
    flush: bool = False,
    secrets: Secrets = NO_SECRETS,
) -> None:
    """`print` for anything that may hold server, model or environment text (stdout unless `file`)."""
    out = sys.stdout if file is None else file
    text = printable(" ".join(str(p) for p in parts), secrets)
    print(text, end=printable(end), file=out, flush=flush)


def echo_err(*parts: object, end: str = "\n", flush: bool = True, secrets: Secrets = NO_SECRETS) -> None:
    """`echo` to stderr (messages, warnings, errors)."""
    echo(*parts, file=sys.stderr, end=end, flush=flush, secrets=secrets)


PLAIN_INTERVAL_S = 30.0  # off a terminal: at most one progress line per bar this often (and the last one)


class PlainLines:
    """A stream for tqdm off a terminal: each redraw becomes one line, without carriage returns or cursor moves
    (tqdm writes `\\r` before every redraw and `\\x1b[A` to reach a bar's row; a log keeps them as garbage)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        for piece in CURSOR.sub("", text).replace("\r", "\n").split("\n"):
            if piece.strip():
                self._stream.write(piece.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


CURSOR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # CSI sequences (tqdm's cursor up, erase line)


class _PlainBar(tqdm):  # type: ignore[type-arg]
    """A tqdm bar that redraws at most every PLAIN_INTERVAL_S (forced refreshes included), then on close."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._plain_last = -math.inf
        super().__init__(*args, **kwargs)

    def refresh(self, nolock: bool = False, lock_args: Any = None) -> None:
        now = time.monotonic()
        if now - self._plain_last < PLAIN_INTERVAL_S:
            return
        self._plain_last = now
        super().refresh(nolock, lock_args)


def progress_bar(
    *, total: int, initial: int, desc: str, disable: bool, position: int | None = None, leave: bool = True
) -> tqdm:  # type: ignore[type-arg]
    """A progress bar on stderr: redrawn in place on a terminal; elsewhere (CI logs, files) plain lines, one
    per bar at most every PLAIN_INTERVAL_S and one at the end, with no carriage returns or cursor codes."""
    if sys.stderr.isatty():
        return tqdm(
            total=total, initial=initial, desc=desc, position=position, disable=disable,
            file=sys.stderr, dynamic_ncols=True, leave=leave,
        )  # fmt: skip
    return _PlainBar(
        total=total, initial=initial, desc=desc, disable=disable, file=PlainLines(sys.stderr),
        ascii=True, ncols=100, mininterval=PLAIN_INTERVAL_S, leave=leave,
    )  # fmt: skip
