"""What a rule that needs a verified cache state does when a run's cache state is unverified.

A run against a server that reports no cached-token count (llama-cpp-python) has an unverified cache state
(eval/analyze/verification.py): its "cold" and "warm" passes are what lbeval sent, not what the cache did. The
rules that say `needs_verified_cache` (eval/gate/rule.Rule) judge cache states (cold vs warm, warm vs repeat,
warm misses, primed hits, warm after traffic), so on such a run they give no data (the gate: exit 2, no verdict),
unless the policy sets `data.accept_unverified_cache = true`: then they are checked, and each says that its cache
state was unverified. Rules about cold outputs and scores across runs (cold_scores, cross_variant_cold, ...) do
not need it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.registry import rules
from eval.gate.rule import NO_DATA, SKIPPED, Rule, RuleResult

__all__ = ["NEEDS_VERIFIED_CACHE", "guarded", "unverified_runs"]

# the registered rules that need a verified cache state (the rules say so themselves)
NEEDS_VERIFIED_CACHE = frozenset(r.name for r in rules() if r.needs_verified_cache)


def unverified_runs(c: Comparison, sides: Sequence[str]) -> list[str]:
    """One description per listed run whose cache state is not verified."""
    out = []
    for side in sides:
        run = c.base if side == "base" else c.variant
        v = run.scores.cache_verification
        if v is not None and not v.verified:
            counted = f"{v.unverified_records}/{v.records} records"
            out.append(f"{side} run {run.scores.run.run_id}: {v.server_label}, {counted} unverified")
    return out


def guarded(rule: Rule, c: Comparison, params: Mapping[str, Any], accept_unverified: bool) -> RuleResult:
    """The rule's result, or no data when it needs a verified cache state that a run it reads lacks (a rule
    that skips itself, e.g. hitlen_cache_honoured without the hitlen scenario, stays skipped)."""
    result = rule.judge(c, params)
    unverified = unverified_runs(c, rule.runs(params)) if rule.needs_verified_cache else []
    if not unverified or result.status == SKIPPED:
        return result
    listed = "; ".join(unverified)
    if not accept_unverified:
        return RuleResult(
            rule.name,
            NO_DATA,
            f"cache state unverified ({listed})",
            "a verified cache state (or data.accept_unverified_cache = true in the policy)",
        )
    note = "cache state UNVERIFIED, accepted by data.accept_unverified_cache"
    return replace(result, detail=f"{result.detail}; {note}" if result.detail else note)
