"""The one atomic file write: every file lbeval replaces (manifests, inputs, LATEST, scores, reports) goes here.

Write to `<name>.tmp` beside the target, flush and fsync it, `os.replace` it over the target, then fsync the
folder so the rename itself survives a crash. A failure removes the temporary file and raises WriteFailed
naming the path, the reason and the space left on its file system (one line, no traceback).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from eval.errors import LbevalError


class WriteFailed(LbevalError):
    """A file could not be written (a full disk, a read-only or vanished folder)."""

    def __init__(self, message: str, path: Path, errno_: int | None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno_


def _free_space(path: Path) -> str:
    for folder in path.parents:  # the nearest folder that exists
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        size = f"{free / 1024:.0f} KiB" if free < 2**30 else f"{free / 2**30:.1f} GiB"
        return f"{size} free on {folder}"
    return "free space unknown"


def write_failed(path: Path, exc: OSError, what: str = "cannot write") -> WriteFailed:
    """The one message for a failed write: what failed, where, why, and how much space is left."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += f", {_free_space(path)}"
    return WriteFailed(f"{path}: {what} ({reason})", path, exc.errno)


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
        raise write_failed(path, exc) from None
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
