"""The run folder: its one layout, the manifest, the append-only request log, and the readers.

Layout (the only place these names are defined):
    runs/<variant>/<run_id>/manifest.json   RunManifest, replaced atomically (eval.atomic)
    runs/<variant>/<run_id>/records.jsonl   one record per line (eval.records.codec), appended, flushed and
                                            fsync'd per record
    runs/<variant>/<run_id>/servers.jsonl   one line per session whose server lbeval started (redacted)
    runs/<variant>/<run_id>/ab_pairs.jsonl  `lbeval ab` only: one line per interleaved pair (eval.records.ab_pairs)
    runs/<variant>/<run_id>/ab_stop.json    `lbeval ab --stop-when-settled` only: why the session stopped early
                                            (eval.records.stop), the same in both runs, replaced atomically
    runs/<variant>/<run_id>/.lock           the writer's lock (fcntl.flock, held for a whole `lbeval run`
                                            session; holds the writer's pid, host and start time)
    runs/<variant>/LATEST                   the run id of the variant's last run (written after each run)
    runs/compare/, runs/inputs/, runs/servers/   lbeval's own folders beside the variants' (RESERVED_VARIANTS):
                                            the comparisons, the inputs manifests, the managed servers' logs

Slots: a complete run holds one final record per slot (dataset, example_id, pass_name, repetition);
`expected_records` in the manifest counts slots. A slot can have several records: a warm miss (`invalid`,
attempt 0) followed by its re-primed retry (attempt 1), or a group re-run from cold after a server restart or an
interrupted session (group g+1). Which one counts is `eval.records.final.select_final`.

One writer per run: `run_lock` holds an exclusive lock from before the manifest is read until after it is last
written, so two `lbeval run` sessions can never append to the same records. Readers still check what they read:
`damage` lists unreadable lines, duplicates and lost records, and a damaged run is never complete.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import os
import socket
import threading
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eval.atomic import WriteFailed, atomic_write, write_failed
from eval.errors import ConfigError, DataError, LbevalError, UsageError
from eval.records.codec import dumps_record, field_hints, record_from_dict
from eval.records.codec import type_name as _type_name
from eval.records.codec import type_ok as _type_ok
from eval.records.consistency import record_damage
from eval.records.final import Selection, describe_duplicates
from eval.records.manifest_parts import (
    ClientVersions,
    HostFacts,
    InputsHeaderFacts,
    PairingMark,
    ProbeFacts,
    RunSettings,
    RunStats,
    SessionEntry,
)
from eval.records.manifest_parts import ManifestError as ManifestError  # its readers name it with the layout
from eval.records.types import READABLE_SCHEMA_VERSIONS, RequestRecord
from eval.redact import redact_data

MANIFEST_NAME = "manifest.json"
RECORDS_NAME = "records.jsonl"
PAIRS_NAME = "ab_pairs.jsonl"  # lbeval ab: the pairing of two runs (eval/records/ab_pairs.py)
STOP_NAME = "ab_stop.json"  # lbeval ab --stop-when-settled: the stop record (eval/records/stop.py)
LATEST_NAME = "LATEST"
SERVERS_LOG = "servers.jsonl"  # one line per session whose server lbeval started
LOCK_NAME = ".lock"  # the writer's lock (see run_lock)
# folders under runs/ that are not variants: no variant may be named like one (its runs would mix with them)
RESERVED_VARIANTS = frozenset({"compare", "inputs", "servers"})


def refuse_reserved_variant(name: str) -> None:
    """ConfigError when `name` is one of lbeval's own folders under runs/ (RESERVED_VARIANTS)."""
    if name.lower() in RESERVED_VARIANTS:
        raise ConfigError(
            f"variant {name!r}: reserved (runs/{name.lower()}/ holds lbeval's own files); "
            f"choose another name (not {', '.join(sorted(RESERVED_VARIANTS))})"
        )


def refuse_ab_folder(run_dir: Path) -> None:
    """ConfigError when `run_dir` holds one side of an `lbeval ab` session: resuming it with `lbeval run` would
    append sequential records to an interleaved run, which the report would read as one paired session."""
    if (run_dir / PAIRS_NAME).exists():
        raise ConfigError(
            f"{run_dir} is one side of an lbeval ab session (it holds {PAIRS_NAME}); lbeval run will not "
            "resume into it: re-run the lbeval ab command, or pass --run-id NAME for a new run"
        )


@dataclass
class RunManifest:
    """The header of one run: what was asked, of which server, with which settings, and how far it got."""

    schema_version: int
    run_id: str
    variant: str
    inputs_path: str
    inputs_sha256: str
    inputs_header: InputsHeaderFacts  # the inputs manifest's header, as read (eval/records/manifest_parts.py)
    model: str  # served model id
    probe: ProbeFacts  # what the probe found the server to be (eval/records/manifest_parts.py)
    settings: RunSettings  # what a resume must match: sampling, passes, cold mode, the scenario plan
    lbeval_version: str
    git_commit: str | None
    git_dirty: bool | None
    client_versions: ClientVersions  # of the latest session, like `host`
    host: HostFacts
    started_at: str  # ISO 8601 UTC of the first session
    ended_at: str | None  # None while running or incomplete
    complete: bool
    warnings: list[str]
    expected_records: int  # number of slots a complete run holds (see module docstring)
    sessions: list[SessionEntry] = field(default_factory=list)  # one per invocation (resumes append)
    stats: RunStats = field(default_factory=RunStats)  # counts by pass and status, invalid warm, retries
    # `lbeval ab` only: this run is one side of an interleaved session, its pairing file part of it (written as
    # each session ends; checked by eval/records/ab_pairs.pairing_damage)
    interleaved: PairingMark | None = None


@dataclass
class LoadedRun:
    manifest: RunManifest
    records: list[RequestRecord]
    torn_lines: int
    run_dir: Path
    torn_line_numbers: list[int] = field(default_factory=list)  # 1-based lines of records.jsonl not readable
    torn_reasons: dict[int, str] = field(default_factory=dict)  # line -> why (scan_records)


@dataclass(frozen=True)
class ScanResult:
    records: list[RequestRecord]
    torn_lines: list[int]  # 1-based line numbers that could not be read
    good_bytes: int  # length of the prefix of the file made of complete, readable lines
    tail_torn: bool  # the last line is incomplete (no newline) or unreadable: a killed writer
    # 1-based line number -> why it could not be read (the field, when one field is wrong)
    torn_reasons: dict[int, str] = field(default_factory=dict)


# what a malformed line can raise while it is parsed and decoded (a line of 100,000 "[" is a RecursionError,
# a damaged top-k a zlib.error, a JSON array where an object belongs an AttributeError)
_UNREADABLE = (ValueError, KeyError, TypeError, RecursionError, OverflowError, AttributeError, zlib.error)


def _line_record(line: bytes, with_topk: bool) -> RequestRecord:
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError(f"a record is a JSON object, got {type(obj).__name__}")
    return record_from_dict(obj, with_topk=with_topk)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def scan_records(path: Path, *, with_topk: bool = True) -> ScanResult:
    """Read a records file, skipping unreadable lines (reported by line number, with the reason)."""
    if not path.exists():
        return ScanResult([], [], 0, False)
    data = path.read_bytes()
    records: list[RequestRecord] = []
    torn: list[int] = []
    reasons: dict[int, str] = {}
    pos = 0
    good = 0
    lineno = 0
    while pos < len(data):
        lineno += 1
        end = data.find(b"\n", pos)
        complete = end != -1
        line = data[pos : end if complete else len(data)]
        pos = end + 1 if complete else len(data)
        try:
            if not complete:
                raise ValueError("no newline (a torn last line)")
            records.append(_line_record(line, with_topk))
        except _UNREADABLE as exc:
            torn.append(lineno)
            reasons[lineno] = _reason(exc)
            continue
        if not torn:
            good = pos
    tail_torn = bool(torn) and torn[-1] == lineno
    return ScanResult(records, torn, good, tail_torn, reasons)


def repair_records(path: Path) -> ScanResult:
    """Before appending: drop a torn last line (a killed writer); refuse a damaged line elsewhere.

    The records returned are light (topk None)."""
    scan = scan_records(path, with_topk=False)
    if not scan.torn_lines:
        return scan
    if scan.torn_lines != [scan.torn_lines[0]] or not scan.tail_torn:
        raise DataError(path, scan.torn_lines[0], None, "unreadable record line before the end of the file")
    with path.open("r+b") as fh:
        fh.truncate(scan.good_bytes)
        fh.flush()
        os.fsync(fh.fileno())
    return scan


class RecordWriter:
    """Append-only, one line per record; safe to share between threads. A write returns once its line is
    durable: an fsync begun after the line was appended has returned. Writers in several threads share
    their fsyncs: one runs at a time, and the lines appended meanwhile wait for the next, which covers them all
    (N replicas' lanes appending at once wait for one fsync, not for N in turn).

    A write that fails (a full disk: the append or the fsync) is cut off again, with every line not yet fsync'd
    (their writes fail alike), so this writer never leaves a partial line or one whose write raised, and raises
    WriteFailed naming the file and the space left; the writer is closed then (`closed`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._durable = os.fstat(self._fd).st_size  # the file's size up to its last fsync'd line
        except OSError as exc:
            raise write_failed(path, exc, "cannot open the records file") from None
        self._cond = threading.Condition(threading.Lock())
        self._size = self._durable  # the file's size with every line appended
        self._appended = 0  # lines appended by this writer
        self._synced = 0  # of which fsync'd
        self._syncing = False  # an fsync is running (outside the lock): the descriptor stays open meanwhile
        self._failed: WriteFailed | None = None
        self._closing = False
        self.written = 0

    def write(self, rec: RequestRecord) -> None:
        line = memoryview(dumps_record(rec))
        with self._cond:
            mine = self._append(line)
            while self._synced < mine:
                if self._failed is not None:
                    raise WriteFailed(str(self._failed), self.path, self._failed.errno)
                if self._syncing:
                    self._cond.wait()
                else:
                    self._sync()
            self.written += 1

    def _append(self, line: memoryview) -> int:
        """Append one line (the lock held); its number among this writer's lines."""
        if self._fd is None or self._closing:
            raise ValueError(f"{self.path}: write to a closed RecordWriter")
        size = len(line)
        try:
            while line:
                line = line[os.write(self._fd, line) :]
        except OSError as exc:
            raise self._fail(exc) from None
        self._size += size
        self._appended += 1
        return self._appended

    def _sync(self) -> None:
        """fsync every line appended so far, the lock released meanwhile (others append and wait)."""
        fd, upto, size = self._fd, self._appended, self._size
        assert fd is not None
        error: OSError | None = None
        self._syncing = True
        try:
            self._cond.release()
            try:
                os.fsync(fd)
            except OSError as exc:
                error = exc
        finally:
            self._cond.acquire()
            self._syncing = False
            self._cond.notify_all()
        if self._failed is not None:  # an append failed meanwhile: these lines were cut off with it
            self._close()
        elif error is not None:
            raise self._fail(error) from None
        else:
            self._synced, self._durable = upto, size

    def _fail(self, exc: OSError) -> WriteFailed:
        """Cut the file back to its last fsync'd line (shrinking needs no space), fail every write waiting for
        an fsync, close (once no fsync runs)."""
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._durable)
        self._failed = write_failed(self.path, exc, "cannot append a record")
        if not self._syncing:
            self._close()
        self._cond.notify_all()
        return self._failed

    @property
    def closed(self) -> bool:
        return self._fd is None

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Close once every line appended is durable (a write in another thread may have appended its line and
        not yet begun its fsync: it returns as usual); nothing is appended after."""
        with self._cond:
            self._closing = True
            while True:
                self._cond.wait_for(lambda: not self._syncing)
                if self._fd is None or self._synced >= self._appended:
                    break
                with contextlib.suppress(WriteFailed):  # its writes raise it; closed by then
                    self._sync()
            self._close()
            self._cond.notify_all()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- manifest ------------------------------------------------------------------------------------------------


def write_manifest(run_dir: Path, manifest: RunManifest) -> Path:
    path = run_dir / MANIFEST_NAME
    obj = {f.name: getattr(manifest, f.name) for f in fields(manifest)}
    for name in _PARTS:
        obj[name] = obj[name].to_dict()
    obj["sessions"] = [s.to_dict() for s in manifest.sessions]
    if manifest.interleaved is None:  # written only for a side of an lbeval ab session
        del obj["interleaved"]
    else:
        obj["interleaved"] = manifest.interleaved.to_dict()
    atomic_write(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
    return path


# the manifest's typed parts, each read by its own from_dict (eval/records/manifest_parts.py)
_PARTS: dict[
    str,
    type[ProbeFacts]
    | type[RunSettings]
    | type[RunStats]
    | type[InputsHeaderFacts]
    | type[HostFacts]
    | type[ClientVersions],
] = {
    "inputs_header": InputsHeaderFacts,
    "probe": ProbeFacts,
    "settings": RunSettings,
    "stats": RunStats,
    "host": HostFacts,
    "client_versions": ClientVersions,
}


def _check_manifest_fields(path: Path, obj: dict[str, Any]) -> None:
    if obj.get("schema_version") not in READABLE_SCHEMA_VERSIONS:  # 1: before scenarios (read the same way)
        readable = ", ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
        raise ManifestError(path, None, "schema_version", f"this lbeval reads version {readable}")
    known = {f.name: f for f in fields(RunManifest)}
    hints = field_hints(RunManifest)
    for name in obj:
        if name not in known:
            raise ManifestError(path, None, name, "unknown field")
    for name, f in known.items():
        if name not in obj:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ManifestError(path, None, name, "missing field")
            continue
        if name in _PARTS or name in ("sessions", "interleaved"):
            continue
        if not _type_ok(obj[name], hints[name]):
            got = type(obj[name]).__name__
            raise ManifestError(
                path, None, name, f"must be {_type_name(hints[name])}, got {got} {obj[name]!r:.40}"
            )
    if obj["expected_records"] < 0:
        raise ManifestError(path, None, "expected_records", "must not be negative")


def read_manifest(run_dir: Path) -> RunManifest:
    """The run's manifest, every field type-checked; any problem is a ManifestError naming the file and field."""
    path = run_dir / MANIFEST_NAME
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(path, None, None, "no run manifest here (is this a run directory?)") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(path, exc.lineno, None, f"not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, None, None, f"cannot be read ({exc})") from None
    if not isinstance(obj, dict):
        raise ManifestError(path, None, None, "manifest must be a JSON object")
    _check_manifest_fields(path, obj)
    parts: dict[str, Any] = {
        name: part.from_dict(obj[name], path) for name, part in _PARTS.items() if name in obj
    }
    sessions = obj.get("sessions", [])
    if not isinstance(sessions, list):
        raise ManifestError(path, None, "sessions", f"must be a list, got {type(sessions).__name__}")
    parts["sessions"] = [SessionEntry.from_dict(s, path, i) for i, s in enumerate(sessions)]
    if obj.get("interleaved") is not None:
        parts["interleaved"] = PairingMark.from_dict(obj["interleaved"], path)
    return RunManifest(**{**obj, **parts})


def load_run(run_dir: Path) -> LoadedRun:
    """Manifest and every readable record of a run (torn or damaged lines are counted, not returned)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    scan = scan_records(run_dir / RECORDS_NAME)
    return LoadedRun(
        manifest=manifest,
        records=scan.records,
        torn_lines=len(scan.torn_lines),
        run_dir=run_dir,
        torn_line_numbers=list(scan.torn_lines),
        torn_reasons=dict(scan.torn_reasons),
    )


# --- the one writer --------------------------------------------------------------------------------------------


class RunBusy(LbevalError):
    """Another lbeval process is writing this run folder."""


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"pid {info['pid']} on {info['host']}, since {info['started_at']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid is not written yet"


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's exclusive lock (one writer per run); RunBusy names the process holding it.

    The lock is `fcntl.flock` on `.lock`: the kernel releases it when the holder exits, even when killed, so it
    is never stale. The file is kept (removing it would let a third process lock a new file while a second one
    still holds the old one); its pid, host and start time are cleared when the lock is released."""
    path = run_dir / LOCK_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise write_failed(path, exc, "cannot create the run's lock file") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(
                f"{run_dir}: another lbeval run ({_holder(fd)}) is writing this run; wait for it or stop it"
            ) from None
        since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        note = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started_at": since})
        with contextlib.suppress(OSError):  # a full disk: the lock holds all the same, unnamed
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode("utf-8") + b"\n", 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def damage(loaded: LoadedRun, sel: Selection) -> list[str]:
    """What is wrong with a run's records as read (empty: nothing): unreadable lines, duplicates, records that
    contradict their run (eval/records/consistency.py), lost records. Any damage makes the run incomplete."""
    out: list[str] = []
    torn = loaded.torn_line_numbers
    if torn:
        lines = ", ".join(str(n) for n in torn[:10]) + (
            f" and {len(torn) - 10} more" if len(torn) > 10 else ""
        )
        why = "".join(f"; line {n}: {loaded.torn_reasons[n]}" for n in torn[:3] if n in loaded.torn_reasons)
        out.append(
            f"{RECORDS_NAME}: {len(torn)} unreadable record line(s) (torn or damaged): line {lines}{why}"
        )
    dup = describe_duplicates(sel)
    if dup is not None:
        out.append(dup)
    m = loaded.manifest
    out += record_damage(loaded.records, torn, m.run_id, m.variant, m.sessions, RECORDS_NAME)
    counted = m.stats.records
    lines_read = len(loaded.records) + len(torn)
    if lines_read < counted:
        out.append(
            f"{RECORDS_NAME} holds {lines_read} record line(s), {counted - lines_read} fewer than the "
            f"{counted} the manifest counted (records were lost)"
        )
    elif m.complete and len(sel.final) + len(torn) < m.expected_records:  # not explained by unreadable lines
        out.append(
            f"the manifest says complete, but only {len(sel.final)}/{m.expected_records} planned requests "
            "have a record (records were lost)"
        )
    return out


def write_latest(run_dir: Path) -> None:
    """runs/<variant>/LATEST names the variant's last run (for make and `resolve_run`)."""
    atomic_write(run_dir.parent / LATEST_NAME, run_dir.name + "\n")


def resolve_run(arg: str, runs_root: Path) -> Path:
    """RUN as given: a run folder (holding manifest.json), or a variant name -> its latest run under runs_root.

    The latest run: the one `runs_root/<variant>/LATEST` names, else the one whose manifest has the newest
    `started_at`.
    """
    path = Path(arg)
    if (path / MANIFEST_NAME).is_file():
        return path
    variant_dir = runs_root / arg
    if "/" in arg or arg in ("", ".", ".."):
        raise UsageError(f"{arg}: not a run folder (no {MANIFEST_NAME})")
    latest = variant_dir / LATEST_NAME
    if latest.is_file():
        named = variant_dir / latest.read_text(encoding="utf-8").strip()
        if "/" not in named.name and (named / MANIFEST_NAME).is_file():
            return named
    candidates = []
    if variant_dir.is_dir():
        for child in sorted(variant_dir.iterdir()):
            if (child / MANIFEST_NAME).is_file():
                m = read_manifest(child)
                if m.variant == arg:
                    candidates.append((m.started_at or "", child.name, child))
    if not candidates:
        raise UsageError(
            f"{arg}: not a run folder (no {MANIFEST_NAME}) and no run of a variant named {arg!r} under "
            f"{runs_root}/ {did_you_mean(arg, variants_under(runs_root))}"
        )
    return max(candidates)[2]


def variants_under(runs_root: Path) -> list[str]:
    """The variants with at least one run folder (a folder holding a manifest) under runs_root, sorted."""
    if not runs_root.is_dir():
        return []
    return sorted(
        d.name
        for d in runs_root.iterdir()
        if d.is_dir() and any((c / MANIFEST_NAME).is_file() for c in d.iterdir() if c.is_dir())
    )


def did_you_mean(name: str, known: list[str]) -> str:
    """`(did you mean patched? variants with runs there: main, patched)`, for a name that matched nothing."""
    if not known:
        return "(no variant has a run there yet)"
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"({hint}variants with runs there: {', '.join(known)})"


def append_server_record(run_dir: Path, info: Mapping[str, Any]) -> None:
    """Note in `run_dir/servers.jsonl` which server lbeval started for a session of that run (redacted)."""
    try:
        with (run_dir / SERVERS_LOG).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(redact_data(info), sort_keys=True) + "\n")
    except OSError as exc:
        raise write_failed(run_dir / SERVERS_LOG, exc) from None
