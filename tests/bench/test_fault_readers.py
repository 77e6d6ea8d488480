"""bench.faults reads what lbeval wrote through lbeval's typed readers: summary.json's verdict (the failing rules
and rows that judge a fault) and ab_stop.json (the inputs a stopped session ran). A damaged file is one line
naming file and field, never a count or a rule read from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.faults import caught_by, count_inputs
from eval.errors import DataError
from eval.records.stop import SETTLED_FAIL, RuleSettlement, StopRecord, write_stop
from eval.report.summary_verdict import read_summary_verdict

SUMMARY = {
    "schema_version": 1,
    "verdict": {
        "outcome": "FAIL",
        "summary": "gate: FAIL (exit 1): 2 of 3 rules failed: cause_rows [hitlen, batch], warm_prefill_change",
        "exit_code": 1,
        "results": [
            {"rule": "accuracy_drop", "status": "pass", "measured": "0", "threshold": "2", "detail": "",
             "rows": [{"table": "accuracy", "row": "qasper", "failed": True}]},
            {"rule": "cause_rows", "status": "fail", "measured": "3", "threshold": "0", "detail": "",
             "rows": [{"table": "cause", "row": "hitlen", "failed": True},
                      {"table": "cause", "row": "repeat", "failed": False},
                      {"table": "cause", "row": "batch", "failed": True}]},
            {"rule": "warm_prefill_change", "status": "fail", "measured": "+9 %", "threshold": "5 %"},
            {"rule": "first_token", "status": "no data", "measured": "n/a", "threshold": "0"},
        ],
        "reasons": [],
        "policy": "default",
        "stopped": "",
    },
}  # fmt: skip


def test_the_failing_rules_and_rows_of_a_summary(tmp_path: Path) -> None:
    """Failing rules only (a passing rule's failed row is not one), with their failed rows, in the verdict's
    order; a failing rule with no rows is named alone."""
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(SUMMARY), encoding="utf-8")
    assert caught_by(read_summary_verdict(path)) == [
        "cause_rows @ cause/hitlen",
        "cause_rows @ cause/batch",
        "warm_prefill_change",
    ]
    assert caught_by(None) == []


def test_a_damaged_summary_is_refused_with_its_field(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    bad = json.loads(json.dumps(SUMMARY))
    bad["verdict"]["results"][1]["rows"][0]["failed"] = "true"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(DataError, match=r"verdict\.results\.1\.rows\.0\.failed: must be true or false"):
        caught_by(read_summary_verdict(path))


STOP = StopRecord(
    schema_version=1,
    ab_id="s1",
    runs=("base/r1", "fault/r1"),
    seed=7,
    policy="default",
    decision=SETTLED_FAIL,
    reason="warm_prefill_change settled FAIL",
    inputs_run=5,
    inputs_planned=12,
    inputs=tuple(("qasper", str(i)) for i in range(5)),
    expected_records=(20, 20),
    rules=(RuleSettlement("warm_prefill_change", SETTLED_FAIL, "cs", "+9 %", 4.0, 14.0),),
    server_seconds=12.5,
    server_seconds_full=30.0,
    stopped_at="2026-12-07T13:00:00Z",
)


def test_a_stopped_session_counts_the_inputs_its_stop_record_ran(tmp_path: Path) -> None:
    write_stop(tmp_path, STOP)
    assert count_inputs(tmp_path) == 5
    assert count_inputs(tmp_path / "no-such-run") is None


def test_a_damaged_stop_record_is_refused_not_counted(tmp_path: Path) -> None:
    write_stop(tmp_path, STOP)
    stop = tmp_path / "ab_stop.json"
    stop.write_text(stop.read_text(encoding="utf-8").replace('"inputs_run": 5', '"inputs_run": 11'), "utf-8")
    with pytest.raises(DataError, match=r"ab_stop\.json:sha256: the stop record is damaged"):
        count_inputs(tmp_path)
