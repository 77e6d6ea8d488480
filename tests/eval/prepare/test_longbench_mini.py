"""Checks the shipped longbench-mini sample against the LongBench v1 row format (plain json, no eval/ code)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

DATA_DIR = Path(__file__).resolve().parents[3] / "eval" / "prepare" / "samples" / "longbench_mini" / "data"
EXPECTED_ROWS = {"qasper": 6, "gov_report": 6}
KEYS = {"input", "context", "answers", "length", "dataset", "language", "all_classes", "_id"}
HEX48 = re.compile(r"[0-9a-f]{48}")


def _rows(dataset: str) -> list[dict[str, Any]]:
    raw = (DATA_DIR / f"{dataset}.jsonl").read_bytes()
    assert raw.endswith(b"\n"), f"{dataset}.jsonl must end with a newline"
    lines = raw.decode("utf-8").split("\n")[:-1]
    rows = []
    for lineno, line in enumerate(lines, start=1):
        assert line.strip(), f"{dataset}.jsonl:{lineno}: blank line"
        row = json.loads(line)
        assert isinstance(row, dict), f"{dataset}.jsonl:{lineno}: not an object"
        rows.append(row)
    return rows


def test_only_expected_files() -> None:
    assert sorted(p.name for p in DATA_DIR.glob("*.jsonl")) == ["gov_report.jsonl", "qasper.jsonl"]


@pytest.mark.parametrize("dataset", sorted(EXPECTED_ROWS))
def test_row_count(dataset: str) -> None:
    assert len(_rows(dataset)) == EXPECTED_ROWS[dataset]


@pytest.mark.parametrize("dataset", sorted(EXPECTED_ROWS))
def test_row_format(dataset: str) -> None:
    for n, row in enumerate(_rows(dataset)):
        where = f"{dataset}.jsonl row {n}"
        assert set(row) == KEYS, where
        assert isinstance(row["input"], str), where
        assert isinstance(row["context"], str), where
        assert type(row["length"]) is int, where
        assert row["dataset"] == dataset, where
        assert row["language"] == "en", where
        assert row["all_classes"] is None, where
        answers = row["answers"]
        assert isinstance(answers, list) and answers, where
        assert all(isinstance(a, str) and a.strip() for a in answers), where


@pytest.mark.parametrize("dataset", sorted(EXPECTED_ROWS))
def test_length_is_word_count_within_bounds(dataset: str) -> None:
    for n, row in enumerate(_rows(dataset)):
        words = len(row["context"].split())
        assert row["length"] == words, f"{dataset} row {n}"
        assert 300 <= words <= 1000, f"{dataset} row {n}: {words} words"


def test_inputs_by_dataset() -> None:
    assert all(row["input"] == "" for row in _rows("gov_report"))
    assert all(row["input"].strip() for row in _rows("qasper"))


def test_ids_unique_hex_and_derived_as_documented() -> None:
    seen: set[str] = set()
    for dataset in sorted(EXPECTED_ROWS):
        for n, row in enumerate(_rows(dataset)):
            rid = row["_id"]
            assert isinstance(rid, str) and HEX48.fullmatch(rid), f"{dataset} row {n}: {rid!r}"
            assert rid == hashlib.sha256(f"lbeval-mini/{dataset}/{n}".encode()).hexdigest()[:48]
            assert rid not in seen, f"duplicate _id {rid}"
            seen.add(rid)
    assert len(seen) == sum(EXPECTED_ROWS.values())
