"""LongBench v2 rows: every field, vocabularies, duplicates, file:line:field errors, SHA-256, the sources."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.benchmarks.longbench_v2.sources import (
    HUB_DATA_SHA256,
    HUB_FILENAME,
    HUB_REPO,
    HUB_REVISION,
    MINI_NAME,
    V2Row,
    load_rows,
    mini_file,
    open_v2,
    parse_rows,
)
from eval.errors import DataError
from eval.prepare.data_source import DataSource

ROOT = Path(__file__).resolve().parents[3]

ROW: dict[str, Any] = {
    "_id": "lbv2mini-t1", "domain": "Single-Document QA", "sub_domain": "Literary", "difficulty": "easy",
    "length": "short", "question": "Who?", "choice_A": "Ann", "choice_B": "Bo", "choice_C": "Cy",
    "choice_D": "Dee", "answer": "B", "context": "Bo lit the lamp.",
}  # fmt: skip


def data(*rows: Any) -> bytes:
    """A pretty-printed array (like the Hub's file): row k starts on line 2 + k * (fields + 2)."""
    return json.dumps(list(rows), indent=2).encode("utf-8")


def test_a_good_row() -> None:
    expected = V2Row(
        "lbv2mini-t1", "Single-Document QA", "Literary", "easy", "short", "Who?", "Ann", "Bo", "Cy", "Dee", "B",
        "Bo lit the lamp.",
    )  # fmt: skip
    rows = parse_rows("d.json", data(ROW, {**ROW, "_id": "t2", "extra": 1}))  # unknown fields are ignored
    assert rows == [expected, replace(expected, id="t2")]
    assert parse_rows("d.json", json.dumps([ROW]).encode()) == [expected]  # one line, no spaces


FIELDS = list(ROW)


def without(name: str) -> dict[str, Any]:
    return {key: value for key, value in ROW.items() if key != name}


def with_value(name: str, value: Any) -> dict[str, Any]:
    """ROW with one field changed and, unless that field is `_id`, another `_id`."""
    return {**ROW, "_id": "t2", name: value} if name != "_id" else {**ROW, "_id": value}


CASES: list[tuple[Any, str | None, str]] = [
    # (second row of the file, field, message)
    *((without(name), name, "missing field") for name in FIELDS),
    *((with_value(name, 7), name, "must be a string, got int") for name in FIELDS),
    (with_value("answer", "E"), "answer", "'E' is not one of A, B, C, D"),
    (with_value("answer", "b"), "answer", "'b' is not one of A, B, C, D"),
    (with_value("difficulty", "medium"), "difficulty", "'medium' is not one of easy, hard"),
    (with_value("length", "Long"), "length", "'Long' is not one of short, medium, long"),
    (with_value("context", None), "context", "must be a string, got NoneType"),
    (with_value("question", True), "question", "must be a string, got bool"),
    (with_value("_id", ""), "_id", "must not be empty"),
    (ROW, "_id", "duplicate _id 'lbv2mini-t1' (first on line 2)"),
    ([ROW], None, "row is not a JSON object, got list"),
]


@pytest.mark.parametrize(("row", "field", "message"), CASES)
def test_bad_rows_name_file_line_and_field(row: Any, field: str | None, message: str) -> None:
    raw = data(ROW, row)
    second = 2 + len(ROW) + 2  # "[", row 0's "{", its fields, "}," then row 1 starts
    assert raw.decode().splitlines()[second - 1].strip() in ("{", "[")
    with pytest.raises(DataError) as info:
        parse_rows("d.json", raw)
    error = info.value
    assert (error.path, error.line, error.field) == ("d.json", second, field)
    assert str(error) == f"d.json:{second}:" + (f"{field}:" if field else "") + f" {message} (row 1)"


FILE_CASES = [
    # (bytes, str(DataError))
    (b'{"_id": "x"}', "d.json: expected a JSON array of rows, got dict"),
    (b"[]", "d.json: no rows"),
    (b"  [ \n ]\n", "d.json: no rows"),
    (b"[{]", "d.json:1: not valid JSON (Expecting property name enclosed in double quotes at column 3)"),
    (b'[\n{"a": 1}\n{"b": 2}]', "d.json:3: not valid JSON (expected ',' or ']' after a row)"),
    (b"[1]\n[2]", "d.json:1: not valid JSON (extra data after the array)"),
    (b'[\n\n"\xff"]', "d.json:3: not UTF-8 (byte 0xff: invalid start byte)"),
    (b"", "d.json:1: not valid JSON (Expecting value at column 1)"),
]


@pytest.mark.parametrize(("raw", "text"), FILE_CASES)
def test_bad_files(raw: bytes, text: str) -> None:
    with pytest.raises(DataError) as info:
        parse_rows("d.json", raw)
    assert str(info.value) == text
    assert info.value.field is None


def test_load_rows_records_the_sha256_of_the_bytes(tmp_path: Path) -> None:
    raw = data(ROW)
    path = tmp_path / "data.json"
    path.write_bytes(raw)
    loaded = load_rows(path)
    assert loaded.sha256 == hashlib.sha256(raw).hexdigest()
    assert loaded.rows[0].id == "lbv2mini-t1"
    assert load_rows(path, expected_sha256=loaded.sha256.upper()).rows == loaded.rows
    with pytest.raises(DataError, match="is not the pinned 00"):
        load_rows(path, expected_sha256="00" * 32)
    with pytest.raises(DataError, match="cannot read LongBench v2 data"):
        load_rows(tmp_path / "nope.json")


def test_hub_pin() -> None:
    assert (HUB_REPO, HUB_FILENAME) == ("THUDM/LongBench-v2", "data.json")
    assert len(HUB_REVISION) == 40 and int(HUB_REVISION, 16) >= 0
    assert HUB_DATA_SHA256 is None  # not pinnable here (no Hub); the README says so


def test_sources_and_their_provenance(tmp_path: Path) -> None:
    path = tmp_path / "folder" / "data.json"
    path.parent.mkdir()
    path.write_bytes(data(ROW))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    for given in (path.parent, path):
        loaded, prov = open_v2(DataSource("data_dir", path=given))
        assert [r.id for r in loaded.rows] == ["lbv2mini-t1"]
        assert prov == {"kind": "data_dir", "path": str(path.resolve()), "sha256": digest}
    calls: list[tuple[str, str]] = []

    def fake_download(repo: str, revision: str) -> Path:
        calls.append((repo, revision))
        return path

    _, prov = open_v2(DataSource("hub", repo="ignored/v1-repo", revision="v1rev"), fake_download)
    assert calls == [(HUB_REPO, HUB_REVISION)]  # --repo/--revision are v1's
    assert prov == {
        "kind": "hub", "repo": HUB_REPO, "revision": HUB_REVISION, "file": "data.json", "sha256": digest,
        "pinned_sha256": None,
    }  # fmt: skip
    loaded, prov = open_v2(DataSource("mini"))
    assert loaded.path == mini_file() and len(loaded.rows) == 6
    assert prov["name"] == MINI_NAME and prov["note"] == "not LongBench data"
    with pytest.raises(DataError, match="no data.json here"):
        open_v2(DataSource("data_dir", path=tmp_path))
    with pytest.raises(DataError, match="data path does not exist"):
        open_v2(DataSource("data_dir", path=tmp_path / "missing"))


def test_offline_hub_is_one_line_suggesting_data_dir_or_mini(tmp_path: Path) -> None:
    """The real huggingface_hub path with HF_HUB_OFFLINE=1 and an empty cache: one DataError line."""
    code = (
        "from eval.benchmarks.longbench_v2.sources import hub_download_v2, HUB_REPO, HUB_REVISION\n"
        "from eval.errors import DataError\n"
        "try:\n    hub_download_v2(HUB_REPO, HUB_REVISION)\n"
        "except DataError as e:\n    print(e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    line = out.stdout.strip()
    assert "\n" not in line, out.stderr
    assert line.startswith(
        f"hf://datasets/{HUB_REPO}@{HUB_REVISION}/data.json: not in the local Hugging Face"
    )
    assert "LongBench v2's data.json" in line and "--data-dir PATH" in line and "--source mini" in line
