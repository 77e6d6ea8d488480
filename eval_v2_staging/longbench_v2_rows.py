"""LongBench v2 data rows (THUDM/LongBench-v2 `data.json`): the row type, validation, the Hub pin.

Standard library only. `data.json` is one JSON array of objects with the string fields `_id, domain,
sub_domain, difficulty ("easy"|"hard"), length ("short"|"medium"|"long"), question, choice_A, choice_B,
choice_C, choice_D, answer ("A".."D"), context` (503 rows upstream). Every listed field is required and
type-checked; other fields are ignored (the official pred.py reads only these). `_id` must be non-empty and
unique. Errors are `RowError`s naming the file, the 0-based row index (the array position) and the field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

HUB_REPO = "THUDM/LongBench-v2"  # also served as zai-org/LongBench-v2
HUB_FILENAME = "data.json"
HUB_REPO_TYPE = "dataset"
# Tip of `main` ("Update README.md", 15 commits) as shown by the Hub's file listing of the dataset, read from
# stored copies of huggingface.co/datasets/THUDM/LongBench-v2/tree/main; not downloaded from here.
HUB_REVISION: str | None = "2b48e494f2c7a2f0af81aae178e05c7e1dde0fe9"
# SHA-256 of data.json at HUB_REVISION: NOT KNOWN YET. It must be pinned from the first download (the Hub
# lists data.json as an LFS file of 465 MB; its LFS oid is that SHA-256).
HUB_DATA_SHA256: str | None = None
UPSTREAM_ROWS = 503

DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
LETTERS = ("A", "B", "C", "D")
FIELDS = (
    "_id", "domain", "sub_domain", "difficulty", "length", "question",
    "choice_A", "choice_B", "choice_C", "choice_D", "answer", "context",
)  # fmt: skip
VOCABULARIES = {"difficulty": DIFFICULTIES, "length": LENGTHS, "answer": LETTERS}


class RowError(ValueError):
    """A bad data file or row: `file:row N: field 'x': message` (row / field left out when not known)."""

    def __init__(self, file: object, row: int | None, field: str | None, message: str) -> None:
        self.file, self.row, self.field, self.message = file, row, field, message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = str(self.file)
        if self.row is not None:
            where += f":row {self.row}"
        if self.field is not None:
            where += f": field {self.field!r}"
        return f"{where}: {self.message}"


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


def _field(file: object, index: int, obj: dict[str, object], name: str) -> str:
    if name not in obj:
        raise RowError(file, index, name, "missing")
    value = obj[name]
    if not isinstance(value, str):
        raise RowError(file, index, name, f"must be a string, got {type(value).__name__}")
    allowed = VOCABULARIES.get(name)
    if allowed is not None and value not in allowed:
        raise RowError(file, index, name, f"{value!r} is not one of {', '.join(allowed)}")
    if name == "_id" and not value:
        raise RowError(file, index, name, "empty")
    return value


def validate_row(file: object, index: int, obj: object) -> V2Row:
    """One array element as a `V2Row`, every field checked."""
    if not isinstance(obj, dict):
        raise RowError(file, index, None, f"expected a JSON object, got {type(obj).__name__}")
    return V2Row(*(_field(file, index, obj, name) for name in FIELDS))


def parse_rows(file: object, data: bytes) -> list[V2Row]:
    """Validated rows of data.json bytes (UTF-8, one JSON array); `_id`s unique."""
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RowError(file, None, None, f"not UTF-8 at byte {exc.start} ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise RowError(
            file, None, None, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(value, list):
        raise RowError(file, None, None, f"expected a JSON array of rows, got {type(value).__name__}")
    rows: list[V2Row] = []
    first: dict[str, int] = {}
    for index, obj in enumerate(value):
        row = validate_row(file, index, obj)
        if row.id in first:
            raise RowError(file, index, "_id", f"{row.id!r} already used by row {first[row.id]}")
        first[row.id] = index
        rows.append(row)
    if not rows:
        raise RowError(file, None, None, "no rows")
    return rows


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_rows(path: Path, *, expected_sha256: str | None = None) -> LoadedRows:
    """Read data.json, record its SHA-256 (checked against `expected_sha256` if given), validate the rows."""
    data = Path(path).read_bytes()
    digest = sha256_hex(data)
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise RowError(path, None, None, f"sha256 {digest} is not the pinned {expected_sha256}")
    return LoadedRows(Path(path), digest, parse_rows(path, data))
