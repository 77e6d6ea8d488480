"""no_invalid_warm: warm-condition requests that missed the prefix cache (status invalid) in the listed runs, at
most `max` per run (`count_recovered`: an invalid attempt counts even when its re-primed retry then hit). Needs
a verified cache state. Settles FAIL (how "count") as soon as a listed run's count exceeds max."""

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

NAME = "no_invalid_warm"


def _counts(c: Comparison, p: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [
        (side, run.scores.invalid.warm_attempts if p["count_recovered"] else run.scores.invalid.warm_final)
        for side, run in runs_named(c, p["runs"])
    ]


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = _counts(c, p)
    measured = ", ".join(f"{side} {n}" for side, n in counts)
    what = "invalid warm attempts" if p["count_recovered"] else "warm samples still invalid"
    ok = all(n <= p["max"] for _, n in counts)
    rows = (
        RowRef("cache", "invalid_warm_attempts" if p["count_recovered"] else "invalid_warm_final", not ok),
    )
    return RuleResult(NAME, PASS if ok else FAIL, f"{what}: {measured}", f"<= {p['max']} per run", rows=rows)


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    return count_max(NAME, _counts(look.c, p), look, p)


RULE = register(
    Rule(NAME, 40, "warm requests that missed the prefix cache: at most `max` per listed run",
         {"max": (COUNT, 0), "count_recovered": (bool, True), "runs": (list, BOTH_RUNS)}, judge, settle,
         needs_verified_cache=True)
)  # fmt: skip
