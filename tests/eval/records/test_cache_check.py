"""`RequestRecord.cache_check`: written only when unverified, read back, and an unknown value refused."""

from __future__ import annotations

import json

import pytest

from eval.records.codec import dumps_record, record_from_dict
from tests.eval.records.test_run_folder import make_record


def test_a_verified_record_is_written_as_before() -> None:
    rec = make_record()
    obj = json.loads(dumps_record(rec))
    assert "cache_check" not in obj and record_from_dict(obj).cache_check == "verified"


def test_an_unverified_record_says_so_on_disk_and_reads_back() -> None:
    rec = make_record(cache_check="unverified")
    obj = json.loads(dumps_record(rec))
    assert obj["cache_check"] == "unverified"
    assert record_from_dict(obj).cache_check == "unverified"


def test_an_unknown_cache_check_is_refused() -> None:
    obj = json.loads(dumps_record(make_record()))
    with pytest.raises(ValueError, match="cache_check 'maybe'"):
        record_from_dict({**obj, "cache_check": "maybe"})
