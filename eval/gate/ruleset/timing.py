"""warm_prefill_change and cold_prefill_change: the variant's server prefill time against the base's in an
interleaved session, three-way (docs/gate-policy.md "Timing rules"): PASS when the gated interval's upper end is
<= the limit, FAIL when its lower end is above it, else undecided (no verdict). The two rules share everything
but the measure they read.

Settling early (`lbeval ab --stop-when-settled`, how "cs"): the asymptotic confidence sequence
(scorers/sequential.asymptotic_cs, alpha 0.05, rho2 tuned for t* = N, no bounds before CS_MIN_N inputs) on the
per-input mean paired log ratio: PASS when its upper end is <= the limit, FAIL when its lower end is above it.
In an adaptive timing phase (how "adaptive cs") a rule settles only when the gate's three-way result and the
confidence sequence on the rounds' per-pair log ratios agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval.analyze.ab_timing import paired_values, session_pairs
from eval.analyze.compare import Comparison
from eval.gate.rule import (
    AA_MULTIPLE,
    FAIL,
    FRACTION,
    NO_DATA,
    PASS,
    PERCENT,
    SKIPPED,
    STRADDLES,
    Look,
    Params,
    RowRef,
    Rule,
    RuleResult,
    register,
)
from eval.records.stop import OPEN, SETTLED_FAIL, SETTLED_PASS, RuleSettlement
from scorers.sequential import asymptotic_cs, asymptotic_rho2
from scorers.stats import signed_pct

__all__ = [
    "CS_ALPHA", "CS_MIN_N", "TIMING_RULES", "WarmPrefillLimit", "input_log_ratios", "prefill_limit",
    "rule_cold_prefill_change", "rule_prefill_change", "rule_warm_prefill_change", "sequential_skip",
    "straddle_advice", "too_foreign", "until_pct",
]  # fmt: skip

TIMING = "timing"  # the report table (eval/report/tables.py)
# the timing rules: rule -> the paired measure it reads (eval/analyze/timing.TIMING_MEASURES)
TIMING_RULES = {"warm_prefill_change": "warm_prefill_ms", "cold_prefill_change": "cold_prefill_ms"}
CS_ALPHA = 0.05
CS_MIN_N = 10  # scorers/sequential.asymptotic_cs: no bounds before this many inputs
# the limit, the share of foreign figures, and whether runs that are not one interleaved session are skipped;
# max_change_pct's default applies unless the table states only max_change_aa_multiple (then there is no
# absolute limit); both stated: the smaller limit (each must hold)
TIMING_PARAMS: Params = {
    "max_change_pct": (PERCENT, 10.0),
    "max_change_aa_multiple": (AA_MULTIPLE, None),
    "max_foreign_fraction": (FRACTION, 0.1),
    "interleaved_only": (bool, True),
}


@dataclass(frozen=True)
class WarmPrefillLimit:
    """A timing rule's limit (%) from the policy and the A/A floor; `missing`: why there is none."""

    pct: float | None
    threshold: str
    missing: str = ""


def prefill_limit(c: Comparison, p: Mapping[str, Any], measure: str) -> WarmPrefillLimit:
    """max_change_pct (absolute) and/or max_change_aa_multiple x the A/A floor of `measure`; with both, the
    smaller (each stated limit must hold)."""
    absolute, multiple = p.get("max_change_pct"), p.get("max_change_aa_multiple")
    what = measure.removesuffix("_ms").replace("_", " ")
    ch = c.timing_changes.get(measure)
    ci = ch.ci_label if ch is not None else "95% CI"  # interleaved: the gated figure's level (docs/timing.md)
    limits = [] if absolute is None else [float(absolute)]
    parts = [] if absolute is None else [f"{absolute:+g}%"]
    if multiple is not None:
        parts.append(f"{multiple:g} x the A/A floor of {what}")
        aa, threshold = c.aa_floor, f"upper end of the {ci} <= " + " and <= ".join(parts)
        if aa is None:
            why = 'max_change_aa_multiple needs the A/A floor: give --aa-floor RUN_A RUN_B (make: AA="RUN_A RUN_B")'
            return WarmPrefillLimit(None, threshold, why)
        m = aa.measures.get(measure)
        if m is None or m.floor_pct is None:
            why = f"the A/A session {aa.runs[0]} and {aa.runs[1]} has no {what} interval (too few pairs or no /metrics)"
            return WarmPrefillLimit(None, threshold, why)
        if m.paired_drift:
            return WarmPrefillLimit(
                None, threshold, f"the A/A floor drifted during its session ({m.reading})"
            )
        limits.append(multiple * m.floor_pct)
        parts[-1] = f"{multiple:g} x A/A floor {m.floor_pct:.1f}% = {signed_pct(multiple * m.floor_pct)}"
    limit = min(limits)
    threshold = f"upper end of the {ci} <= " + " and <= ".join(parts)
    return WarmPrefillLimit(
        limit, threshold + (f" (the smaller: {signed_pct(limit)})" if len(limits) > 1 else "")
    )


def sequential_skip(c: Comparison) -> str:
    """Why the timing rules skip two runs that are not one interleaved session ("": they are)."""
    if c.execution == "interleaved":
        return ""
    return (
        f"{c.execution} runs (may be machine drift); timing is gated in interleaved sessions "
        "(lbeval ab), or with interleaved_only = false"
    )


def until_pct(estimate: float, limit: float) -> float:
    """The --timing-until half-width to suggest when the interval straddles the limit: the distance from the
    estimate to the limit, at most half the limit (a half-width that decides the rule if the estimate stays),
    rounded down to 0.5 points, at least 0.5."""
    want = min(abs(limit - estimate), limit / 2) if limit > 0 else abs(estimate)
    return max(0.5, math.floor(want * 2) / 2)


def straddle_advice(c: Comparison, estimate: float, limit: float) -> str:
    """What to re-run when the interval straddles the limit. After `lbeval ab --timing-until` stopped on its
    --timing-budget (or the repetition cap) short of its target, a smaller target would stop at the same place:
    the advice is then the budget (or more inputs), not a --timing-until the session already asked for."""
    a = c.paired.adaptive if c.paired is not None else None
    reached = "" if a is None or a.half_width_pct is None else f", half-width {a.half_width_pct:.1f}%"
    if a is not None and a.stopped == "budget":
        return (
            f"the --timing-budget of {a.budget_s:g} server-seconds stopped the added repetitions before "
            f"--timing-until {a.until_pct:g} was reached ({a.reps_done} per input{reached}): re-run with a "
            "larger --timing-budget"
        )
    if a is not None and a.stopped == "max_reps":
        return (
            f"the added repetitions reached their cap ({a.reps_done} per input{reached}) before --timing-until "
            f"{a.until_pct:g} was reached: re-run with more inputs"
        )
    return f"re-run with --timing-until {until_pct(estimate, limit):g}"


def too_foreign(c: Comparison, p: Mapping[str, Any]) -> str:
    """Why the timing rules have no data because too many server figures were another request's ("": not)."""
    limit = p.get("max_foreign_fraction", 0.1)
    over = [
        f"{side} foreign: {t.foreign} of {t.with_figures}"
        for side, run in (("base", c.base), ("variant", c.variant))
        if (t := run.scores.timing).foreign_fraction is not None and t.foreign_fraction > limit + 1e-12
    ]
    if not over:
        return ""
    return (
        f"{', '.join(over)} server figures were not their request's own (other traffic on the server), more "
        f"than max_foreign_fraction {limit:g}: the timing was not measured alone"
    )


def _timing_no_data(c: Comparison, p: Mapping[str, Any], measure: str) -> str:
    """Why the timing rule on `measure` has no data ("": it has)."""
    what = measure.removesuffix("_ms").replace("_", " ")
    if c.timing_changes.get(measure) is None:
        return f"no paired server {what} times (needs /metrics and timing passes)"
    if not (c.base.scores.timing.valid and c.variant.scores.timing.valid):
        return "timing flagged invalid (concurrency or invalid samples)"
    foreign = too_foreign(c, p)
    if foreign:
        return foreign
    paired = c.paired.measures.get(measure) if c.paired is not None else None  # lbeval ab runs
    if paired is not None and paired.drift is not None and paired.drift.paired.verdict == "drift":
        return f"the paired change drifted during the interleaved session ({paired.reading})"
    return ""


def rule_prefill_change(c: Comparison, p: Mapping[str, Any], name: str, measure: str) -> RuleResult:
    """Three-way (module docstring)."""
    lim = prefill_limit(c, p, measure)
    threshold, limit = lim.threshold, lim.pct
    skip = sequential_skip(c) if p.get("interleaved_only", True) else ""
    if not (c.base.scores.timing.reps or c.variant.scores.timing.reps):  # as a scenario neither run has
        skip = "neither run has timing passes (--passes ... timing)"
    if skip:
        return RuleResult(name, SKIPPED, "not checked", skip)
    if limit is None:
        return RuleResult(name, NO_DATA, lim.missing, threshold)
    why = _timing_no_data(c, p, measure)
    ch = c.timing_changes.get(measure)
    if why or ch is None:
        return RuleResult(name, NO_DATA, why, threshold)
    measured = f"{signed_pct(ch.estimate)} [{ch.ci_label} {signed_pct(ch.low)}, {signed_pct(ch.high)}] over {ch.n_inputs} inputs"
    threshold += f"; FAIL when its lower end > {signed_pct(limit)}"
    if ch.high <= limit:
        return RuleResult(name, PASS, measured, threshold, rows=(RowRef(TIMING, measure, False),))
    if ch.low > limit:
        return RuleResult(name, FAIL, measured, threshold, rows=(RowRef(TIMING, measure, True),))
    detail = f"{STRADDLES}: {straddle_advice(c, ch.estimate, limit)}"
    return RuleResult(name, NO_DATA, measured, threshold, detail, (RowRef(TIMING, measure, False),))


def rule_warm_prefill_change(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    return rule_prefill_change(c, p, "warm_prefill_change", TIMING_RULES["warm_prefill_change"])


def rule_cold_prefill_change(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    return rule_prefill_change(c, p, "cold_prefill_change", TIMING_RULES["cold_prefill_change"])


# ---------------------------------------------------------------- settling early


def input_log_ratios(c: Comparison, measure: str = "warm_prefill_ms") -> list[float]:
    """Per input, in session order: the mean log(variant / base) server prefill time (`measure`) over its
    adjacent pairs."""
    pairs = session_pairs(c.base, c.variant)
    if pairs is None:
        return []
    values = paired_values(c.base, c.variant, pairs, measure)
    by_input: dict[str, list[float]] = {}
    for key, _t, a, b in sorted(
        zip(values.input_ids, values.times_s, values.a, values.b, strict=True), key=lambda x: x[1]
    ):
        by_input.setdefault(key, []).append(math.log(b / a))
    return [sum(v) / len(v) for v in by_input.values()]


def settle_timing(look: Look, p: Mapping[str, Any], name: str) -> RuleSettlement:
    measure = TIMING_RULES[name]
    # the gate rule's own limit: absolute and/or relative to the A/A floor
    lim = prefill_limit(look.c, p, measure)
    limit = lim.pct
    if limit is None:
        return RuleSettlement(name, OPEN, "no data", lim.missing)
    if look.adaptive is not None and look.k == look.n:
        return _adaptive_timing(look, name, measure, limit)
    ratios = input_log_ratios(look.c, measure)
    if len(ratios) < CS_MIN_N:
        return RuleSettlement(
            name, OPEN, "cs", f"{len(ratios)} inputs with paired times; the CS needs {CS_MIN_N}"
        )
    cs = asymptotic_cs(ratios, rho2=asymptotic_rho2(look.n, alpha=CS_ALPHA), alpha=CS_ALPHA, min_n=CS_MIN_N)
    low, high = 100.0 * math.expm1(cs.lows[-1]), 100.0 * math.expm1(cs.highs[-1])
    mean = 100.0 * math.expm1(cs.means[-1])
    detail = f"{signed_pct(mean)} [95% CS {signed_pct(low)}, {signed_pct(high)}] over {len(ratios)} inputs"
    state = SETTLED_PASS if high <= limit else SETTLED_FAIL if low > limit else OPEN
    return RuleSettlement(name, state, "cs", detail, low, high)


def _adaptive_timing(look: Look, name: str, measure: str, limit: float) -> RuleSettlement:
    """Every input has run and the adaptive phase adds timing repetitions (eval/run/adaptive.py): settled only
    when the gate's three-way result on the data so far and the always-valid confidence sequence on the rounds'
    per-pair log ratios (tuned like the phase's own) decide the same way."""
    assert look.adaptive is not None
    ratios = list(look.adaptive.by_measure.get(measure, ()))
    result = look.results.get(name)
    gate = result.status if result is not None else OPEN
    if len(ratios) < CS_MIN_N:
        return RuleSettlement(
            name, OPEN, "adaptive cs", f"{len(ratios)} timing pairs; the CS needs {CS_MIN_N}"
        )
    rho2 = asymptotic_rho2(max(look.adaptive.horizon, 1), alpha=CS_ALPHA)
    cs = asymptotic_cs(ratios, rho2=rho2, alpha=CS_ALPHA, min_n=CS_MIN_N)
    low, high = 100.0 * math.expm1(cs.lows[-1]), 100.0 * math.expm1(cs.highs[-1])
    by_cs = SETTLED_PASS if high <= limit else SETTLED_FAIL if low > limit else OPEN
    detail = (f"{signed_pct(100.0 * math.expm1(cs.means[-1]))} [95% CS {signed_pct(low)}, {signed_pct(high)}] over "
              f"{len(ratios)} pairs, limit {limit:+g}%; the gate's interval: {gate}")  # fmt: skip
    return RuleSettlement(name, by_cs if by_cs == gate else OPEN, "adaptive cs", detail, low, high)


def _only_multiple(table: Mapping[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Only the A/A-relative limit stated: no absolute one (max_change_pct's default does not apply)."""
    if "max_change_pct" not in table and "max_change_aa_multiple" in table:
        params["max_change_pct"] = None
    return params


def _settle_warm(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    return settle_timing(look, p, "warm_prefill_change")


def _settle_cold(look: Look, p: Mapping[str, Any]) -> RuleSettlement:
    return settle_timing(look, p, "cold_prefill_change")


WARM = register(
    Rule("warm_prefill_change", 70, "the variant's warm prefill time change within the limit (three-way)",
         TIMING_PARAMS, rule_warm_prefill_change, _settle_warm, finish=_only_multiple)
)  # fmt: skip
COLD = register(
    Rule("cold_prefill_change", 80, "the variant's cold prefill time change within the limit (three-way)",
         TIMING_PARAMS, rule_cold_prefill_change, _settle_cold, finish=_only_multiple)
)  # fmt: skip
