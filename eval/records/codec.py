"""On-disk codec of one request record: a JSON line with the RequestRecord field names.

Versions: 2 (written) adds `scenario` and `variation`; version 1 lines are read with their defaults ("cache",
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
import zlib
from dataclasses import asdict, fields
from typing import Any

import numpy as np

from eval.records.types import (
    CACHE_CHECKS,
    CACHE_VERIFIED,
    READABLE_SCHEMA_VERSIONS,
    ClientTimings,
    RequestRecord,
    TopK,
    Usage,
)

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


# --- request records -------------------------------------------------------------------------------------------

_SCALARS = tuple(f.name for f in fields(RequestRecord) if f.name not in ("topk", "usage", "timings"))
_V2_FIELDS = {"scenario", "variation"}  # absent from version 1 records (the defaults fill them)
_V3_FIELDS = {"replica"}  # absent from version 1 and 2 records (the default fills it: replica 0)


def record_to_dict(rec: RequestRecord) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(rec, name) for name in _SCALARS}
    out["usage"] = asdict(rec.usage)
    out["timings"] = None if rec.timings is None else asdict(rec.timings)
    out["topk"] = None if rec.topk is None else encode_topk(rec.topk)
    if rec.cache_check == CACHE_VERIFIED:
        del out["cache_check"]  # the default (see the module docstring)
    return out


def dumps_record(rec: RequestRecord) -> bytes:
    return (json.dumps(record_to_dict(rec), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def record_from_dict(obj: dict[str, Any], *, with_topk: bool = True) -> RequestRecord:
    """Build a RequestRecord; raises ValueError/KeyError/TypeError on a malformed object.

    `with_topk=False` skips decoding the top-k (left None): a light read for resuming."""
    version = obj.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
        raise ValueError(f"record schema_version {version!r}, this lbeval reads {readable}")
    known = {f.name for f in fields(RequestRecord)} - (_V2_FIELDS if version == 1 else set())
    known -= _V3_FIELDS if version in (1, 2) else set()
    unknown = sorted(set(obj) - known)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    if obj.get("cache_check", CACHE_VERIFIED) not in CACHE_CHECKS:
        raise ValueError(f"cache_check {obj.get('cache_check')!r} (known: {', '.join(CACHE_CHECKS)})")
    kwargs = dict(obj)
    kwargs["usage"] = Usage(**(obj.get("usage") or {}))
    timings = obj.get("timings")
    kwargs["timings"] = None if timings is None else ClientTimings(**timings)
    topk = obj.get("topk")
    kwargs["topk"] = None if topk is None or not with_topk else decode_topk(topk)
    return RequestRecord(**kwargs)
