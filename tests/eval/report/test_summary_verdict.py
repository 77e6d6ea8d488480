"""summary.json's verdict read back typed (eval/report/summary_verdict.py): a file as `lbeval compare` writes it,
one from before some fields were written, a null verdict, and each damaged field as one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.errors import EXIT_DATA, DataError
from eval.gate.rule import RowRef, RuleResult
from eval.gate.verdict import Verdict
from eval.report.json_out import verdict_json
from eval.report.summary_verdict import SummaryVerdict, read_summary_verdict

# a summary.json's verdict as the writer lays it out (written by hand: the golden the reader is held to)
GOOD_TEXT = """{
  "schema_version": 1,
  "verdict": {
    "outcome": "FAIL",
    "summary": "gate: FAIL (exit 1): 1 of 2 rules failed: cause_rows [hitlen]",
    "exit_code": 1,
    "results": [
      {"rule": "accuracy_drop", "status": "pass", "measured": "0.0", "threshold": "2.0", "detail": "",
       "rows": [{"table": "accuracy", "row": "qasper", "failed": false}]},
      {"rule": "cause_rows", "status": "fail", "measured": "3", "threshold": "0", "detail": "hits short",
       "rows": [{"table": "cause", "row": "hitlen", "failed": true},
                {"table": "cause", "row": "batch", "failed": false}]}
    ],
    "reasons": [],
    "policy": "default policy",
    "stopped": ""
  },
  "base": {}
}
"""

GOOD = SummaryVerdict(
    exit_code=1,
    results=(
        RuleResult("accuracy_drop", "pass", "0.0", "2.0", "", (RowRef("accuracy", "qasper", False),)),
        RuleResult(
            "cause_rows",
            "fail",
            "3",
            "0",
            "hits short",
            (RowRef("cause", "hitlen", True), RowRef("cause", "batch", False)),
        ),
    ),
    outcome="FAIL",
    summary="gate: FAIL (exit 1): 1 of 2 rules failed: cause_rows [hitlen]",
    reasons=(),
    policy="default policy",
    stopped="",
)


def write(tmp_path: Path, obj: Any) -> Path:
    path = tmp_path / "summary.json"
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def test_a_summary_as_written_reads_typed(tmp_path: Path) -> None:
    got = read_summary_verdict(write(tmp_path, GOOD_TEXT))
    assert got == GOOD
    assert got is not None and [r.rule for r in got.failing()] == ["cause_rows"]


def test_the_writer_and_the_reader_agree(tmp_path: Path) -> None:
    """What json_out.verdict_json writes of a Verdict reads back as the same results, reasons and policy."""
    verdict = Verdict(
        2, list(GOOD.results), ["rule x has no data: n/a"], "p.toml", "stopped after 3 of 9 inputs"
    )
    path = write(tmp_path, {"schema_version": 1, "verdict": verdict_json(verdict)})
    got = read_summary_verdict(path)
    assert got is not None
    assert (got.exit_code, list(got.results), list(got.reasons)) == (2, verdict.results, verdict.reasons)
    assert (got.outcome, got.summary, got.policy, got.stopped) == (
        "NO VERDICT",
        verdict.summary,
        "p.toml",
        "stopped after 3 of 9 inputs",
    )


def test_an_older_sparse_verdict_reads_with_defaults(tmp_path: Path) -> None:
    """A summary.json from before outcome, summary, stopped and a rule's rows were written."""
    old = {"exit_code": 0, "results": [{"rule": "r", "status": "pass", "measured": "1", "threshold": "2"}]}
    got = read_summary_verdict(write(tmp_path, {"schema_version": 1, "verdict": old}))
    assert got == SummaryVerdict(0, (RuleResult("r", "pass", "1", "2"),))
    assert got is not None and got.failing() == ()


def test_a_summary_written_without_a_policy_has_no_verdict(tmp_path: Path) -> None:
    assert read_summary_verdict(write(tmp_path, {"schema_version": 1, "verdict": None})) is None


def _good() -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(GOOD_TEXT)
    return obj


def _set(where: str, value: Any) -> dict[str, Any]:
    """The good summary with the field at dotted `where` set to `value` (or removed, for DROP)."""
    obj = _good()
    *parents, last = where.split(".")
    node: Any = obj
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    index: Any = int(last) if isinstance(node, list) else last
    if value is DROP:
        del node[index]
    else:
        node[index] = value
    return obj


DROP = object()
R1 = "verdict.results.1"

DAMAGED = [
    ("schema_version", 2, "schema_version: must be 1, got 2"),
    ("schema_version", DROP, "schema_version: must be 1, got None"),
    ("verdict", DROP, "verdict: missing field"),
    ("verdict", [], "verdict: must be an object, got list"),
    ("verdict.exit_code", DROP, "verdict.exit_code: missing field"),
    ("verdict.exit_code", "1", 'verdict.exit_code: must be an integer, got "1"'),
    ("verdict.exit_code", True, "verdict.exit_code: must be an integer, got true"),
    ("verdict.exit_code", 7, "verdict.exit_code: must be one of 0, 1, 2, got 7"),
    ("verdict.outcome", 1, "verdict.outcome: must be a string, got 1"),
    ("verdict.summary", None, "verdict.summary: must be a string, got null"),
    ("verdict.reasons", "no", 'verdict.reasons: must be a list of strings, got "no"'),
    ("verdict.policy", [], "verdict.policy: must be a string, got []"),
    ("verdict.stopped", 0, "verdict.stopped: must be a string, got 0"),
    ("verdict.surprise", 1, "verdict.surprise: unknown field"),
    ("verdict.results", DROP, "verdict.results: missing field"),
    ("verdict.results", {}, "verdict.results: must be a list of objects, got {}"),
    (
        "verdict.results.1",
        "x",
        'verdict.results: must be a list of objects, got [{"rule": "accuracy_drop", "status": "p…',
    ),
    (f"{R1}.rule", DROP, f"{R1}.rule: missing field"),
    (f"{R1}.rule", None, f"{R1}.rule: must be a string, got null"),
    (
        f"{R1}.status",
        "failed",
        f'{R1}.status: must be one of "pass", "fail", "no data", "skipped", got "failed"',
    ),
    (f"{R1}.measured", 3, f"{R1}.measured: must be a string, got 3"),
    (f"{R1}.threshold", DROP, f"{R1}.threshold: missing field"),
    (f"{R1}.detail", False, f"{R1}.detail: must be a string, got false"),
    (f"{R1}.rows", "hitlen", f'{R1}.rows: must be a list of objects, got "hitlen"'),
    (f"{R1}.extra", 1, f"{R1}.extra: unknown field"),
    (f"{R1}.rows.0.table", DROP, f"{R1}.rows.0.table: missing field"),
    (f"{R1}.rows.0.row", 5, f"{R1}.rows.0.row: must be a string, got 5"),
    (f"{R1}.rows.1.failed", "yes", f'{R1}.rows.1.failed: must be true or false, got "yes"'),
    (f"{R1}.rows.1.why", "", f"{R1}.rows.1.why: unknown field"),
]


@pytest.mark.parametrize(("where", "value", "message"), DAMAGED, ids=[f"{w}={v!r}" for w, v, _ in DAMAGED])
def test_a_damaged_field_is_one_line_naming_file_and_field(
    tmp_path: Path, where: str, value: Any, message: str
) -> None:
    path = write(tmp_path, _set(where, value))
    with pytest.raises(DataError) as info:
        read_summary_verdict(path)
    assert str(info.value) == f"{path}:{message}"
    assert info.value.exit_code == EXIT_DATA and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", ":1: the summary is not valid JSON (Expecting property name enclosed in double quotes)"),
        ("[1]", ": the summary must be a JSON object"),
    ],
)
def test_a_file_that_is_no_summary_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(DataError) as info:
        read_summary_verdict(path)
    assert str(info.value) == f"{path}{message}"
