"""Run records on disk: the manifest, the append-only request log, and the reader scorers use.

Layout of one run (readers never parse these names; everything is inside the files):
    runs/<variant>/<run_id>/manifest.json   RunManifest, rewritten atomically (tmp + fsync + os.replace)
    runs/<variant>/<run_id>/records.jsonl   one RequestRecord per line, appended, flushed and fsync'd per record

A record line is a JSON object with the RequestRecord field names. Nested values:
    usage    {"prompt_tokens", "completion_tokens", "cached_tokens"}
    timings  {"sent_at", "first_token_s", "done_s"} or null
    topk     null or {"enc": "z1", "n": positions, "f": "f4"|"f8", "wide": bool, "data": base64}
             where data = zlib(lens u16[n] | chosen_idx u8[n] | ids i32[m] | logprobs f[m] | extra_chosen f[e])
             (ids and logprobs byte-shuffled). Logprobs are float32 when every value round-trips exactly through
             float32 (what vLLM sends), else float64 ("f8"); decoding gives back the exact Python floats.
             chosen_idx[i] is the column of row i holding chosen_logprobs[i] bit for bit, or 255 when it is not
             in the row (then the value is the next one of extra_chosen). A missing logprob (null from the server)
             is stored as NaN.

Slots: a complete run holds one final record per slot (dataset, example_id, pass_name, repetition);
`expected_records` in the manifest counts slots. A slot can have several records: a warm miss (`invalid`,
attempt 0) followed by its re-primed retry (attempt 1), or a group re-run from cold after a server restart or an
interrupted session (group g+1). `final_records` picks, per slot, the record with the highest (group, attempt).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import zlib
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from eval.errors import DataError
from eval.records.types import RECORD_SCHEMA_VERSION, ClientTimings, RequestRecord, TopK, Usage

MANIFEST_NAME = "manifest.json"
RECORDS_NAME = "records.jsonl"
TOPK_ENCODING = "z1"
_NO_COLUMN = 255

Slot = tuple[str, str, str, int]


@dataclass
class RunManifest:
    """The header of one run: what was asked, of which server, with which settings, and how far it got."""

    schema_version: int
    run_id: str
    variant: str
    inputs_path: str
    inputs_sha256: str
    inputs_header: dict[str, Any]
    model: str  # served model id
    # eval.probe.ProbeResult.to_dict(): block_size, max_model_len, capabilities, warnings, ...
    probe: dict[str, Any]
    # temperature, top_p, seed, top_logprobs, passes, timing_reps, cold_mode, concurrency, overrides...
    settings: dict[str, Any]
    lbeval_version: str
    git_commit: str | None
    git_dirty: bool | None
    client_versions: dict[str, str]
    host: dict[str, str]
    started_at: str  # ISO 8601 UTC of the first session
    ended_at: str | None  # None while running or incomplete
    complete: bool
    warnings: list[str]
    expected_records: int  # number of slots a complete run holds (see module docstring)
    sessions: list[dict[str, Any]] = field(default_factory=list)  # one per invocation (resumes append)
    stats: dict[str, Any] = field(default_factory=dict)  # counts by pass and status, invalid warm, retries


@dataclass
class LoadedRun:
    manifest: RunManifest
    records: list[RequestRecord]
    torn_lines: int
    run_dir: Path


# --- top-k codec ---------------------------------------------------------------------------------------------


def _shuffle(arr: np.ndarray[Any, Any]) -> bytes:
    """Byte-shuffle (all first bytes, then all second bytes, ...): floats and ids compress far better."""
    return arr.view(np.uint8).reshape(-1, arr.itemsize).T.tobytes()


def _unshuffle(raw: bytes, dtype: str, count: int) -> np.ndarray[Any, Any]:
    itemsize = np.dtype(dtype).itemsize
    planes = np.frombuffer(raw, dtype=np.uint8, count=count * itemsize).reshape(itemsize, count)
    return np.ascontiguousarray(planes.T).view(dtype).reshape(count)


def _fits_float32(values: np.ndarray[Any, Any]) -> bool:
    return bool(np.array_equal(values, values.astype(np.float32).astype(np.float64), equal_nan=True))


def _chosen_columns(topk: TopK) -> tuple[list[int], list[float]]:
    columns: list[int] = []
    extra: list[float] = []
    for row, chosen in zip(topk.logprobs, topk.chosen_logprobs, strict=True):
        col = _NO_COLUMN
        for j, value in enumerate(row[:_NO_COLUMN]):
            if value == chosen or (value != value and chosen != chosen):
                col = j
                break
        columns.append(col)
        if col == _NO_COLUMN:
            extra.append(chosen)
    return columns, extra


def encode_topk(topk: TopK) -> dict[str, Any]:
    n = len(topk.ids)
    if len(topk.logprobs) != n or len(topk.chosen_logprobs) != n:
        raise ValueError("TopK: ids, logprobs and chosen_logprobs must have one entry per position")
    lens = [len(row) for row in topk.ids]
    if any(len(r) != k for r, k in zip(topk.logprobs, lens, strict=True)):
        raise ValueError("TopK: every ids row needs a logprobs row of the same length")
    wide = max(lens, default=0) > 0xFFFF
    flat_ids = np.fromiter((i for row in topk.ids for i in row), dtype=np.int64, count=sum(lens))
    if flat_ids.size and (flat_ids.min() < -(2**31) or flat_ids.max() >= 2**31):
        raise ValueError("TopK: token id outside int32")
    columns, extra = _chosen_columns(topk)
    flat_lp = np.fromiter((v for row in topk.logprobs for v in row), dtype=np.float64, count=sum(lens))
    extra_arr = np.asarray(extra, dtype=np.float64)
    f32 = _fits_float32(flat_lp) and _fits_float32(extra_arr)
    fdt = "<f4" if f32 else "<f8"
    parts = [
        np.asarray(lens, dtype=np.uint32 if wide else np.uint16).tobytes(),
        np.asarray(columns, dtype=np.uint8).tobytes(),
        _shuffle(flat_ids.astype("<i4")),
        _shuffle(flat_lp.astype(fdt)),
        _shuffle(extra_arr.astype(fdt)),
    ]
    data = base64.b64encode(zlib.compress(b"".join(parts), 6)).decode("ascii")
    return {"enc": TOPK_ENCODING, "n": n, "f": "f4" if f32 else "f8", "wide": wide, "data": data}


def decode_topk(obj: dict[str, Any]) -> TopK:
    if obj.get("enc") != TOPK_ENCODING:
        raise ValueError(f"unknown top-k encoding {obj.get('enc')!r}")
    n = int(obj["n"])
    raw = zlib.decompress(base64.b64decode(obj["data"]))
    fdt = "<f4" if obj["f"] == "f4" else "<f8"
    ldt = "<u4" if obj.get("wide") else "<u2"
    pos = 0
    lens = np.frombuffer(raw, dtype=ldt, count=n, offset=pos)
    pos += lens.nbytes
    columns = np.frombuffer(raw, dtype=np.uint8, count=n, offset=pos).tolist()
    pos += n
    m = int(lens.sum())
    ids = _unshuffle(raw[pos : pos + 4 * m], "<i4", m).tolist()
    pos += 4 * m
    fsize = np.dtype(fdt).itemsize
    lps = _unshuffle(raw[pos : pos + fsize * m], fdt, m).astype(np.float64).tolist()
    pos += fsize * m
    n_extra = columns.count(_NO_COLUMN)
    extra = iter(_unshuffle(raw[pos : pos + fsize * n_extra], fdt, n_extra).astype(np.float64).tolist())
    id_rows: list[list[int]] = []
    lp_rows: list[list[float]] = []
    chosen: list[float] = []
    start = 0
    for k, col in zip(lens.tolist(), columns, strict=True):
        id_rows.append(ids[start : start + k])
        lp_rows.append(lps[start : start + k])
        chosen.append(next(extra) if col == _NO_COLUMN else lps[start + col])
        start += k
    return TopK(ids=id_rows, logprobs=lp_rows, chosen_logprobs=chosen)


# --- request records -------------------------------------------------------------------------------------------

_SCALARS = tuple(f.name for f in fields(RequestRecord) if f.name not in ("topk", "usage", "timings"))


def record_to_dict(rec: RequestRecord) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(rec, name) for name in _SCALARS}
    out["usage"] = asdict(rec.usage)
    out["timings"] = None if rec.timings is None else asdict(rec.timings)
    out["topk"] = None if rec.topk is None else encode_topk(rec.topk)
    return out


def dumps_record(rec: RequestRecord) -> bytes:
    return (json.dumps(record_to_dict(rec), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def record_from_dict(obj: dict[str, Any], *, with_topk: bool = True) -> RequestRecord:
    """Build a RequestRecord; raises ValueError/KeyError/TypeError on a malformed object.

    `with_topk=False` skips decoding the top-k (left None): a light read for resuming."""
    version = obj.get("schema_version")
    if version != RECORD_SCHEMA_VERSION:
        raise ValueError(f"record schema_version {version!r}, this lbeval reads {RECORD_SCHEMA_VERSION}")
    unknown = sorted(set(obj) - {f.name for f in fields(RequestRecord)})
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    kwargs = dict(obj)
    kwargs["usage"] = Usage(**(obj.get("usage") or {}))
    timings = obj.get("timings")
    kwargs["timings"] = None if timings is None else ClientTimings(**timings)
    topk = obj.get("topk")
    kwargs["topk"] = None if topk is None or not with_topk else decode_topk(topk)
    return RequestRecord(**kwargs)


@dataclass(frozen=True)
class ScanResult:
    records: list[RequestRecord]
    torn_lines: list[int]  # 1-based line numbers that could not be read
    good_bytes: int  # length of the prefix of the file made of complete, readable lines
    tail_torn: bool  # the last line is incomplete (no newline) or unreadable: a killed writer


def scan_records(path: Path, *, with_topk: bool = True) -> ScanResult:
    """Read a records file, skipping unreadable lines (reported by line number)."""
    if not path.exists():
        return ScanResult([], [], 0, False)
    data = path.read_bytes()
    records: list[RequestRecord] = []
    torn: list[int] = []
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
                raise ValueError("no newline")
            records.append(record_from_dict(json.loads(line), with_topk=with_topk))
        except (ValueError, KeyError, TypeError):
            torn.append(lineno)
            continue
        if not torn:
            good = pos
    tail_torn = bool(torn) and torn[-1] == lineno
    return ScanResult(records, torn, good, tail_torn)


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
    """Append-only, one fsync'd line per record; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh: BinaryIO = path.open("ab")
        self._lock = threading.Lock()
        self.written = 0

    def write(self, rec: RequestRecord) -> None:
        line = dumps_record(rec)
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.written += 1

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- manifest ------------------------------------------------------------------------------------------------


def write_manifest(run_dir: Path, manifest: RunManifest) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / MANIFEST_NAME
    tmp = run_dir / (MANIFEST_NAME + ".tmp")
    text = json.dumps(asdict(manifest), ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(run_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def read_manifest(run_dir: Path) -> RunManifest:
    path = run_dir / MANIFEST_NAME
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(path, None, None, "no run manifest here (is this a run directory?)") from None
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, None, f"not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(path, None, None, "manifest must be a JSON object")
    if obj.get("schema_version") != RECORD_SCHEMA_VERSION:
        raise DataError(path, None, "schema_version", f"this lbeval reads version {RECORD_SCHEMA_VERSION}")
    known = {f.name: f for f in fields(RunManifest)}
    for name in obj:
        if name not in known:
            raise DataError(path, None, name, "unknown field")
    for name, f in known.items():
        if name not in obj and f.default is MISSING and f.default_factory is MISSING:
            raise DataError(path, None, name, "missing field")
    return RunManifest(**obj)


def load_run(run_dir: Path) -> LoadedRun:
    """Manifest and every readable record of a run (torn or damaged lines are counted, not returned)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    scan = scan_records(run_dir / RECORDS_NAME)
    return LoadedRun(
        manifest=manifest, records=scan.records, torn_lines=len(scan.torn_lines), run_dir=run_dir
    )


def slot_of(rec: RequestRecord) -> Slot:
    return (rec.dataset, rec.example_id, rec.pass_name, rec.repetition)


def final_records(records: list[RequestRecord]) -> dict[Slot, RequestRecord]:
    """Per slot, the record that counts: the highest (group, attempt); earlier ones are superseded."""
    best: dict[Slot, RequestRecord] = {}
    for rec in records:
        slot = slot_of(rec)
        cur = best.get(slot)
        if cur is None or (rec.group, rec.attempt) > (cur.group, cur.attempt):
            best[slot] = rec
    return best
