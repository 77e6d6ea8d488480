"""The one atomic file write: every file lbeval replaces (manifests, inputs, LATEST, scores, reports) goes here.

Write to `<name>.tmp` beside the target, flush and fsync it, `os.replace` it over the target, then fsync the
folder so the rename itself survives a crash. A failure removes the temporary file and raises LbevalError
naming the path and the reason (one line, no traceback).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from eval.errors import LbevalError


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[IO[str]]:
    """A text handle whose contents replace `path` atomically when the block ends without an exception."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise LbevalError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)


def atomic_write_lines(path: Path, lines: Iterable[str]) -> None:
    with atomic_writer(path) as fh:
        fh.writelines(lines)
