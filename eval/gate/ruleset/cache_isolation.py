"""cache_isolation: absolute: a request sent with a salt the run had never sent before (the salt control, cold
passes sent by salt, every scenario's fresh salts) must find 0 cached tokens: a hit is a cache isolation fault
(a cross-tenant leak where salts separate users). Skipped when no request of any listed run was sent by salt with
a cached-token count to check; a run without counts is an unverified cache state (eval/gate/cache_state.py: no
data unless the policy accepts it). Settles FAIL at the first leak (a request already sent that found cached
tokens under a fresh salt is final); a PASS settles with the full run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.gate.rule import (
    BOTH_RUNS,
    FAIL,
    PASS,
    SKIPPED,
    Look,
    RowRef,
    Rule,
    RuleResult,
    full_run,
    register,
    runs_named,
)
from eval.records.server_figures import checked_cached
from eval.records.stop import SETTLED_FAIL, RuleSettlement
from eval.records.types import RequestRecord

__all__ = ["RULE", "SaltCheck", "fresh_salt_check", "rule_cache_isolation"]

NAME = "cache_isolation"
CACHE = "cache"


@dataclass(frozen=True)
class SaltCheck:
    """One run's requests that were the first to use their salt: how many report a cached-token count, and
    those that found cached tokens (the leaks)."""

    checked: int
    leaks: list[RequestRecord]


def fresh_salt_check(run: ScoredRun) -> SaltCheck:
    """Every record of the run (superseded groups and retried attempts included: a leak is a fact whatever
    came after it) that was the first to use its cache_salt, by send order."""
    first: dict[str, RequestRecord] = {}
    for rec in sorted(run.loaded.records, key=lambda r: r.seq):
        if rec.cache_salt is not None and rec.cache_salt not in first:
            first[rec.cache_salt] = rec
    counted = [r for r in first.values() if r.status != "error" and checked_cached(r) is not None]
    return SaltCheck(len(counted), [r for r in counted if (checked_cached(r) or 0) > 0])


def rule_cache_isolation(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name = NAME
    threshold = "requests with a salt new to the run that found cached tokens: 0 per run"
    checks = [(side, fresh_salt_check(run)) for side, run in runs_named(c, p["runs"])]
    if not any(ch.checked for _, ch in checks):
        return RuleResult(
            name, SKIPPED, "not checked", "no request was sent with a fresh salt and a cached-token count"
        )
    # a run whose server reports no cached-token count is an unverified cache state: eval/gate/cache_state.py
    # gives no data then, unless the policy accepts it (then it is checked on the runs that report counts)
    checks = [(side, ch) for side, ch in checks if ch.checked]
    measured = "; ".join(f"{side} {len(ch.leaks)} of {ch.checked} fresh-salt requests found cached tokens"
                         for side, ch in checks)  # fmt: skip
    leaks = [(side, r) for side, ch in checks for r in ch.leaks]
    rows = (RowRef(CACHE, "control_salt_ok", bool(leaks)),)
    if not leaks:
        return RuleResult(name, PASS, measured, threshold, rows=rows)
    shown = ", ".join(
        f"{side} {r.dataset}/{r.example_id} {r.pass_name} rep {r.repetition}: {checked_cached(r)} cached"
        for side, r in leaks[:4]
    )
    more = f" and {len(leaks) - 4} more" if len(leaks) > 4 else ""
    detail = f"cache_salt accepted but not honoured: a cache isolation fault ({shown}{more})"
    return RuleResult(name, FAIL, measured, threshold, detail, rows)


def settle(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    """FAIL at the first leak (no later input can undo it); a PASS settles with the full run."""
    result = look.results.get(NAME)
    if result is not None and result.status == FAIL:
        detail = f"{result.measured} after {look.k} of {look.n} inputs ({result.detail})"
        return RuleSettlement(NAME, SETTLED_FAIL, "count", detail)
    return full_run(look, NAME)


RULE = register(
    Rule(NAME, 160, "a request with a salt new to its run finds no cached tokens",
         {"runs": (list, BOTH_RUNS)}, rule_cache_isolation, settle, needs_verified_cache=True, names_rows=True)
)  # fmt: skip
