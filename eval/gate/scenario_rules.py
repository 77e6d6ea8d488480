"""The gate's rules on the scenarios (registered in eval/gate/rules.py RULES; documented in
eval/gate/policy_default.toml). They read each run's attribution rows (eval/analyze/attribution.py), which the
report's attribution table shows (table id "attribution", row keys the same).

    hitlen_cache_honoured  every primed request got the hit its length promises (on by default: a server fact,
                           not a noisy number); skipped when neither run has the hitlen scenario
    batch_invariant        the variant's batch rows are N/N token-identical with max delta 0 (vLLM's
                           batch-invariant mode); off by default
    hitlen_equality        the variant's primed-prefix outputs equal the cold ones, N/N; off by default
    repeats_single_output  the variant's repeats give one distinct output per input; off by default
    traffic_invariant      the variant's warm output after unrelated traffic equals the cold one; off by default
A rule whose scenario a run it needs did not measure has no data (no verdict, exit 2), never a pass; so has a
rule whose denominator is 0 (a scenario that planned no pair: `--hit-lengths` beyond every prompt, `--batch-sizes
1`), never a pass or a fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.analyze.attribution import Attribution, AttributionRow
from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.gate.verdict import FAIL, NO_DATA, PASS, SKIPPED, RowRef, RuleResult

ATTRIBUTION = "attribution"


def _att(run: ScoredRun) -> Attribution | None:
    return run.scores.attribution


def _measured(run: ScoredRun, key: str) -> AttributionRow | None:
    att = _att(run)
    row = att.row(key) if att is not None else None
    return row if row is not None and row.measured and row.pairs is not None else None


def _sides(c: Comparison, names: Sequence[str]) -> list[tuple[str, ScoredRun]]:
    return [(n, c.base if n == "base" else c.variant) for n in names]


def rule_hitlen_cache_honoured(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name = "hitlen_cache_honoured"
    threshold = f"primed requests whose cached tokens differ from floor(min(L, n-1)/block)*block: <= {p['max_misses']} per run"
    have = {side: _measured(run, "hitlen") for side, run in _sides(c, ("base", "variant"))}
    if not any(have.values()):
        return RuleResult(name, SKIPPED, "not checked", "neither run has the hitlen scenario")
    listed = list(p["runs"])
    lacking = [side for side in listed if have.get(side) is None]
    if lacking:
        return RuleResult(name, NO_DATA, f"the {' and '.join(lacking)} run has no hitlen scenario", threshold)
    measured, failing, details = [], [], []
    for side in listed:
        row = have[side]
        hits = row.hits if row is not None else None
        if hits is None:
            return RuleResult(name, NO_DATA, f"the {side} run's hitlen rows hold no hits", threshold)
        if hits.total == 0:  # a denominator of 0 is no data, never a pass (e.g. --hit-lengths 100000)
            why = f"the {side} run planned no primed request (honoured 0/0: every hit length beyond its prompts?)"
            return RuleResult(name, NO_DATA, why, threshold)
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
        name, FAIL if failing else PASS, "; ".join(measured), threshold, "; ".join(details), rows
    )


def _equality_rule(
    c: Comparison, name: str, keys: Sequence[str], scenario: str, p: Mapping[str, Any], *, bitwise: bool
) -> RuleResult:
    """The variant's rows `keys`: at least min_fraction of N token-identical (and max delta 0 when bitwise)."""
    frac = p["min_fraction"]
    threshold = f"variant >= {frac:g} of N outputs token-identical" + (", max |delta| 0" if bitwise else "")
    rows = [(key, _measured(c.variant, key)) for key in keys]
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


def rule_batch_invariant(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    keys = ["batch", "batch_warm"] if p["include_warm"] else ["batch"]
    return _equality_rule(c, "batch_invariant", keys, "batch", p, bitwise=p["bitwise"])


def rule_hitlen_equality(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    return _equality_rule(c, "hitlen_equality", ["hitlen"], "hitlen", p, bitwise=False)


def rule_traffic_invariant(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    return _equality_rule(c, "traffic_invariant", ["traffic"], "traffic", p, bitwise=False)


def rule_repeats_single_output(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name = "repeats_single_output"
    threshold = f"inputs with more than one distinct output over the repeats <= {p['max_inputs']}"
    r = _measured(c.variant, "repeats")
    if r is None or r.outputs is None:
        return RuleResult(name, NO_DATA, "the variant run has no repeats scenario", threshold)
    o = r.outputs
    if o.n_inputs == 0:
        return RuleResult(name, NO_DATA, "no input has two valid repeats", threshold)
    measured = (
        f"variant {o.n_multiple}/{o.n_inputs} inputs with more than one output (at most {o.max_distinct})"
    )
    ok = o.n_multiple <= p["max_inputs"]
    return RuleResult(
        name, PASS if ok else FAIL, measured, threshold, rows=(RowRef(ATTRIBUTION, "repeats", not ok),)
    )
