"""The inputs manifest: round trip, errors naming file:line:field, and the digest of what is asked."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.errors import DataError
from eval.prepare.inputs import (
    InputRow,
    InputsSource,
    InputsTokenizer,
    inputs_digest,
    read_inputs,
    row_dict,
    sha256_text,
    write_inputs,
)
from tests.eval.headers import inputs_header

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
HEADER = inputs_header(
    source=InputsSource(kind="mini"),
    n=1,
    selected_ids={"qasper": ["a"]},
    tokenizer=InputsTokenizer(kind="server", base_url="http://127.0.0.1:8000/v1"),
    max_tokens={"qasper": 8},
    lbeval_version="0",
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
        b,
        replace(HEADER, tokenizer=InputsTokenizer(kind="server", base_url="http://127.0.0.1:9999/v1")),
        [ROW],
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
        (json.dumps({"record": "input", **{**row_dict(ROW), "extra": 1}}), "extra", "unknown field"),
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


# ---------------------------------------------------------------- hand-edited (damaged) manifests

Damage = Callable[[list[bytes]], bytes]
GOOD_ROWS = [ROW, replace(ROW, id="b", prompt="Q", prompt_sha256=sha256_text("Q"))]


def _good_lines(tmp_path: Path) -> list[bytes]:
    good = tmp_path / "good.jsonl"
    gov = replace(ROW, dataset="gov_report_e", id="g", prompt="G", prompt_sha256=sha256_text("G"))
    write_inputs(good, HEADER, [*GOOD_ROWS, gov])
    return good.read_bytes().splitlines(keepends=True)


def edit(line: int, drop: str | None = None, **changes: Any) -> Damage:
    """Set (or drop) fields of one line's JSON object."""

    def damage(lines: list[bytes]) -> bytes:
        obj = json.loads(lines[line - 1])
        obj.pop(drop, None)
        lines[line - 1] = (json.dumps({**obj, **changes}) + "\n").encode()
        return b"".join(lines)

    return damage


def raw(line: int, old: bytes, new: bytes) -> Damage:
    """Replace bytes on one line (`old` empty: replace the whole line)."""

    def damage(lines: list[bytes]) -> bytes:
        lines[line - 1] = lines[line - 1].replace(old, new, 1) if old else new
        return b"".join(lines)

    return damage


def _stale(prompt: str) -> Damage:  # the prompt edited, its hash left as prepare wrote it
    return edit(2, prompt=prompt)


DAMAGED: list[tuple[str, Damage, int | None, str | None]] = [
    # (how the file is damaged, the damage, the error's line and field)
    ("row not JSON", raw(2, b"", b"{not json\n"), 2, None),
    ("header not JSON", raw(1, b"", b'{"record": "inputs_header",\n'), 1, None),
    ("no header line", lambda lines: b"".join(lines[1:]), 1, "record"),
    ("row record kind", edit(2, record="header"), 2, "record"),
    ("a second header", edit(3, record="inputs_header"), 3, "record"),
    ("row missing id", edit(2, drop="id"), 2, "id"),
    ("unknown row field", edit(2, extra=1), 2, "extra"),
    ("mode weird", edit(2, mode="weird"), 2, "mode"),
    ("non-UTF-8 byte", raw(3, b'"Q"', b'"Q\xff"'), 3, "prompt"),
    ("latin-1 text", raw(3, b'"Q"', '"caf\u00e9"'.encode("latin-1")), 3, "prompt"),
    ("lone surrogate", raw(2, b'"P"', b'"\\ud800"'), 2, "prompt"),
    ("prompt a number", edit(2, prompt=12345), 2, "prompt"),
    ("prompt changed, stale hash", _stale("P, edited"), 2, "prompt_sha256"),
    ("prompt emptied, stale hash", _stale(""), 2, "prompt_sha256"),
    ("max_tokens a string", edit(2, max_tokens="abc"), 2, "max_tokens"),
    ("max_tokens negative", edit(2, max_tokens=-5), 2, "max_tokens"),
    ("max_tokens zero", edit(3, max_tokens=0), 3, "max_tokens"),
    ("max_tokens a bool", edit(2, max_tokens=True), 2, "max_tokens"),
    ("max_tokens a float", edit(2, max_tokens=8.5), 2, "max_tokens"),
    ("unknown dataset", edit(2, dataset="not_a_dataset"), 2, "dataset"),
    ("answers a string", edit(2, answers="x"), 2, "answers"),
    ("answers not strings", edit(3, answers=["x", 1]), 3, "answers"),
    ("all_classes a string", edit(2, all_classes="abc"), 2, "all_classes"),
    ("id null", edit(2, id=None), 2, "id"),
    ("id empty", edit(2, id=""), 2, "id"),
    ("duplicate dataset/id", edit(3, id="a"), 3, "id"),
    ("prompt_tokens a string", edit(2, prompt_tokens="many"), 2, "prompt_tokens"),
    ("prompt_tokens negative", edit(2, prompt_tokens=-1), 2, "prompt_tokens"),
    ("truncated a string", edit(2, truncated="no"), 2, "truncated"),
    ("length a bool", edit(2, length=False), 2, "length"),
    ("stop_token_ids negative", edit(2, stop_token_ids=[-1]), 2, "stop_token_ids"),
    ("stop_token_ids a string", edit(2, stop_token_ids=["\n"]), 2, "stop_token_ids"),
    ("field given twice", raw(2, b'"mode":"chat"', b'"mode":"chat","mode":"raw"'), 2, "mode"),
    ("row a JSON array", raw(2, b"", b"[1, 2]\n"), 2, None),
    ("blank line", raw(3, b"", b"\n"), 3, None),
    ("header schema_version 99", edit(1, schema_version=99), 1, "schema_version"),
    ("header schema_version a string", edit(1, schema_version="1"), 1, "schema_version"),
    ("header n zero", edit(1, n=0), 1, "n"),
    ("header seed a string", edit(1, seed="x"), 1, "seed"),
    ("header unknown dataset", edit(1, datasets=["qasper", "nope"]), 1, "datasets"),
    ("header max_tokens a string", edit(1, max_tokens={"qasper": "8"}), 1, "max_tokens"),
    ("header git_dirty a string", edit(1, git_dirty="yes"), 1, "git_dirty"),
    ("header n_taken negative", edit(1, n_taken={"qasper": -1}), 1, "n_taken"),
    ("header missing datasets", edit(1, drop="datasets"), 1, "datasets"),
    ("header source a list", edit(1, source=["mini"]), 1, "source"),
    ("empty file", lambda lines: b"", None, None),
]


def _where(path: Path, line: int | None, field: str | None) -> str:
    return str(path) + "".join(f":{part}" for part in (line, field) if part is not None) + ": "


def test_good_file_reads(tmp_path: Path) -> None:
    header, rows = read_inputs(_write(tmp_path, lambda lines: b"".join(lines)))
    assert header == HEADER and [r.key for r in rows] == [
        ("qasper", "a"),
        ("qasper", "b"),
        ("gov_report_e", "g"),
    ]


def _write(tmp_path: Path, damage: Damage) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(damage(_good_lines(tmp_path)))
    return path


@pytest.mark.parametrize(("damage", "line", "field"), [c[1:] for c in DAMAGED], ids=[c[0] for c in DAMAGED])
def test_damaged_manifest_is_one_data_error(
    tmp_path: Path, damage: Damage, line: int | None, field: str | None
) -> None:
    path = _write(tmp_path, damage)
    with pytest.raises(DataError) as info:  # any other exception fails the test
        read_inputs(path)
    message = str(info.value)
    assert (info.value.line, info.value.field) == (line, field)
    assert message.startswith(_where(path, line, field)) and "\n" not in message


def test_error_messages_say_what_is_wrong(tmp_path: Path) -> None:
    cases = {
        edit(2, mode="weird"): 'must be one of "chat", "raw", got "weird"',
        edit(2, max_tokens="abc"): 'must be an integer, got "abc"',
        edit(2, max_tokens=True): "must be an integer, got true",
        edit(2, max_tokens=-5): "must be at least 1, got -5",
        edit(2, answers="x"): 'must be a list of strings, got "x"',
        edit(1, max_tokens={"qasper": "8"}): 'must be an object of integers, got {"qasper": "8"}',
        edit(2, stop_token_ids=["1"]): 'must be a list of integers or null, got ["1"]',
        edit(2, prompt_tokens="many"): 'must be an integer or null, got "many"',
        edit(1, schema_version=99): "this lbeval reads inputs schema versions 1, 2, 3, got 99",
        edit(2, dataset="nope"): "unknown dataset 'nope'",
        _stale("P, edited"): "does not match the prompt (its sha256 is",
        edit(3, id="a"): "qasper/a appears twice (lines 2 and 3)",
        raw(3, b'"Q"', b'"Q\xe9"'): "not UTF-8 (byte 0xe9 at column",
    }
    for damage, expected in cases.items():
        with pytest.raises(DataError, match=re.escape(expected)):
            read_inputs(_write(tmp_path, damage))


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read the inputs manifest"):
        read_inputs(tmp_path / "nope.jsonl")


def test_schema_1_header_still_reads(tmp_path: Path) -> None:
    def to_v1(lines: list[bytes]) -> bytes:
        return edit(1, drop="n_taken", schema_version=1)([*lines[:1], *lines[1:]]).replace(
            b'"n_available": {}, ', b""
        )

    header, rows = read_inputs(_write(tmp_path, to_v1))
    assert header.schema_version == 1 and header.n_taken == {} and len(rows) == 3


def _cli_run(tmp_path: Path, inputs: Path, port: int) -> list[str]:
    out = tmp_path / "runs"
    return ["run", "--variant", "v", "--inputs", str(inputs), "--base-url", f"http://127.0.0.1:{port}/v1",
            "--out", str(out), "--quiet", "--timeout", "2", "--retries", "0"]  # fmt: skip


@pytest.mark.parametrize(("damage", "line", "field"), [c[1:] for c in DAMAGED], ids=[c[0] for c in DAMAGED])
def test_lbeval_run_refuses_a_damaged_manifest_before_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Damage, line: int | None, field: str | None
) -> None:
    path = _write(tmp_path, damage)
    with socket.create_server(("127.0.0.1", 0)) as server:  # a "server" that must not be contacted
        server.settimeout(0.05)
        code = main(_cli_run(tmp_path, path, server.getsockname()[1]))
        with pytest.raises(TimeoutError):
            server.accept()
    captured = capsys.readouterr()
    assert code == DataError.exit_code and captured.out == ""
    assert captured.err.splitlines() == [captured.err.strip()]
    assert captured.err.startswith("lbeval run: error: " + _where(path, line, field))
    assert not (tmp_path / "runs").exists()


def test_lbeval_run_process_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, raw(3, b'"Q"', b'"Q\xff"'))
    proc = subprocess.run(
        [sys.executable, "-m", "eval.cli", *_cli_run(tmp_path, path, 9)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == DataError.exit_code and proc.stdout == ""
    column = path.read_bytes().splitlines()[2].index(b"\xff") + 1
    assert proc.stderr == f"lbeval run: error: {path}:3:prompt: not UTF-8 (byte 0xff at column {column})\n"
