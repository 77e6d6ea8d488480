"""cache_reports_consistent: records where usage's cached tokens and the server's own prefix-cache hit count
disagree (a clean window: eval/records/server_figures.py), per listed run: at most `max`. Settles FAIL (how
"count") as soon as a listed run's count exceeds max."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

NAME = "cache_reports_consistent"


def _counts(c: Comparison, p: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [
        (side, sum(r.cache_finding is not None for r in run.loaded.records))
        for side, run in runs_named(c, p["runs"])
    ]


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = _counts(c, p)
    ok = all(n <= p["max"] for _, n in counts)
    measured = "usage vs server hit count disagree: " + ", ".join(f"{side} {n}" for side, n in counts)
    detail = "" if ok else _first_finding(c, p["runs"])
    rows = (RowRef("cache", "cache_findings", not ok),)
    return RuleResult(NAME, PASS if ok else FAIL, measured, f"<= {p['max']} per run", detail, rows)


def _first_finding(c: Comparison, names: Sequence[str]) -> str:
    for side, run in runs_named(c, names):
        for r in run.loaded.records:
            if r.cache_finding is not None:
                return f"first: {side} {r.dataset}/{r.example_id} {r.pass_name}: {r.cache_finding}"
    return ""


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    return count_max(NAME, _counts(look.c, p), look, p)


RULE = register(
    Rule(NAME, 60, "usage's cached tokens agree with the server's own hit count: at most `max` disagree",
         {"max": (COUNT, 0), "runs": (list, BOTH_RUNS)}, judge, settle)
)  # fmt: skip
