"""LongBench v2 row validation: every field, vocabularies, duplicates, error text, SHA-256, the Hub pin."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval_v2_staging.longbench_v2_rows import (
    HUB_FILENAME,
    HUB_REPO,
    HUB_REVISION,
    RowError,
    V2Row,
    load_rows,
    parse_rows,
)

ROW: dict[str, Any] = {
    "_id": "lbv2mini-t1", "domain": "Single-Document QA", "sub_domain": "Literary", "difficulty": "easy",
    "length": "short", "question": "Who?", "choice_A": "Ann", "choice_B": "Bo", "choice_C": "Cy",
    "choice_D": "Dee", "answer": "B", "context": "Bo lit the lamp.",
}  # fmt: skip


def data(*rows: Any) -> bytes:
    return json.dumps(list(rows)).encode("utf-8")


def test_a_good_row() -> None:
    expected = V2Row(
        "lbv2mini-t1", "Single-Document QA", "Literary", "easy", "short", "Who?", "Ann", "Bo", "Cy", "Dee", "B",
        "Bo lit the lamp.",
    )  # fmt: skip
    rows = parse_rows("d.json", data(ROW, {**ROW, "_id": "t2", "extra": 1}))  # unknown fields are ignored
    assert rows == [expected, replace(expected, id="t2")]


FIELDS = list(ROW)


def without(name: str) -> dict[str, Any]:
    return {key: value for key, value in ROW.items() if key != name}


def with_value(name: str, value: Any) -> dict[str, Any]:
    """ROW with one field changed and, unless that field is `_id`, another `_id`."""
    return {**ROW, "_id": "t2", name: value} if name != "_id" else {**ROW, "_id": value}


CASES: list[tuple[Any, str | None, str]] = [
    # (second row of the file, field, message)
    *((without(name), name, "missing") for name in FIELDS),
    *((with_value(name, 7), name, "must be a string, got int") for name in FIELDS),
    (with_value("answer", "E"), "answer", "'E' is not one of A, B, C, D"),
    (with_value("answer", "b"), "answer", "'b' is not one of A, B, C, D"),
    (with_value("difficulty", "medium"), "difficulty", "'medium' is not one of easy, hard"),
    (with_value("length", "Long"), "length", "'Long' is not one of short, medium, long"),
    (with_value("context", None), "context", "must be a string, got NoneType"),
    (with_value("question", True), "question", "must be a string, got bool"),
    (with_value("_id", ""), "_id", "empty"),
    (ROW, "_id", "'lbv2mini-t1' already used by row 0"),
    ([ROW], None, "expected a JSON object, got list"),
]


@pytest.mark.parametrize(("row", "field", "message"), CASES)
def test_bad_rows_name_file_row_and_field(row: Any, field: str | None, message: str) -> None:
    with pytest.raises(RowError) as info:
        parse_rows("d.json", data(ROW, row))
    error = info.value
    assert (error.file, error.row, error.field, error.message) == ("d.json", 1, field, message)
    assert str(error) == "d.json:row 1: " + (f"field '{field}': " if field else "") + message


FILE_CASES = [
    # (bytes, str(RowError))
    (b'{"_id": "x"}', "d.json: expected a JSON array of rows, got dict"),
    (b"[]", "d.json: no rows"),
    (b"[{]", "d.json: not valid JSON: Expecting property name enclosed in double quotes (line 1, column 3)"),
    (b'["\xff"]', "d.json: not UTF-8 at byte 2 (invalid start byte)"),
]


@pytest.mark.parametrize(("raw", "text"), FILE_CASES)
def test_bad_files(raw: bytes, text: str) -> None:
    with pytest.raises(RowError) as info:
        parse_rows("d.json", raw)
    assert str(info.value) == text
    assert (info.value.row, info.value.field) == (None, None)


def test_load_rows_records_the_sha256_of_the_bytes(tmp_path: Path) -> None:
    raw = data(ROW)
    path = tmp_path / "data.json"
    path.write_bytes(raw)
    loaded = load_rows(path)
    assert loaded.sha256 == hashlib.sha256(raw).hexdigest()
    assert loaded.rows[0].id == "lbv2mini-t1"
    assert load_rows(path, expected_sha256=loaded.sha256.upper()).rows == loaded.rows
    with pytest.raises(RowError, match="is not the pinned 00"):
        load_rows(path, expected_sha256="00" * 32)


def test_hub_pin() -> None:
    assert (HUB_REPO, HUB_FILENAME) == ("THUDM/LongBench-v2", "data.json")
    assert HUB_REVISION is None or (len(HUB_REVISION) == 40 and int(HUB_REVISION, 16) >= 0)
