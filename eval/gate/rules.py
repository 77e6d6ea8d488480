"""The release gate's rules: a comparison + a policy -> a verdict, exit 0 / 1 / 2.

    0  every checked rule holds
    1  at least one rule fails (each failure names its measured value and threshold)
    2  no verdict: the data cannot support one (missing, damaged or incomplete runs, mismatched inputs, too few
       valid pairs, a rule with nothing to measure). Fails closed: missing data never passes.

The rules and their parameters are documented in the shipped default policy, eval/gate/policy_default.toml.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.analyze.causes import cause_rows
from eval.analyze.compare import Comparison
from eval.analyze.score import ScoredRun
from eval.gate import cache_state, cause_rules, cross_numerics, scenario_rules
from eval.gate.policy import Policy
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
    Verdict,
)

# the report tables and rows the rules judge (eval/report/tables.py: Table.id, Row.key)
ACCURACY, AGREEMENT, CROSS, TIMING, CACHE = "accuracy", "agreement", "cross", "timing", "cache"


def data_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why the data cannot support a verdict (empty: it can): `blocking_reasons`, then `thin_reasons`."""
    return blocking_reasons(c, policy) + thin_reasons(c, policy)


def blocking_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why no figure of the two runs can be trusted: they asked different things, a run is damaged or (with
    data.require_complete) incomplete. Then there is no verdict, whatever the rules say."""
    reasons = [f"the runs differ in {m.describe()}" for m in c.mismatches] + same_run(c)
    for side, run in (("base", c.base), ("variant", c.variant)):
        info = run.scores.run
        # damaged records never pass, whatever the policy says about incomplete runs
        reasons += [f"{side} run {info.run_id} is damaged: {d}" for d in info.damage]
        if policy.data["require_complete"] and not info.complete and not info.damage:
            reasons.append(
                f"{side} run {info.run_id} is incomplete ({info.n_slots}/{info.expected_records} planned requests have a record)"
            )
    return reasons


def same_run(c: Comparison) -> list[str]:
    """A run compared with itself (`lbeval gate main main`: one run folder on both sides, or a copy of it: the
    same variant and run id) agrees with itself on every rule: its PASS would say nothing about a variant."""
    a, b = c.base.scores.run, c.variant.scores.run
    one_folder = c.base.loaded.run_dir.resolve() == c.variant.loaded.run_dir.resolve()
    if not (one_folder or (a.variant, a.run_id) == (b.variant, b.run_id)):
        return []
    where = f"folder {c.base.loaded.run_dir}" if one_folder else f"variant {a.variant}, run id {a.run_id}"
    return [f"base and variant are the same run ({where}): a run always agrees with itself; compare two runs"]


def thin_reasons(c: Comparison, policy: Policy) -> list[str]:
    """Why the whole, matched, undamaged runs are too thin to PASS: too few valid cold/warm pairs (a fault that
    makes warm requests invalid does that). They stop a PASS, not a FAIL measured on the same runs."""
    reasons: list[str] = []
    for side, run in (("base", c.base), ("variant", c.variant)):
        info = run.scores.run
        cw = run.scores.agreement.get("cold_warm")
        n = run.scores.n_inputs
        if cw is None:
            if not unplanned_passes(c, ("cold", "warm")):  # neither run planned them: nothing is missing
                reasons.append(f"{side} run {info.run_id} has no cold/warm passes")
            continue
        need = max(policy.data["min_valid_pairs"], policy.data["min_valid_pair_fraction"] * n)
        if cw.n_pairs < need:
            reasons.append(
                f"{side} run {info.run_id} has {cw.n_pairs}/{n} valid cold/warm pairs, needs at least "
                f"{need:g} (data.min_valid_pairs, data.min_valid_pair_fraction)"
            )
    return reasons


# ---------------------------------------------------------------- what the runs planned

# the passes each rule compares: on runs that planned none of them it has nothing to judge (not planned)
RULE_PASSES: dict[str, tuple[str, ...]] = {
    "cold_warm_equality": ("cold", "warm"),
    "warm_repeat_equality": ("warm", "repeat"),
    "cold_scores": ("cold",),
    "cross_variant_cold": ("cold",),
}


def unplanned_passes(c: Comparison, passes: Sequence[str]) -> list[str]:
    """The passes of `passes` that neither run planned (`--passes`); one run's plan is not the other's missing
    data, so a pass only one run planned is not in the list (the rule then has no data: no verdict)."""
    return [p for p in passes if not any(p in run.scores.run.passes for run in (c.base, c.variant))]


def not_planned(c: Comparison, r: RuleResult) -> RuleResult:
    """A rule with no data because neither run planned what it compares (an interleaved `--passes timing`
    session has no cold, warm or repeat pass, and no cause row): skipped as not planned, so the verdict judges
    what was planned instead of giving no verdict for data nobody asked for."""
    if r.status != NO_DATA:
        return r
    missing = unplanned_passes(c, RULE_PASSES.get(r.rule, ()))
    if missing:
        what = " and ".join(missing) + (" passes" if len(missing) > 1 else " pass")
        return RuleResult(r.rule, SKIPPED, "not checked", f"not planned: neither run planned the {what}")
    if r.rule == "cause_rows" and not [row for row in cause_rows(c) if row.base or row.variant or row.empty]:
        why = "not planned: neither run planned a pass pair or scenario that a cause row compares"
        return RuleResult(r.rule, SKIPPED, "not checked", why)
    return r


# ---------------------------------------------------------------- rules


def runs_named(c: Comparison, names: Sequence[str]) -> list[tuple[str, ScoredRun]]:
    return [(n, c.base if n == "base" else c.variant) for n in names]


def rule_cold_warm_equality(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    b, v = c.base.scores.agreement.get("cold_warm"), c.variant.scores.agreement.get("cold_warm")
    name = "cold_warm_equality"
    if b is None or v is None:
        return RuleResult(name, NO_DATA, "no cold/warm pairs", "variant >= base")
    need = b.text_equal - p["allowed_drop"]
    measured = f"variant {v.text_equal}/{v.n_total}, base {b.text_equal}/{b.n_total}"
    threshold = f"variant >= base - {p['allowed_drop']} = {need}"
    ok = v.text_equal >= need
    rows = (RowRef(AGREEMENT, "cold_warm_text", not ok),)
    return RuleResult(name, PASS if ok else FAIL, measured, threshold, rows=rows)


def rule_warm_repeat_equality(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    v = c.variant.scores.agreement.get("warm_repeat")
    name = "warm_repeat_equality"
    if v is None or v.n_total == 0:
        return RuleResult(name, NO_DATA, "the variant run has no warm/repeat pairs", "a repeat pass")
    share = v.text_equal / v.n_total
    threshold = f">= {p['min_fraction']:g} of N ({p['min_fraction'] * v.n_total:g}/{v.n_total})"
    ok = share >= p["min_fraction"]
    detail = "" if ok else _pair_problems(v.errors, v.invalid, v.missing)
    rows = (RowRef(AGREEMENT, "warm_repeat_text", not ok),)
    return RuleResult(
        name, PASS if ok else FAIL, f"variant {v.text_equal}/{v.n_total}", threshold, detail, rows
    )


def _pair_problems(errors: int, invalid: int, missing: int) -> str:
    parts = [
        f"{n} {what}" for n, what in ((errors, "errored"), (invalid, "invalid"), (missing, "missing")) if n
    ]
    return ("pairs not compared: " + ", ".join(parts)) if parts else ""


def rule_cold_scores(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    name, tol = "cold_scores", p["tolerance_points"]
    acc_v = {a.dataset: a for a in c.variant.scores.accuracy}
    cross = {x.dataset: x for x in c.cross}
    measured, failing, missing = [], [], []
    for b in c.base.scores.accuracy:
        x = cross[b.dataset]
        if x.n_total and x.text_equal == x.n_total:
            measured.append(f"{b.dataset} cold outputs identical {x.text_equal}/{x.n_total}")
            continue
        bs = b.passes.get("cold")
        vs = acc_v[b.dataset].passes.get("cold") if b.dataset in acc_v else None
        if bs is None or vs is None or bs.score is None or vs.score is None:
            missing.append(b.dataset)
            continue
        diff = vs.score - bs.score
        measured.append(f"{b.dataset} {vs.score:.2f} vs base {bs.score:.2f} ({diff:+.2f})")
        if abs(diff) > tol + 1e-9:
            failing.append(b.dataset)
    threshold = f"|variant - base| <= {tol:g} points per dataset, or identical cold outputs"
    rows = tuple(RowRef(ACCURACY, b.dataset, b.dataset in failing) for b in c.base.scores.accuracy)
    if missing:
        return RuleResult(name, NO_DATA, "no cold score for " + ", ".join(missing), threshold, rows=rows)
    status = FAIL if failing else PASS
    return RuleResult(
        name,
        status,
        "; ".join(measured),
        threshold,
        ("outside tolerance: " + ", ".join(failing)) if failing else "",
        rows,
    )


def rule_no_invalid_warm(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = []
    for side, run in runs_named(c, p["runs"]):
        inv = run.scores.invalid
        counts.append((side, inv.warm_attempts if p["count_recovered"] else inv.warm_final))
    measured = ", ".join(f"{side} {n}" for side, n in counts)
    what = "invalid warm attempts" if p["count_recovered"] else "warm samples still invalid"
    ok = all(n <= p["max"] for _, n in counts)
    rows = (RowRef(CACHE, "invalid_warm_attempts" if p["count_recovered"] else "invalid_warm_final", not ok),)
    return RuleResult(
        "no_invalid_warm", PASS if ok else FAIL, f"{what}: {measured}", f"<= {p['max']} per run", rows=rows
    )


def rule_no_errors(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    counts = [(side, run.scores.errors) for side, run in runs_named(c, p["runs"])]
    ok = all(n <= p["max"] for _, n in counts)
    measured = "errored requests: " + ", ".join(f"{side} {n}" for side, n in counts)
    rows = (RowRef(CACHE, "errors", not ok),)
    return RuleResult("no_errors", PASS if ok else FAIL, measured, f"<= {p['max']} per run", rows=rows)


# the timing rules: rule -> the paired measure it reads (eval/analyze/timing.TIMING_MEASURES)
TIMING_RULES = {"warm_prefill_change": "warm_prefill_ms", "cold_prefill_change": "cold_prefill_ms"}
# the three-way rule's middle outcome (no verdict, thin): its result's detail starts with this
STRADDLES = "interval straddles the limit"


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
        parts[-1] = f"{multiple:g} x A/A floor {m.floor_pct:.1f}% = {multiple * m.floor_pct:+.1f}%"
    limit = min(limits)
    threshold = f"upper end of the {ci} <= " + " and <= ".join(parts)
    return WarmPrefillLimit(limit, threshold + (f" (the smaller: {limit:+.1f}%)" if len(limits) > 1 else ""))


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
    """Three-way (docs/gate-policy.md "Timing rules"): PASS when the gated interval's upper end is <= the limit,
    FAIL when its lower end is above it (a confident regression beyond the limit), else no verdict."""
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
    measured = (
        f"{ch.estimate:+.1f}% [{ch.ci_label} {ch.low:+.1f}%, {ch.high:+.1f}%] over {ch.n_inputs} inputs"
    )
    threshold += f"; FAIL when its lower end > {limit:+.1f}%"
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


def undecided(r: RuleResult) -> bool:
    """A timing rule whose interval straddles its limit: measured but undecided, not missing data."""
    return r.status == NO_DATA and r.detail.startswith(STRADDLES)


def no_data_reason(r: RuleResult) -> str:
    """The no-verdict reason of a rule result with no data (a timing interval across its limit: undecided)."""
    if undecided(r):
        return f"rule {r.rule} is undecided: {r.measured}: {r.detail}"
    return f"rule {r.rule} has no data: {r.measured}"


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


def rule_cache_reports_consistent(c: Comparison, p: Mapping[str, Any]) -> RuleResult:
    """Records where usage's cached tokens and the server's own prefix-cache hit count disagree (a clean
    window: eval/records/server_figures.py), per listed run: at most `max`."""
    counts = [
        (side, sum(r.cache_finding is not None for r in run.loaded.records))
        for side, run in runs_named(c, p["runs"])
    ]
    ok = all(n <= p["max"] for _, n in counts)
    measured = "usage vs server hit count disagree: " + ", ".join(f"{side} {n}" for side, n in counts)
    detail = "" if ok else _first_finding(c, p["runs"])
    rows = (RowRef(CACHE, "cache_findings", not ok),)
    return RuleResult(
        "cache_reports_consistent", PASS if ok else FAIL, measured, f"<= {p['max']} per run", detail, rows
    )


def _first_finding(c: Comparison, names: Sequence[str]) -> str:
    for side, run in runs_named(c, names):
        for r in run.loaded.records:
            if r.cache_finding is not None:
                return f"first: {side} {r.dataset}/{r.example_id} {r.pass_name}: {r.cache_finding}"
    return ""


RULES: dict[str, Callable[[Comparison, Mapping[str, Any]], RuleResult]] = {
    "cold_warm_equality": rule_cold_warm_equality,
    "warm_repeat_equality": rule_warm_repeat_equality,
    "cold_scores": rule_cold_scores,
    "no_invalid_warm": rule_no_invalid_warm,
    "no_errors": rule_no_errors,
    "cache_reports_consistent": rule_cache_reports_consistent,
    "warm_prefill_change": rule_warm_prefill_change,
    "cold_prefill_change": rule_cold_prefill_change,
    # cold numerics across variants against the base's own noise (eval/gate/cross_numerics.py)
    "cross_variant_cold": cross_numerics.rule_cross_variant_cold,
    # the scenarios' rules (eval/gate/scenario_rules.py)
    "hitlen_cache_honoured": scenario_rules.rule_hitlen_cache_honoured,
    "batch_invariant": scenario_rules.rule_batch_invariant,
    "hitlen_equality": scenario_rules.rule_hitlen_equality,
    "repeats_single_output": scenario_rules.rule_repeats_single_output,
    "traffic_invariant": scenario_rules.rule_traffic_invariant,
    # every cause row relative to the base, and the absolute cache isolation check (eval/gate/cause_rules.py)
    "cause_rows": cause_rules.rule_cause_rows,
    "cache_isolation": cause_rules.rule_cache_isolation,
}


def evaluate(c: Comparison, policy: Policy) -> Verdict:
    results = []
    for name, fn in RULES.items():
        params = policy.rules.get(name)
        if params is None:
            results.append(RuleResult(name, SKIPPED, "not checked", "not in the policy"))
        elif not params["enabled"]:
            results.append(RuleResult(name, SKIPPED, "not checked", "disabled in the policy"))
        else:  # a rule that needs a verified cache state: eval/gate/cache_state.py
            result = cache_state.guarded(name, fn, c, params, policy.data["accept_unverified_cache"])
            results.append(not_planned(c, result))
    blocking = blocking_reasons(c, policy)
    if blocking:  # nothing measured on these runs can be trusted, a failure no more than a pass
        return Verdict(EXIT_NO_VERDICT, results, blocking, policy.source)
    if any(r.status == FAIL for r in results):
        # a rule that fails on whole, matched, undamaged runs is a finding, even where other rules or the valid
        # pairs are too thin to judge (they are listed as no data): a fault that makes warm requests invalid
        # must FAIL on its own row, not hide behind the no-verdict it causes
        return Verdict(EXIT_FAIL, results, policy=policy.source)
    reasons = thin_reasons(c, policy)
    reasons += [no_data_reason(r) for r in results if r.status == NO_DATA]
    if not any(r.status == PASS for r in results) and not reasons:
        reasons.append("the policy checks no rule")
    if reasons:
        return Verdict(EXIT_NO_VERDICT, results, reasons, policy.source)
    return Verdict(EXIT_PASS, results, policy=policy.source)
