"""LongBench v2 rows (THUDM/LongBench-v2 `data.json`): the row type, validation, the Hub pin, the sources.

`data.json` is one JSON array of objects with the string fields `_id, domain, sub_domain, difficulty
("easy"|"hard"), length ("short"|"medium"|"long"), question, choice_A, choice_B, choice_C, choice_D, answer
("A".."D"), context` (503 rows upstream). Every listed field is required and type-checked; other fields are
ignored (the official pred.py reads only these). `_id` must be non-empty and unique. A bad file or row is one
DataError naming the file, the line where the row starts (the array is read element by element, so the line is
the file's own) and the field; the message ends with the row's 0-based position in the array.

Sources (`DataSource.kind`, eval/prepare/data_source.py): "hub" downloads `data.json` from HUB_REPO at HUB_REVISION through
huggingface_hub (or finds it in the Hub cache; offline: one line suggesting --data-dir or --source mini),
"data_dir" reads a folder holding `data.json` or the file itself, "mini" the shipped sample
`samples/longbench_v2_mini/` (NOT LongBench data). The SHA-256 of the bytes read is recorded in the inputs
header; HUB_DATA_SHA256 pins it once known (it is not: this machine cannot reach the Hub).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from eval.errors import DataError
from eval.prepare.data_source import DataSource, hub_file
from eval.prepare.inputs import unicode_problem
from scorers.longbench_v2.score import DIFFICULTIES, LENGTHS, LETTERS

HUB_REPO = "THUDM/LongBench-v2"  # also served as zai-org/LongBench-v2
HUB_FILENAME = "data.json"
HUB_REPO_TYPE = "dataset"
# Tip of `main` ("Update README.md", 15 commits) as shown by the Hub's file listing of the dataset, read from
# stored copies of huggingface.co/datasets/THUDM/LongBench-v2/tree/main; not downloaded from here.
HUB_REVISION = "2b48e494f2c7a2f0af81aae178e05c7e1dde0fe9"
# SHA-256 of data.json at HUB_REVISION: NOT KNOWN YET (no Hub access from this machine). It must be pinned
# from the first download (the Hub lists data.json as an LFS file of 465 MB; its LFS oid is that SHA-256);
# until then the SHA-256 of the file read is recorded in the inputs header, not checked.
HUB_DATA_SHA256: str | None = None
UPSTREAM_ROWS = 503
MINI_NAME = "longbench-v2-mini"

FIELDS = (
    "_id", "domain", "sub_domain", "difficulty", "length", "question",
    "choice_A", "choice_B", "choice_C", "choice_D", "answer", "context",
)  # fmt: skip
VOCABULARIES = {"difficulty": DIFFICULTIES, "length": LENGTHS, "answer": LETTERS}


@dataclass(frozen=True)
class V2Row:
    """One LongBench v2 row (`_id` is `id`, `choice_A` is `choice_a`, ...)."""

    id: str
    domain: str
    sub_domain: str
    difficulty: str
    length: str
    question: str
    choice_a: str
    choice_b: str
    choice_c: str
    choice_d: str
    answer: str
    context: str


@dataclass(frozen=True)
class LoadedRows:
    """Validated rows of one data.json and the SHA-256 of its bytes."""

    path: Path
    sha256: str
    rows: list[V2Row]


V2Downloader = Callable[[str, str], Path]


def _field(file: object, line: int, index: int, obj: dict[str, Any], name: str) -> str:
    suffix = f" (row {index})"
    if name not in obj:
        raise DataError(file, line, name, "missing field" + suffix)
    value = obj[name]
    if not isinstance(value, str):
        raise DataError(file, line, name, f"must be a string, got {type(value).__name__}{suffix}")
    allowed = VOCABULARIES.get(name)
    if allowed is not None and value not in allowed:
        raise DataError(file, line, name, f"{value!r} is not one of {', '.join(allowed)}{suffix}")
    problem = unicode_problem(value)  # hashed and sent: no lone surrogate escapes
    if problem is not None:
        raise DataError(file, line, name, problem + suffix)
    if name == "_id" and not value:
        raise DataError(file, line, name, "must not be empty" + suffix)
    return value


def validate_row(file: object, line: int, index: int, obj: object) -> V2Row:
    """One array element as a `V2Row`, every field checked."""
    if not isinstance(obj, dict):
        raise DataError(file, line, None, f"row is not a JSON object, got {type(obj).__name__} (row {index})")
    return V2Row(*(_field(file, line, index, obj, name) for name in FIELDS))


_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, pos: int) -> int:
    """The position after the JSON whitespace at `pos`."""
    match = _SPACE.match(text, pos)
    return match.end() if match is not None else pos


def _json_error(file: object, exc: json.JSONDecodeError) -> DataError:
    return DataError(file, exc.lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})")


def _elements(file: object, text: str) -> Iterator[tuple[int, int, object]]:
    """(0-based index, line where it starts, value) of each element of the JSON array `text`."""
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if not text.startswith("[", pos):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _json_error(file, exc) from None
        except RecursionError:
            raise DataError(file, None, None, "not valid JSON (nested too deeply)") from None
        raise DataError(file, None, None, f"expected a JSON array of rows, got {type(value).__name__}")
    pos = _skip(text, pos + 1)
    line, counted = 1, 0
    if text.startswith("]", pos):
        pos += 1
    else:
        index = 0
        while True:
            line += text.count("\n", counted, pos)
            counted = pos
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise _json_error(file, exc) from None
            except RecursionError:
                raise DataError(file, line, None, "not valid JSON (nested too deeply)") from None
            yield index, line, value
            pos = _skip(text, end)
            if text.startswith(",", pos):
                pos, index = _skip(text, pos + 1), index + 1
                continue
            if text.startswith("]", pos):
                pos += 1
                break
            at = text.count("\n", 0, pos) + 1
            raise DataError(file, at, None, "not valid JSON (expected ',' or ']' after a row)")
    if _skip(text, pos) != len(text):
        raise DataError(
            file, text.count("\n", 0, pos) + 1, None, "not valid JSON (extra data after the array)"
        )


def parse_rows(file: object, data: bytes) -> list[V2Row]:
    """Validated rows of data.json bytes (UTF-8, one JSON array); `_id`s unique."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(file, line, None, f"not UTF-8 (byte 0x{data[exc.start]:02x}: {exc.reason})") from None
    rows: list[V2Row] = []
    first: dict[str, int] = {}
    for index, line, obj in list(_elements(file, text)):  # the whole file parses before rows are checked
        row = validate_row(file, line, index, obj)
        if row.id in first:
            raise DataError(
                file, line, "_id", f"duplicate _id {row.id!r} (first on line {first[row.id]}) (row {index})"
            )
        first[row.id] = line
        rows.append(row)
    if not rows:
        raise DataError(file, None, None, "no rows")
    return rows


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_rows(path: Path, *, expected_sha256: str | None = None) -> LoadedRows:
    """Read data.json, record its SHA-256 (checked against `expected_sha256` if given), validate the rows."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read LongBench v2 data ({exc.strerror})") from None
    digest = sha256_hex(data)
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise DataError(path, None, None, f"sha256 {digest} is not the pinned {expected_sha256}")
    return LoadedRows(Path(path), digest, parse_rows(path, data))


# ---------------------------------------------------------------- sources


def mini_file() -> Path:
    """The shipped longbench_v2_mini sample's data.json (NOT LongBench data; see its README)."""
    return Path(str(resources.files("eval.prepare").joinpath("samples", "longbench_v2_mini", HUB_FILENAME)))


def hub_download_v2(repo: str, revision: str) -> Path:
    """data.json of the v2 dataset at a pinned revision (offline: one line suggesting --data-dir / mini)."""
    return hub_file(repo, revision, HUB_FILENAME, "LongBench v2's data.json")


def data_dir_file(path: Path) -> Path:
    """`--data-dir` for v2: the file itself, or a folder holding data.json."""
    if path.is_file():
        return path
    if not path.exists():
        raise DataError(path, None, None, "data path does not exist")
    if (path / HUB_FILENAME).is_file():
        return path / HUB_FILENAME
    raise DataError(
        path,
        None,
        None,
        f"no {HUB_FILENAME} here (LongBench v2: pass the folder holding data.json, or the file)",
    )


def open_v2(
    source: DataSource, download: V2Downloader = hub_download_v2
) -> tuple[LoadedRows, dict[str, Any]]:
    """The validated rows of a source and their provenance for the inputs header.

    The hub source always uses HUB_REPO at HUB_REVISION (`--repo` / `--revision` are LongBench v1's)."""
    if source.kind == "hub":
        path = download(HUB_REPO, HUB_REVISION)
        loaded = load_rows(path, expected_sha256=HUB_DATA_SHA256)
        prov: dict[str, Any] = {
            "kind": "hub", "repo": HUB_REPO, "revision": HUB_REVISION, "file": HUB_FILENAME,
            "sha256": loaded.sha256, "pinned_sha256": HUB_DATA_SHA256,
        }  # fmt: skip
        return loaded, prov
    if source.kind == "mini":
        loaded = load_rows(mini_file())
        return loaded, {
            "kind": "mini",
            "name": MINI_NAME,
            "note": "not LongBench data",
            "sha256": loaded.sha256,
        }
    if source.kind == "data_dir" and source.path is not None:
        loaded = load_rows(data_dir_file(source.path))
        return loaded, {"kind": "data_dir", "path": str(loaded.path.resolve()), "sha256": loaded.sha256}
    raise DataError(str(source.kind), None, None, "unknown data source (hub, data_dir or mini)")
