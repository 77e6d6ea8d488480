"""On-disk codec of one request record: a JSON line with the RequestRecord field names.

Versions: 3 (written) adds `server_foreign` and `cache_finding` (eval/records/server_figures.py), and
`server_cached` (written only when set, like `cache_check` below: a batch's usage finding); version 1 and 2
lines get them from their stored deltas and usage by `figure_check` (without the finished-requests delta, which
they did not keep). 2 adds `scenario` and `variation`; version 1 lines are read with their defaults ("cache",
{}). Unknown fields and versions are refused. `cache_check` (version 2) is written only when it is not
"verified" (a server that reports no cached tokens): records of vLLM runs are unchanged, and an lbeval that does
not know the field refuses an unverified record rather than read it as verified.

Nested values:
    usage    {"prompt_tokens", "completion_tokens", "cached_tokens"}
    timings  {"sent_at", "first_token_s", "done_s"} or null
    topk     null or {"enc": "z1", "n": positions, "f": "f4"|"f8", "wide": bool, "data": base64}
             where data = zlib(lens u16[n] | chosen_idx u8[n] | ids i32[m] | logprobs f[m] | extra_chosen f[e])
             (ids and logprobs byte-shuffled). Logprobs are float32 when every value round-trips exactly through
             float32 (what vLLM sends), else float64 ("f8"); decoding gives back the exact Python floats.
             chosen_idx[i] is the column of row i holding chosen_logprobs[i] bit for bit, or 255 when it is not
             in the row (then the value is the next one of extra_chosen). A missing logprob (null from the server)
             is stored as NaN.
"""

from __future__ import annotations

import base64
import json
import types
import typing
import zlib
from dataclasses import asdict, fields
from functools import cache
from typing import Any

import numpy as np

from eval.records.server_figures import figure_check
from eval.records.types import (
    CACHE_CHECKS,
    CACHE_VERIFIED,
    READABLE_SCHEMA_VERSIONS,
    ClientTimings,
    RequestRecord,
    TopK,
    Usage,
)
from eval.records.vocabulary import STATUSES

TOPK_ENCODING = "z1"
_NO_COLUMN = 255


# --- top-k ---------------------------------------------------------------------------------------------


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


# --- field types ---------------------------------------------------------------------------------------------


class FieldError(ValueError):
    """A record (or manifest) field of the wrong type or range; `field` names it (dotted for nested ones)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"field {field}: {message}")
        self.field = field


def type_ok(value: object, tp: Any) -> bool:
    """Whether a JSON value fits a dataclass annotation (str, int, float, bool, None, unions, list[T],
    dict[K, V]); an int is never a bool, a float accepts an int."""
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return any(type_ok(value, arg) for arg in typing.get_args(tp))
    if origin is list:
        (item,) = typing.get_args(tp)
        return isinstance(value, list) and all(type_ok(v, item) for v in value)
    if origin is dict:
        key, val = typing.get_args(tp)
        return isinstance(value, dict) and all(type_ok(k, key) and type_ok(v, val) for k, v in value.items())
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, tp)


def type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "") if typing.get_origin(tp) or tp is Any else tp.__name__


@cache
def field_hints(cls: type) -> dict[str, Any]:
    """A dataclass's field annotations, resolved once per class (resolving them costs about half a millisecond,
    and every record read is checked against three classes, every manifest part against its own). Callers only
    read the dict."""
    return typing.get_type_hints(cls)


def check_fields(obj: dict[str, Any], cls: type, prefix: str = "", skip: tuple[str, ...] = ()) -> None:
    """Every field of `obj` present in dataclass `cls` has its annotated type, else FieldError naming it."""
    hints = field_hints(cls)
    for name, value in obj.items():
        if name in skip or name not in hints or type_ok(value, hints[name]):
            continue
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        got = type(value).__name__
        raise FieldError(prefix + name, f"must be {type_name(hints[name])}, got {got} {shown}")


# counters of a record that are indexes or counts: never negative
_NON_NEGATIVE = ("repetition", "attempt", "seq", "group", "retries", "server_cached")


def _check_record(obj: dict[str, Any]) -> None:
    check_fields(obj, RequestRecord, skip=("usage", "timings", "topk"))
    for name in _NON_NEGATIVE:
        if obj.get(name) is not None and obj[name] < 0:
            raise FieldError(name, f"must be >= 0, got {obj[name]!r}")
    if obj.get("status") not in STATUSES:
        raise FieldError("status", f"must be one of {', '.join(STATUSES)}, got {obj.get('status')!r:.40}")
    for name, cls in (("usage", Usage), ("timings", ClientTimings)):
        value = obj.get(name)
        if value is not None and not isinstance(value, dict):
            raise FieldError(name, f"must be an object or null, got {type(value).__name__}")
        check_fields(value or {}, cls, prefix=name + ".")
    topk = obj.get("topk")
    if topk is not None and not isinstance(topk, dict):
        raise FieldError("topk", f"must be an object or null, got {type(topk).__name__}")
    _check_topk_positions(topk, obj.get("output_token_ids"))


def _check_topk_positions(topk: dict[str, Any] | None, tokens: list[int] | None) -> None:
    """The top-k has one row per generated token (what every comparison of two records reads)."""
    if topk is None:
        return
    n = topk.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise FieldError("topk.n", f"must be a count of positions, got {n!r:.40}")
    if n != len(tokens or []):
        raise FieldError("topk", f"{n} positions, but output_token_ids holds {len(tokens or [])} tokens")


# --- request records -------------------------------------------------------------------------------------------

_SCALARS = tuple(f.name for f in fields(RequestRecord) if f.name not in ("topk", "usage", "timings"))
_V2_FIELDS = {"scenario", "variation"}  # absent from version 1 records (the defaults fill them)
# absent from version 1 and 2 records: derived on reading (server_foreign, cache_finding) or the default (replica 0)
_V3_FIELDS = {"server_foreign", "cache_finding", "replica"}
# written only when set, from version 3 on (a batch's usage finding, eval/records/server_figures.batch_check)
_OPTIONAL_FIELDS = {"server_cached"}


def record_to_dict(rec: RequestRecord) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(rec, name) for name in _SCALARS}
    out["usage"] = asdict(rec.usage)
    out["timings"] = None if rec.timings is None else asdict(rec.timings)
    out["topk"] = None if rec.topk is None else encode_topk(rec.topk)
    if rec.cache_check == CACHE_VERIFIED:
        del out["cache_check"]  # the default (see the module docstring)
    for name in _V3_FIELDS | _OPTIONAL_FIELDS:
        if out[name] is None:
            del out[name]  # written only when set (the default None: the figures are the request's own)
    return out


def dumps_record(rec: RequestRecord) -> bytes:
    return (json.dumps(record_to_dict(rec), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def record_from_dict(obj: dict[str, Any], *, with_topk: bool = True) -> RequestRecord:
    """Build a RequestRecord; raises ValueError/KeyError/TypeError on a malformed object (FieldError, a
    ValueError, names a field of the wrong type or range: `"repetition": "0"`, null, -1, 0.5, 1e400).

    `with_topk=False` skips decoding the top-k (left None): a light read for resuming."""
    version = obj.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
        raise ValueError(f"record schema_version {version!r}, this lbeval reads {readable}")
    known = {f.name for f in fields(RequestRecord)} - (_V2_FIELDS if version == 1 else set())
    known -= _V3_FIELDS | _OPTIONAL_FIELDS if version in (1, 2) else set()
    unknown = sorted(set(obj) - known)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    if obj.get("cache_check", CACHE_VERIFIED) not in CACHE_CHECKS:
        raise ValueError(f"cache_check {obj.get('cache_check')!r} (known: {', '.join(CACHE_CHECKS)})")
    _check_record(obj)
    kwargs = dict(obj)
    kwargs["usage"] = Usage(**(obj.get("usage") or {}))
    timings = obj.get("timings")
    kwargs["timings"] = None if timings is None else ClientTimings(**timings)
    topk = obj.get("topk")
    kwargs["topk"] = None if topk is None or not with_topk else decode_topk(topk)
    if version in (1, 2):
        check = figure_check(obj.get("server_metrics"), kwargs["usage"])
        kwargs["server_foreign"], kwargs["cache_finding"] = check.foreign, check.finding
    return RequestRecord(**kwargs)
