"""What the scenario rules share: each run's attribution rows (eval/analyze/attribution.py), which the report's
attribution table shows (table id "attribution", row keys the same). A rule whose scenario a run it needs did not
measure has no data (no verdict, exit 2), never a pass; so has a rule whose denominator is 0 (a scenario that
planned no pair: `--hit-lengths` beyond every prompt, `--batch-sizes 1`), never a pass or a fail."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.analyze.attribution import AttributionRow
from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.gate.rule import FAIL, NO_DATA, PASS, RowRef, RuleResult

__all__ = ["ATTRIBUTION", "equality_rule", "measured_row"]

ATTRIBUTION = "attribution"


def measured_row(run: ScoredRun, key: str) -> AttributionRow | None:
    att = run.scores.attribution
    row = att.row(key) if att is not None else None
    return row if row is not None and row.measured and row.pairs is not None else None


def equality_rule(
    c: Comparison, name: str, keys: Sequence[str], scenario: str, p: Mapping[str, Any], *, bitwise: bool
) -> RuleResult:
    """The variant's rows `keys`: at least min_fraction of N token-identical (and max delta 0 when bitwise)."""
    frac = p["min_fraction"]
    threshold = f"variant >= {frac:g} of N outputs token-identical" + (", max |delta| 0" if bitwise else "")
    rows = [(key, measured_row(c.variant, key)) for key in keys]
    if any(r is None for _, r in rows):
        return RuleResult(name, NO_DATA, f"the variant run has no {scenario} scenario", threshold)
    measured, failing = [], []
    for key, r in rows:
        assert r is not None and r.pairs is not None
        s = r.pairs
        if s.n_total == 0:  # a denominator of 0 is no data, never a fail (e.g. --batch-sizes 1: no batch)
            return RuleResult(name, NO_DATA, f"the variant's {key} row has no planned pair (0/0)", threshold)
        delta = "n/a" if s.max_delta is None else f"{s.max_delta:.3g}"
        measured.append(f"{key} {s.tokens_equal}/{s.n_total} (max |delta| {delta})")
        ok = s.n_total > 0 and s.tokens_equal >= frac * s.n_total - 1e-9
        if bitwise and s.max_delta:
            ok = False
        if not ok:
            failing.append(key)
    refs = tuple(RowRef(ATTRIBUTION, key, key in failing) for key, _ in rows)
    detail = ("failing: " + ", ".join(failing)) if failing else ""
    return RuleResult(name, FAIL if failing else PASS, "; ".join(measured), threshold, detail, refs)
