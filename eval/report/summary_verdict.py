"""Reading summary.json's `verdict` back: the typed view of what `lbeval compare` wrote (json_out.verdict_json),
for readers outside the report stage (the fault matrix judges a fault by the rules and rows it failed).

    {"schema_version": 1, "verdict": null | {"outcome", "summary", "exit_code", "results": [{"rule", "status",
     "measured", "threshold", "detail", "rows": [{"table", "row", "failed"}]}], "reasons", "policy", "stopped"}}

`verdict` is null when the report was written without a policy. A summary.json from before a field existed
(`rows`, `stopped`, `outcome`, ...) reads with that field's default; a file that does not parse, has another
schema version, or holds a field of the wrong type or an unknown one is a DataError (exit 65) naming the file and
the field (`verdict.results.0.rows.1.failed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.errors import DataError
from eval.gate.verdict import (
    EXIT_FAIL,
    EXIT_NO_VERDICT,
    EXIT_PASS,
    FAIL,
    NO_DATA,
    PASS,
    SKIPPED,
    RowRef,
    RuleResult,
)
from eval.prepare.inputs import field_problem
from eval.records.stop import read_json_object
from eval.report.json_out import SUMMARY_SCHEMA_VERSION

# each object's fields as written: name -> (type, required)
_VERDICT = {
    "outcome": (str, False),
    "summary": (str, False),
    "exit_code": (int, True),
    "results": (list[dict[str, Any]], True),
    "reasons": (list[str], False),
    "policy": (str, False),
    "stopped": (str, False),
}
_RESULT = {
    "rule": (str, True),
    "status": (str, True),
    "measured": (str, True),
    "threshold": (str, True),
    "detail": (str, False),
    "rows": (list[dict[str, Any]], False),
}
_ROW = {"table": (str, True), "row": (str, True), "failed": (bool, False)}
_CHOICES: dict[str, tuple[Any, ...]] = {
    "exit_code": (EXIT_PASS, EXIT_FAIL, EXIT_NO_VERDICT),
    "status": (PASS, FAIL, NO_DATA, SKIPPED),
}


@dataclass(frozen=True)
class SummaryVerdict:
    """summary.json's `verdict` as written: the gate's outcome and exit code, its reasons and policy, and every
    rule's result with the report rows it judged (eval/gate's RuleResult and RowRef)."""

    exit_code: int
    results: tuple[RuleResult, ...]
    outcome: str = ""  # "PASS", "FAIL" or "NO VERDICT" ("" in a file from before it was written)
    summary: str = ""  # the gate's line ("gate: FAIL (exit 1): ...")
    reasons: tuple[str, ...] = ()
    policy: str = ""
    stopped: str = ""

    @classmethod
    def from_dict(cls, obj: Any, path: Path | str = "summary.json") -> SummaryVerdict:
        raw = _checked(obj, _VERDICT, path, "verdict")
        results = tuple(_result(r, path, f"verdict.results.{i}") for i, r in enumerate(raw.pop("results")))
        return cls(results=results, reasons=tuple(raw.pop("reasons", ())), **raw)

    def failing(self) -> tuple[RuleResult, ...]:
        """The results of the rules that failed, in the verdict's order."""
        return tuple(r for r in self.results if r.status == FAIL)


def _result(obj: Any, path: Path | str, where: str) -> RuleResult:
    raw = _checked(obj, _RESULT, path, where)
    rows = tuple(
        RowRef(**_checked(r, _ROW, path, f"{where}.rows.{i}")) for i, r in enumerate(raw.pop("rows", ()))
    )
    return RuleResult(**raw, rows=rows)


def _checked(
    obj: Any, schema: Mapping[str, tuple[Any, bool]], path: Path | str, where: str
) -> dict[str, Any]:
    """The JSON object `obj` (field `where`) checked against `schema`: no unknown key, every required one, each
    of its type; else a DataError naming the file and the field."""
    if not isinstance(obj, Mapping):
        raise DataError(path, None, where, f"must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(schema))
    if unknown:
        raise DataError(path, None, f"{where}.{unknown[0]}", "unknown field")
    for name, (tp, required) in schema.items():
        if name not in obj:
            if required:
                raise DataError(path, None, f"{where}.{name}", "missing field")
            continue
        problem = field_problem(obj[name], tp, {"choices": _CHOICES[name]} if name in _CHOICES else {})
        if problem is not None:
            raise DataError(path, None, f"{where}.{name}", problem)
    return dict(obj)


def read_summary_verdict(path: Path) -> SummaryVerdict | None:
    """The verdict of the summary.json at `path` (None: written without a policy); damage is a DataError."""
    obj = read_json_object(path, "the summary")
    if obj.get("schema_version") != SUMMARY_SCHEMA_VERSION:
        got = obj.get("schema_version")
        raise DataError(path, None, "schema_version", f"must be {SUMMARY_SCHEMA_VERSION}, got {got!r:.40}")
    if "verdict" not in obj:
        raise DataError(path, None, "verdict", "missing field")
    verdict = obj["verdict"]
    return None if verdict is None else SummaryVerdict.from_dict(verdict, path)
