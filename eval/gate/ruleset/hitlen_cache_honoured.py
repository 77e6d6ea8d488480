"""hitlen_cache_honoured: every primed request of the hitlen scenario got the hit its length promises (a server
fact, not a noisy number): at most `max_misses` per listed run. Skipped when neither run has the hitlen scenario;
needs a verified cache state. Settles only when every input has run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.analyze.compare import Comparison
from eval.gate.rule import (
    BOTH_RUNS,
    COUNT,
    FAIL,
    NO_DATA,
    PASS,
    SKIPPED,
    RowRef,
    Rule,
    RuleResult,
    register,
    runs_named,
)
from eval.gate.ruleset._attribution import ATTRIBUTION, measured_row

__all__ = ["RULE"]

NAME = "hitlen_cache_honoured"


def judge(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    threshold = f"primed requests whose cached tokens differ from floor(min(L, n-1)/block)*block: <= {p['max_misses']} per run"
    have = {side: measured_row(run, "hitlen") for side, run in runs_named(c, ("base", "variant"))}
    if not any(have.values()):
        return RuleResult(NAME, SKIPPED, "not checked", "neither run has the hitlen scenario")
    listed = list(p["runs"])
    lacking = [side for side in listed if have.get(side) is None]
    if lacking:
        return RuleResult(NAME, NO_DATA, f"the {' and '.join(lacking)} run has no hitlen scenario", threshold)
    measured, failing, details = [], [], []
    for side in listed:
        row = have[side]
        hits = row.hits if row is not None else None
        if hits is None:
            return RuleResult(NAME, NO_DATA, f"the {side} run's hitlen rows hold no hits", threshold)
        if hits.total == 0:  # a denominator of 0 is no data, never a pass (e.g. --hit-lengths 100000)
            why = f"the {side} run planned no primed request (honoured 0/0: every hit length beyond its prompts?)"
            return RuleResult(NAME, NO_DATA, why, threshold)
        misses = hits.total - hits.honoured
        measured.append(f"{side} honoured {hits.honoured}/{hits.total}")
        if misses > p["max_misses"]:
            failing.append(side)
            shown = ", ".join(
                f"{m.dataset}/{m.example_id} L={m.hit_len}: {m.cached if m.cached is not None else 'none'} "
                f"cached, {m.expected if m.expected >= 0 else 'unknown'} promised"
                for m in hits.misses[:4]
            )
            more = f" and {len(hits.misses) - 4} more" if len(hits.misses) > 4 else ""
            details.append(f"{side}: {shown}{more}")
    rows = (RowRef(ATTRIBUTION, "hitlen", bool(failing)),)
    return RuleResult(
        NAME, FAIL if failing else PASS, "; ".join(measured), threshold, "; ".join(details), rows
    )


RULE = register(
    Rule(NAME, 100, "every primed request got the cache hit its length promises",
         {"max_misses": (COUNT, 0), "runs": (list, BOTH_RUNS)}, judge, needs_verified_cache=True)
)  # fmt: skip
