"""no_errors: errored requests (after the runner's bounded retries), all passes, in the listed runs: at most
`max` per run. Settles FAIL (how "count") as soon as a listed run's count exceeds max: an errored record already
sent is final."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import (
    BOTH_RUNS,
    COUNT,
    FAIL,
    PASS,
    Look,
    RowRef,
    Rule,
    RuleResult,
    count_max,
    register,
    runs_named,
)
from eval.records.stop import RuleSettlement

__all__ = ["RULE"]

NAME = "no_errors"


def _counts(c: Comparison, p: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(side, run.scores.errors) for side, run in runs_named(c, p["runs"])]


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = _counts(c, p)
    ok = all(n <= p["max"] for _, n in counts)
    measured = "errored requests: " + ", ".join(f"{side} {n}" for side, n in counts)
    rows = (RowRef("cache", "errors", not ok),)
    return RuleResult(NAME, PASS if ok else FAIL, measured, f"<= {p['max']} per run", rows=rows)


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    return count_max(NAME, _counts(look.c, p), look, p)


RULE = register(
    Rule(NAME, 50, "errored requests: at most `max` per listed run",
         {"max": (COUNT, 0), "runs": (list, BOTH_RUNS)}, judge, settle)
)  # fmt: skip
