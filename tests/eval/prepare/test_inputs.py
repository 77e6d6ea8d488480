"""The inputs manifest: round trip, errors naming file:line:field, and the digest of what is asked."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from eval.errors import DataError
from eval.prepare.inputs import InputRow, InputsHeader, inputs_digest, read_inputs, sha256_text, write_inputs

ROW = InputRow(
    dataset="qasper",
    id="a",
    prompt="P",
    mode="chat",
    max_tokens=8,
    prompt_sha256=sha256_text("P"),
    prompt_tokens=3,
    truncated=False,
    answers=["x"],
    all_classes=None,
    length=1,
)
HEADER = InputsHeader(
    source={"kind": "mini"},
    seed=1,
    n=1,
    datasets=["qasper"],
    selected_ids={"qasper": ["a"]},
    templates={},
    tokenizer={"kind": "server", "base_url": "http://127.0.0.1:8000/v1"},
    max_input_tokens=None,
    max_tokens={"qasper": 8},
    lbeval_version="0",
    git_commit=None,
    git_dirty=None,
)


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    write_inputs(path, HEADER, [ROW, replace(ROW, id="b")])
    header, rows = read_inputs(path)
    assert header == HEADER and rows == [ROW, replace(ROW, id="b")]


def test_digest_covers_rows_not_header(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    write_inputs(a, HEADER, [ROW])
    write_inputs(
        b, replace(HEADER, tokenizer={"kind": "server", "base_url": "http://127.0.0.1:9999/v1"}), [ROW]
    )
    write_inputs(c, HEADER, [replace(ROW, max_tokens=9)])
    lines = a.read_bytes().splitlines(keepends=True)
    assert inputs_digest(a) == hashlib.sha256(b"".join(lines[1:])).hexdigest()
    assert a.read_bytes() != b.read_bytes() and inputs_digest(a) == inputs_digest(b)
    assert inputs_digest(a) != inputs_digest(c)


@pytest.mark.parametrize(
    ("line2", "field", "message"),
    [
        ("{not json", None, "not valid JSON"),
        (json.dumps({"record": "header"}), "record", "expected 'input'"),
        (json.dumps({"record": "input", "dataset": "qasper"}), "id", "missing field"),
        (json.dumps({"record": "input", **{**ROW.__dict__, "extra": 1}}), "extra", "unknown field"),
    ],
)
def test_bad_lines_name_file_line_field(tmp_path: Path, line2: str, field: str | None, message: str) -> None:
    path = tmp_path / "in.jsonl"
    write_inputs(path, HEADER, [])
    path.write_text(path.read_text() + line2 + "\n")
    with pytest.raises(DataError) as info:
        read_inputs(path)
    where = f"{path}:2" + (f":{field}" if field else "")
    assert str(info.value).startswith(where + ": ") and message in str(info.value)
