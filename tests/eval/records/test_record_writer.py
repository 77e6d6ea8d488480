"""RecordWriter's shared fsyncs (eval/records/run_folder.py): writers in several threads (N replicas' lanes) wait for
one fsync that covers every line appended meanwhile, each write still returning only once its own line is durable,
and a failed shared fsync fails every write it covered and cuts their lines off."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import eval.records.run_folder
from eval.atomic import WriteFailed
from eval.records.codec import dumps_record
from eval.records.run_folder import RECORDS_NAME, RecordWriter, scan_records
from tests.eval.records.test_run_folder import make_record


def _until(done: Callable[[], bool], bound_s: float = 5.0) -> None:
    """Wait for a state (bounded, so that a writer that never reaches it fails the test instead of hanging)."""
    end = time.monotonic() + bound_s
    while not done() and time.monotonic() < end:
        time.sleep(0.001)


class HeldFsync:
    """Stands in for the `os` module of run_folder: fsync number `hold` (1-based) waits until the file holds
    `lines` lines, then returns (or fails with ENOSPC when `fail`); every fsync notes the file's size when it
    began and, once done, that size as durable."""

    def __init__(self, path: Path, hold: int, lines: int, fail: bool = False) -> None:
        self.path, self.hold, self.lines, self.fail = path, hold, lines, fail
        self.started: list[int] = []  # the file's size as each fsync began
        self.durable: list[int] = []  # the sizes the fsyncs done so far covered

    def __getattr__(self, attr: str) -> object:
        return getattr(os, attr)

    def fsync(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self.started.append(size)
        if len(self.started) == self.hold:
            _until(lambda: self.path.read_bytes().count(b"\n") >= self.lines)
            if self.fail:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)
        self.durable.append(size)


def _writers(writer: RecordWriter, seqs: list[int], held: HeldFsync) -> dict[int, object]:
    """Each record in a thread of its own, the first alone until its fsync began; what each write returned
    (the largest size made durable when it returned) or raised."""
    out: dict[int, object] = {}

    def write(seq: int) -> None:
        try:
            writer.write(make_record(seq=seq, example_id=f"e{seq}"))
            out[seq] = max(held.durable)
        except (WriteFailed, ValueError) as exc:
            out[seq] = exc

    threads = [threading.Thread(target=write, args=(seq,)) for seq in seqs]
    first = len(held.started)
    threads[0].start()
    _until(lambda: len(held.started) > first)
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(10)
    return out


def test_writes_from_several_threads_share_an_fsync_and_each_returns_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / RECORDS_NAME
    held = HeldFsync(path, hold=1, lines=4)
    monkeypatch.setattr(eval.records.run_folder, "os", held)
    with RecordWriter(path) as writer:
        returned = _writers(writer, [0, 1, 2, 3], held)
        assert writer.written == 4
    ends: dict[int, int] = {}
    at = 0
    for line in path.read_bytes().splitlines(keepends=True):
        at += len(line)
        ends[json.loads(line)["seq"]] = at
    assert sorted(ends) == [0, 1, 2, 3]
    # the first fsync covered the first line only; the three appended while it ran share the second
    assert len(held.started) == 2 and held.started == [ends[0], at]
    for seq, durable in returned.items():
        assert (
            isinstance(durable, int) and durable >= ends[seq]
        )  # its line was durable when its write returned


def test_a_failed_shared_fsync_fails_every_write_it_covered_and_cuts_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / RECORDS_NAME
    held = HeldFsync(path, hold=2, lines=3, fail=True)
    monkeypatch.setattr(eval.records.run_folder, "os", held)
    writer = RecordWriter(path)
    writer.write(make_record(seq=0))
    first = path.read_bytes()
    returned = _writers(writer, [1, 2], held)
    for seq in (1, 2):  # the second line's fsync failed while the third waited for the next: both fail alike
        failed = returned[seq]
        assert isinstance(failed, WriteFailed) and "cannot append a record (No space left on device" in str(
            failed
        )
    assert path.read_bytes() == first and [r.seq for r in scan_records(path).records] == [0]
    assert writer.closed
    with pytest.raises(ValueError, match="closed RecordWriter"):
        writer.write(make_record(seq=3))


def test_closing_makes_a_line_appended_by_another_thread_durable_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / RECORDS_NAME
    held = HeldFsync(path, hold=0, lines=0)
    monkeypatch.setattr(eval.records.run_folder, "os", held)
    writer = RecordWriter(path)
    with writer._cond:  # a write in another thread: its line appended, its fsync not yet begun
        writer._append(memoryview(dumps_record(make_record(seq=0))))
    writer.close()
    assert held.durable == [path.stat().st_size] and writer.closed
    assert [r.seq for r in scan_records(path).records] == [0]
    with pytest.raises(ValueError, match="closed RecordWriter"):
        writer.write(make_record(seq=1))
