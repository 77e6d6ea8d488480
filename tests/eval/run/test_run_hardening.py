"""`lbeval run` under stress: two writers on one run, a full disk, SIGTERM."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eval.prepare.inputs import inputs_digest
from eval.records.final import select_final
from eval.records.run_folder import (
    LOCK_NAME,
    MANIFEST_NAME,
    RECORDS_NAME,
    RunBusy,
    load_run,
    read_manifest,
    run_lock,
)
from eval.run.runner import default_run_id, execute_run
from tests.eval.fake_fixtures import config_for, fake_fixture, make_row, write_rows  # noqa: F401 - fixture
from tests.support.fake_server import FakeServer, Fault

ROOT = Path(__file__).resolve().parents[3]


def two_rows(tmp_path: Path) -> Path:
    return write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])


def cli_run(fake: FakeServer, inputs: Path, out: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "eval.cli", "run", "--variant", "v1", "--inputs", str(inputs), "--quiet"]
    cmd += ["--scenarios", "cache"]  # the cache-only plan the test resumes with config_for
    cmd += ["--base-url", fake.base_url, "--out", str(out), "--timing-reps", "2", "--stream-all"]
    cmd += ["--seed", "3", "--backoff", "0.01"]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lines(path: Path, n: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path}: fewer than {n} lines after {timeout_s} s")


# ---------------------------------------------------------------- one writer per run


def test_a_second_run_on_the_same_folder_is_refused_naming_the_first(
    fake: FakeServer, tmp_path: Path
) -> None:
    # the reporter's `$RUN & $RUN & wait`: before the lock both completed, 2 records per slot
    inputs = two_rows(tmp_path)
    out = tmp_path / "runs"
    run_dir = out / "v1" / default_run_id(inputs_digest(inputs))
    # the second input's requests are held until the second run has been refused: the first is still writing
    # then, whatever the machine's load
    held = threading.Event()
    fake.add_fault(Fault("slow", match="Example ex1:", times=-1, hold=held))
    first = cli_run(fake, inputs, out)
    try:
        wait_for_lines(run_dir / RECORDS_NAME, 1)
        second = cli_run(fake, inputs, out)
        _, err = second.communicate(timeout=600)
    finally:
        held.set()
    assert second.returncode == 1
    assert err.startswith(
        f"lbeval run: error: {run_dir}: another lbeval run (pid {first.pid} on {socket.gethostname()}, since "
    )
    assert err.rstrip().endswith("is writing this run; wait for it or stop it") and err.count("\n") == 1
    first.communicate(timeout=120)
    assert first.returncode == 0
    loaded = load_run(run_dir)
    sel = select_final(loaded.records)
    assert loaded.manifest.complete and len(loaded.manifest.sessions) == 1
    assert len(loaded.records) == loaded.manifest.expected_records == 18 and sel.duplicates == {}
    assert (run_dir / LOCK_NAME).read_text() == ""  # released


def test_the_lock_is_held_before_the_manifest_is_read(fake: FakeServer, tmp_path: Path) -> None:
    inputs = two_rows(tmp_path)
    run_dir = tmp_path / "runs" / "v1" / default_run_id(inputs_digest(inputs))
    with run_lock(run_dir), pytest.raises(RunBusy, match=f"pid {os.getpid()} on "):
        execute_run(config_for(fake, inputs, tmp_path / "runs"))
    assert not (run_dir / MANIFEST_NAME).exists() and not (run_dir / RECORDS_NAME).exists()
    assert fake.requests == []  # refused before the probe: nothing sent


def test_a_managed_server_run_takes_the_same_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `lbeval run --spec`: the server starts, then the run is refused; nothing is written to the run folder
    # (servers.jsonl is written under the lock now, not after the run)
    from eval.cli import main

    inputs = two_rows(tmp_path)
    run_dir = tmp_path / "runs" / "fakevllm" / default_run_id(inputs_digest(inputs))
    code = (
        "import sys, time; from tests.support.fake_server import FakeServer; s = FakeServer(); "
        "s.port = int(sys.argv[1]); s.start(); print('fake up', flush=True); time.sleep(3600)"
    )
    specs = tmp_path / "specs.toml"
    specs.write_text(
        f"""
[variants.fakevllm]
command = [{sys.executable!r}, "-c", {code!r}]
args = ["{{port}}"]
env = {{ PYTHONPATH = {str(ROOT)!r} }}
log = {str(tmp_path / "server.log")!r}
model = "fake-model"
"""
    )
    argv = ["run", "--variant", "fakevllm", "--specs", str(specs), "--inputs", str(inputs)]
    argv += ["--out", str(tmp_path / "runs"), "--passes", "cold,warm", "--quiet", "--retries", "0"]
    with run_lock(run_dir):
        assert main(argv) == 1
    assert "another lbeval run (pid" in capsys.readouterr().err
    assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_NAME]
    assert main(argv) == 0  # free again
    assert len((run_dir / "servers.jsonl").read_text().splitlines()) == 1


# ---------------------------------------------------------------- a full disk


class FullDisk:
    """Stands in for the `os` module of one lbeval module: after `allow` successful calls of `name`, the
    next call writes part of its data (for os.write) and every later one fails with ENOSPC."""

    def __init__(self, name: str, allow: int) -> None:
        self.name, self.allow, self.calls = name, allow, 0

    def __getattr__(self, attr: str) -> object:
        real = getattr(os, attr)
        if attr != self.name:
            return real

        def failing(*args: object) -> object:
            self.calls += 1
            if self.calls <= self.allow:
                return real(*args)
            if attr == "write" and self.calls == self.allow + 1:
                fd, data = args
                return os.write(fd, bytes(data)[: len(data) // 2])  # type: ignore[arg-type]
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return failing


@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_a_full_disk_stops_the_run_with_one_line_and_exit_3_then_it_resumes(
    fake: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    failing: str,
) -> None:
    import eval.atomic
    import eval.records.run_folder
    from eval.cli import main

    inputs = two_rows(tmp_path)
    out = tmp_path / "runs"
    run_dir = out / "v1" / default_run_id(inputs_digest(inputs))
    argv = ["run", "--variant", "v1", "--inputs", str(inputs), "--base-url", fake.base_url, "--quiet"]
    argv += ["--scenarios", "cache"]
    argv += ["--out", str(out), "--timing-reps", "2", "--seed", "3", "--backoff", "0.01"]
    # 5 records written, the 6th half-written (or written, not synced) then ENOSPC
    monkeypatch.setattr(eval.records.run_folder, "os", FullDisk(failing, 5))
    assert main(argv) == 3
    err = capsys.readouterr().err.strip()
    records = run_dir / RECORDS_NAME
    assert err.startswith(f"lbeval run: error: {records}: cannot append a record (No space left on device, ")
    assert err.endswith("; the run is incomplete: free space, then re-run the same command to resume")
    assert " KiB free on " in err or " GiB free on " in err
    assert "\n" not in err and "Traceback" not in err
    loaded = load_run(run_dir)
    assert loaded.torn_lines == 0 and len(loaded.records) == 5  # the 6th line was cut off again
    assert not loaded.manifest.complete
    assert (loaded.manifest.sessions[-1].outcome or "").startswith(
        f"stopped: {records}: cannot append a record"
    )
    # the disk is still full when the outcome is written: both failures on one line, no temporary file left
    monkeypatch.setattr(eval.records.run_folder, "os", FullDisk("write", 2))
    monkeypatch.setattr(
        eval.atomic, "os", FullDisk("fsync", 2)
    )  # the session start is written (file, folder)
    assert main(argv) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lbeval run: error: {records}: cannot append a record (No space left on device, ")
    assert "; manifest.json could not be updated either; the run is incomplete: free space, then" in err
    assert "\n" not in err and sorted(p.name for p in run_dir.iterdir()) == [
        LOCK_NAME,
        MANIFEST_NAME,
        RECORDS_NAME,
    ]
    assert len(load_run(run_dir).records) == 7 and read_manifest(run_dir).sessions[-1].outcome is None
    monkeypatch.undo()  # space freed: the same command resumes and completes without duplicates
    assert main(argv) == 0
    loaded = load_run(run_dir)
    assert loaded.manifest.complete and len(loaded.records) == 18 and loaded.torn_lines == 0
    assert select_final(loaded.records).duplicates == {}


# ---------------------------------------------------------------- SIGTERM


def test_sigterm_stops_the_run_like_ctrl_c_and_it_resumes(fake: FakeServer, tmp_path: Path) -> None:
    # CI systems and process managers stop jobs with SIGTERM: before, the process died (-15) without writing
    # the session's outcome; now it is an interrupt: outcome "interrupted", exit 130, whole records
    inputs = two_rows(tmp_path)
    out = tmp_path / "runs"
    run_dir = out / "v1" / default_run_id(inputs_digest(inputs))
    held = threading.Event()  # the second input's requests wait until the run was stopped: it stops mid-run
    fake.add_fault(Fault("slow", match="Example ex1:", times=-1, hold=held))
    proc = cli_run(fake, inputs, out)
    try:
        wait_for_lines(run_dir / RECORDS_NAME, 3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
    finally:
        held.set()
    assert proc.returncode == 130, err
    # the interrupt says what was kept and how to resume (tests/eval/test_exit_codes.py), nothing else
    lines = err.strip().splitlines()
    assert lines[0] == "lbeval run: interrupted" and len(lines) == 3, err
    assert lines[1].startswith("lbeval run: ") and f"records kept in {run_dir}" in lines[1]
    assert lines[2].startswith("lbeval run: re-run to resume")
    loaded = load_run(run_dir)
    assert loaded.manifest.sessions[-1].outcome == "interrupted" and not loaded.manifest.complete
    assert loaded.torn_lines == 0 and 3 <= len(loaded.records) < 18
    assert (run_dir / LOCK_NAME).read_text() == ""  # the lock was released on the way out
    fake.faults.clear()
    resumed = load_run(execute_run(config_for(fake, inputs, out, stream_all=True)))
    assert resumed.manifest.complete and len(resumed.records) == 18
    assert select_final(resumed.records).duplicates == {}
