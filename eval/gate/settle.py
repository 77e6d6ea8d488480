"""Time to verdict: is the gate's verdict already settled after k of N inputs? (`lbeval ab --stop-when-settled`)

`stop_check(policy)` is the callback eval/commands/ab.py gives eval/run/ab.execute_ab: after each input it scores
the two partial runs on the inputs sent so far (the same analysis the gate reads) and settles every enabled rule
with an error control that stays valid when looking after every input:

- count rules, exact (how "count"): the records already sent are final records the full run's gate counts too,
  so a rule whose count can no longer come back whatever the remaining N - k inputs give is settled, with no
  error at all against the full run. warm_repeat_equality (k/N >= min_fraction: N/N by default) settles FAIL
  at the first counted mismatch that leaves fewer equal pairs than min_fraction x N even if every remaining
  input agrees; that mismatch is "reproducible" in the sense that it is a final record (after
  the runner's bounded retries and re-primes of a warm miss), which the full run cannot undo; lbeval does not
  re-send it to confirm it. cold_warm_equality (variant >= base - allowed_drop) settles FAIL when the variant
  cannot catch up even if it agrees on every remaining input and the base on none, PASS when it stays ahead
  even if the reverse happens. no_errors and no_invalid_warm settle FAIL as soon as a listed run's count
  exceeds max. None of them settles PASS before the last input: the next input could be the mismatch.
- warm_prefill_change and cold_prefill_change (how "cs"): the asymptotic confidence sequence
  (scorers/sequential.asymptotic_cs, alpha 0.05, rho2 tuned for t* = N, no bounds before min_n = 10 inputs) on
  the per-input mean paired log ratio (variant / base server prefill time, adjacent pairs of the interleaved
  session): PASS when its upper end is <= the limit, FAIL when its lower end is above it. Stopping at the
  first settled look keeps the error rate <= 5 % (asymptotically). The full run's gate reads the gated
  interval (trimmed mean, Yuen 97.5 %) three-way instead; a stopped session's gate reads the CS (the decision
  the session stopped on). A gated interval across the limit is undecided, not missing: the CS may settle it.
  In an adaptive timing phase (`--timing-until`, every input run: how "adaptive cs") a timing rule settles
  only when the gate's three-way result on the data so far and the confidence sequence on the rounds'
  per-pair log ratios (eval/run/adaptive.py's, tuned for the planned pairs) agree; the phase then stops.
- cause_rows (how "count"): FAIL as soon as a row both runs measured has more pairs with other tokens in the
  variant than the base could still reach, its count plus allowed_drop plus the pairs of that row the
  remaining inputs plan (bounded per input by the inputs run: `remaining_pairs`); its max |delta| part and a
  PASS settle with the full run. cache_isolation (how "count"): FAIL at the first leak (a record already
  sent that found cached tokens under a fresh salt is final); a PASS settles with the full run.
- cold_scores, cross_variant_cold (its limit is the base's own noise, which later inputs may raise) and the
  scenario rules (how "full run") settle only when every input has run; a scenario rule
  that skips itself on this plan (no such scenario in either run) is "skipped", as the full run's gate would.

The session stops when one rule settled FAIL (a FAIL verdict cannot turn into a PASS; the rules still open are
shown as not settled), or when every enabled rule settled PASS (or skips itself). The data reasons follow the
gate's own order (rules.evaluate): a blocking reason (runs that differ, damage, an incomplete input) stops
every stop; a thin one (no cold/warm passes, too few valid pairs) or a rule with no data stops a PASS only,
since the gate FAILs a rule measured on whole runs whatever the thin data says (a timing-only plan's
+50% warm slowdown stops at its planned repetitions). The full run would otherwise most likely give no
verdict either, and a stop must not turn that into a verdict.

The gate on a stopped session (`compare_and_gate`) scores both runs on the inputs run only (the denominators
are k, stated), recomputes these decisions from the records and gives no verdict when they do not reproduce
the stop record, or when a short run's stop record is missing or damaged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eval.analyze.aa_floor import AaFloor, check_against
from eval.analyze.compare import BOOTSTRAP_RESAMPLES, Comparison, compare
from eval.analyze.memo import ScoreMemo
from eval.analyze.score import ScoredRun, load_inputs, score_loaded
from eval.errors import DataError
from eval.gate.policy import Policy
from eval.gate.registry import rules
from eval.gate.rule import FAIL, NO_DATA, PASS, SKIPPED, Look, Rule, RuleResult, full_run
from eval.gate.rules import Evaluation, evaluation
from eval.gate.ruleset.cause_rows import remaining_pairs
from eval.gate.verdict import EXIT_FAIL, EXIT_NO_VERDICT, EXIT_PASS, Verdict, fold, no_data_reason, undecided
from eval.prepare.inputs import InputRow
from eval.records.codec import record_from_dict
from eval.records.final import ExampleKey, Slot, select_final
from eval.records.plan import beyond_planned_reps, planned_count, planned_inputs
from eval.records.run_folder import RECORDS_NAME, LoadedRun, damage, load_run, read_manifest
from eval.records.stop import (
    NOT_CHECKED,
    OPEN,
    SETTLED_FAIL,
    SETTLED_PASS,
    RuleSettlement,
    Settlement,
    StopRecord,
    read_stop,
)  # fmt: skip
from eval.records.types import RequestRecord
from eval.run.ab import StopQuery
from eval.run.adaptive import PairRatios

__all__ = [
    "GateResult", "IncrementalCheck", "compare_and_gate", "open_at_stop", "remaining_pairs", "restrict",
    "restrict_loaded", "scratch_check", "settle", "settle_evaluated", "stop_check",
]  # fmt: skip

STOP_CHECK_RESAMPLES = 1  # IncrementalCheck's comparison: its bootstrap intervals are read by no settlement
STOPPED_OUTCOME = "stopped early"  # the start of a stopped session's outcome in the manifest (eval/run/ab.py)


# ---------------------------------------------------------------- the partial runs


def restrict(run: ScoredRun, keys: Sequence[ExampleKey], expected: int | None) -> ScoredRun:
    """The run scored on `keys` only (their records, their rows): the denominators are these inputs.
    `expected`: the planned slots of these inputs (None: the planned slots recorded, during a session)."""
    return restrict_loaded(run.loaded, run.rows, run.scores.run.damage, keys, expected)


def restrict_loaded(
    loaded: LoadedRun, rows: Sequence[InputRow], damaged: Sequence[str], keys: Sequence[ExampleKey],
    expected: int | None, memo: ScoreMemo | None = None,
) -> ScoredRun:  # fmt: skip
    """`restrict` from the records as read: `damaged` is the whole run's damage (the partial run is incomplete
    when there is any); `memo`: the per-record results kept between looks (eval/analyze/memo.py)."""
    wanted = set(keys)
    records = [r for r in loaded.records if (r.dataset, r.example_id) in wanted]
    mine = [row for row in rows if row.key in wanted]
    m = loaded.manifest
    slots = {Slot(r.dataset, r.example_id, r.pass_name, r.repetition) for r in records}
    recorded = sum(1 for s in slots if not beyond_planned_reps(m.settings, s))  # adaptive ones are "added"
    manifest = replace(
        m,
        expected_records=recorded if expected is None else expected,
        complete=not damaged,  # the whole run's damage: _view names it
        stats=replace(m.stats, records=0),  # counted over the whole run (0: not counted)
    )
    return score_loaded(replace(loaded, manifest=manifest, records=records), mine, memo)


def _partial(query: StopQuery) -> tuple[ScoredRun, ScoredRun]:
    from_dirs = []
    for run_dir in query.run_dirs:
        loaded = load_run(run_dir)
        from_dirs.append(score_loaded(loaded, load_inputs(loaded.manifest, run_dir)))
    keys = list(query.inputs_run)
    return restrict(from_dirs[0], keys, None), restrict(from_dirs[1], keys, None)


@dataclass
class _RunTail:
    """One side's run folder during a session: its inputs' rows (read once) and its records, of which only the
    lines appended since the last look are read and decoded."""

    run_dir: Path
    rows: list[InputRow] | None = None
    offset: int = 0  # bytes of records.jsonl read so far (whole lines only)
    lines: int = 0
    records: list[RequestRecord] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)  # 1-based line numbers that could not be read

    def read(self) -> LoadedRun:
        manifest = read_manifest(self.run_dir)
        if self.rows is None:
            self.rows = load_inputs(manifest, self.run_dir)
        path = self.run_dir / RECORDS_NAME
        data = b""
        if path.exists():
            with path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read at the next look
        for line in data[:end].splitlines():
            self.lines += 1
            try:
                self.records.append(record_from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                self.torn.append(self.lines)
        self.offset += end
        return LoadedRun(manifest, list(self.records), len(self.torn), self.run_dir, list(self.torn))


class IncrementalCheck:
    """The stop check of one session (`stop_check`), kept between its looks: each side's rows are read once and
    its records incrementally (only the lines appended since the last look), each record's and pair's scoring
    results are kept in a ScoreMemo (eval/analyze/memo.py: a look scores only the records it has not seen, the
    counts and figures are rebuilt from the kept parts), the partial runs are scored on the inputs run (not the
    whole run first, then the inputs run, as `_partial` does), and their comparison draws
    STOP_CHECK_RESAMPLES bootstrap resamples: no settlement reads a bootstrap interval (the timing rule
    settles on its confidence sequence; the gate's other results are read for their status, which a bootstrap
    does not change), and a bootstrap over all inputs run has no per-input part to keep. Its decisions are
    those of `scratch_check` (tests/eval/gate/test_settle_incremental.py); bench/bench_stop_check.py times a
    look of each."""

    def __init__(self, policy: Policy, floor: AaFloor | None = None) -> None:
        self.policy, self.floor = policy, floor
        self._tails: dict[Path, _RunTail] = {}
        self.memo = ScoreMemo()

    def _side(self, run_dir: Path, keys: Sequence[ExampleKey]) -> ScoredRun:
        tail = self._tails.setdefault(run_dir, _RunTail(run_dir))
        loaded = tail.read()
        assert tail.rows is not None
        damaged = damage(loaded, select_final(loaded.records))
        return restrict_loaded(loaded, tail.rows, damaged, keys, None, self.memo)

    def __call__(self, query: StopQuery) -> Settlement:
        keys = list(query.inputs_run)
        base, variant = (self._side(d, keys) for d in query.run_dirs)
        return _settle_look(base, variant, self.policy, self.floor, query, STOP_CHECK_RESAMPLES, self.memo)


def _settle_look(
    base: ScoredRun, variant: ScoredRun, policy: Policy, floor: AaFloor | None, query: StopQuery,
    resamples: int = BOOTSTRAP_RESAMPLES, memo: ScoreMemo | None = None,
) -> Settlement:  # fmt: skip
    c = compare(base, variant, allow_mismatch=True, resamples=resamples, memo=memo)
    if floor is not None:
        check_against(floor, base, variant)  # the A/A runs asked these inputs of this model
        c = replace(c, aa_floor=floor)
    return settle(c, policy, len(query.inputs_run), query.inputs_planned, query.adaptive)


# ---------------------------------------------------------------- the rules


def _one_rule(look: Look, rule: Rule, params: Mapping[str, Any]) -> RuleSettlement:
    result = look.results.get(rule.name)
    # a rule that skips itself on this plan (no such scenario) is skipped by the full run's gate too
    if result is not None and result.status == SKIPPED:
        return RuleSettlement(rule.name, NOT_CHECKED, "skipped", result.threshold)
    # a timing interval across its limit is undecided, not missing: the confidence sequence may settle it
    if result is not None and result.status == NO_DATA and not undecided(result):
        return RuleSettlement(rule.name, OPEN, "no data", result.measured)
    if rule.settle is None:  # settles with the full run only
        return full_run(look, rule.name)
    return rule.settle(look, params)


# a settled rule's state as a rule status, for the verdict fold: open blocks a PASS as no data does
_AS_STATUS = {SETTLED_PASS: PASS, SETTLED_FAIL: FAIL, OPEN: NO_DATA, NOT_CHECKED: SKIPPED}


def settle(c: Comparison, policy: Policy, k: int, n: int, adaptive: PairRatios | None = None) -> Settlement:
    """Every enabled rule's state after k of N inputs, and whether the verdict is settled (module docstring);
    `adaptive`: asked in an adaptive timing phase (every input run), its per-pair ratios."""
    return settle_evaluated(evaluation(c, policy), c, policy, k, n, adaptive)


def settle_evaluated(
    ev: Evaluation, c: Comparison, policy: Policy, k: int, n: int, adaptive: PairRatios | None = None
) -> Settlement:
    """`settle` on the gate's evaluation of `c` (computed once by the caller)."""
    look = Look(c, k, n, {r.rule: r for r in ev.results}, adaptive)
    by_name = {r.name: r for r in rules()}
    settled = tuple(
        _one_rule(look, by_name[name], p)
        for name, p in policy.rules.items()
        if p["enabled"] and name in by_name
    )
    open_ = [r.rule for r in settled if r.state == OPEN]
    # the gate's own fold (eval/gate/verdict.fold): blocking data gives no verdict at all; a FAIL beats thin
    # data; thin data, or a rule not settled yet, stops a PASS
    code, _ = fold([_AS_STATUS[r.state] for r in settled], ev.blocking, ev.thin, open_)
    where = (settled, k, n, policy.source)
    if code == EXIT_FAIL:
        failed = [r for r in settled if r.state == SETTLED_FAIL]
        why = f"settled FAIL: {', '.join(r.rule for r in failed)} ({failed[0].detail})"
        return Settlement(True, SETTLED_FAIL, why, *where)
    if code == EXIT_PASS:
        passed = "; ".join(f"{r.rule} {r.detail}" for r in settled if r.state == SETTLED_PASS)
        return Settlement(True, SETTLED_PASS, f"settled PASS: {passed}", *where)
    data = [*ev.blocking, *ev.thin]
    if data:
        return Settlement(False, OPEN, f"not settled: the data gives no verdict yet ({data[0]})", *where)
    return Settlement(False, OPEN, f"not settled: {', '.join(open_) or 'no rule checked'}", *where)


def stop_check(policy: Policy, floor: AaFloor | None = None) -> Callable[[StopQuery], Settlement]:
    """The callback of `lbeval ab --stop-when-settled` (eval/run/ab.StopCheck): an IncrementalCheck; `floor`:
    the A/A floor of `lbeval ab --aa-floor RUN_A RUN_B` (a policy's max_change_aa_multiple reads it, as the
    gate's does)."""
    return IncrementalCheck(policy, floor)


def scratch_check(policy: Policy, floor: AaFloor | None = None) -> Callable[[StopQuery], Settlement]:
    """The same decisions from scratch: each look re-reads and re-scores both whole runs, then the inputs run."""

    def check(query: StopQuery) -> Settlement:
        base, variant = _partial(query)
        return _settle_look(base, variant, policy, floor, query)

    return check


# ---------------------------------------------------------------- the gate on a stopped session


@dataclass(frozen=True)
class GateResult:
    comparison: Comparison
    verdict: Verdict


def _stopped_outcome(run: ScoredRun) -> bool:
    sessions = run.loaded.manifest.sessions
    return bool(sessions) and (sessions[-1].outcome or "").startswith(STOPPED_OUTCOME)


def _stop_of(base: ScoredRun, variant: ScoredRun) -> tuple[StopRecord | None, list[str]]:
    """The session's stop record (the same in both runs) and why it cannot be used ([]: it can)."""
    stops = []
    for side, run in (("base", base), ("variant", variant)):
        try:
            stops.append(read_stop(run.loaded.run_dir))
        except DataError as exc:
            return None, [f"{side} run {run.scores.run.run_id}: {exc}"]
    if stops[0] is None and stops[1] is None:
        short = [f"{s} run {r.scores.run.run_id}" for s, r in (("base", base), ("variant", variant))
                 if _stopped_outcome(r)]  # fmt: skip
        why = "stopped early by lbeval ab but its stop record (ab_stop.json) is missing"
        return None, [f"{name} {why}" for name in short]
    a, b = stops
    names = tuple(f"{r.loaded.manifest.variant}/{r.loaded.manifest.run_id}" for r in (base, variant))
    if a is None or b is None or replace(a, runs=b.runs, expected_records=b.expected_records) != b:
        return None, ["the two runs' stop records differ (or one is missing)"]
    if set(a.runs) != set(names):
        return None, [f"the stop record names the runs {a.runs[0]} and {a.runs[1]}, not these two"]
    return a, []


def _against_plan(run: ScoredRun, stop: StopRecord, side: int) -> tuple[int, list[str]]:
    """The stop record checked against the run's plan (its manifest, its inputs manifest) and its records: the
    planned slots of the inputs run, recomputed (eval/records/plan.planned_count), and what does not match."""
    name, keys = f"run {run.scores.run.run_id}", list(stop.inputs)
    problems = []
    settings = run.loaded.manifest.settings
    inputs = planned_inputs(settings, run.keys)
    if stop.inputs_planned != len(inputs):
        problems.append(f"the stop record plans {stop.inputs_planned} inputs, but {name}'s plan (its manifest "
                        f"and inputs manifest) has {len(inputs)}")  # fmt: skip
    unknown = [k for k in keys if k not in set(inputs)]
    if unknown:
        problems.append(f"the stop record lists {len(unknown)} input(s) {name} does not plan "
                        f"(first {unknown[0][0]}/{unknown[0][1]})")  # fmt: skip
    if stop.inputs_run >= len(inputs):
        problems.append(f"the stop record stops after {stop.inputs_run} of {len(inputs)} inputs: not early")
    if not _stopped_outcome(run):
        sessions = run.loaded.manifest.sessions
        last = (sessions[-1].outcome or "none") if sessions else "no session"
        problems.append(
            f"{name}'s manifest does not say its session stopped early (last session: {last:.60})"
        )
    cot = [r.key for r in run.rows if r.answer_template is not None]
    planned = planned_count(settings, run.keys, keys, cot, run.selection)
    if planned != stop.expected_records[side]:
        problems.append(f"the stop record counts {stop.expected_records[side]} planned requests for {name}'s "
                        f"inputs run, its plan {planned}")  # fmt: skip
    return planned, problems


def _view(run: ScoredRun, stop: StopRecord, side: int) -> tuple[ScoredRun, list[str]]:
    keys = list(stop.inputs)
    held = {(r.dataset, r.example_id) for r in run.loaded.records}
    beyond = sorted(held - set(keys))
    problems = [f"run {run.scores.run.run_id} holds records of {len(beyond)} input(s) the stop record does not "
                f"list (first {beyond[0][0]}/{beyond[0][1]})"] if beyond else []  # fmt: skip
    problems += [f"run {run.scores.run.run_id} is damaged: {d}" for d in run.scores.run.damage]
    if len(keys) != stop.inputs_run or len(set(keys)) != len(keys):
        problems.append("the stop record's inputs do not match its count")
    planned, mismatched = _against_plan(run, stop, side)  # the counts recomputed, not trusted
    return restrict(run, keys, planned), problems + mismatched


def open_at_stop(settlement: Settlement, s: RuleSettlement) -> str:
    """A rule the session stopped before it settled: it was not checked, and says after how many inputs the
    session stopped and how it would have settled (never "settled after": it did not)."""
    return (
        f"not settled when the session stopped after {settlement.inputs_run} of {settlement.inputs_planned} "
        f"inputs ({s.how})"
    )


def _stopped_results(results: Sequence[RuleResult], settlement: Settlement) -> list[RuleResult]:
    """The gate's rule results on the inputs run, each settled rule's replaced by its settled decision."""
    by_rule = {r.rule: r for r in settlement.rules}
    out = []
    for r in results:
        s = by_rule.get(r.rule)
        if s is None or s.state == NOT_CHECKED:
            out.append(r)
            continue
        if s.state == OPEN:
            out.append(RuleResult(r.rule, SKIPPED, "not checked", open_at_stop(settlement, s)))
        else:
            where = f"settled after {settlement.inputs_run} of {settlement.inputs_planned} inputs ({s.how})"
            status = PASS if s.state == SETTLED_PASS else FAIL
            out.append(RuleResult(r.rule, status, s.detail, f"{r.threshold}; {where}", r.detail, r.rows))
    return out


def _reproduces(stop: StopRecord, again: Settlement) -> list[str]:
    if not again.settled or again.decision != stop.decision:
        return [
            f"the stop record's decision ({stop.decision}) does not reproduce from the records: {again.reason}"
        ]
    recorded = {r.rule: r for r in stop.rules}
    for r in again.rules:
        old = recorded.get(r.rule)
        same = (
            old is not None
            and old.state == r.state
            and all(
                (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-6)
                for x, y in ((old.low_pct, r.low_pct), (old.high_pct, r.high_pct))
            )
        )
        if not same:
            return [
                f"rule {r.rule}: the stop record's decision does not reproduce from the records ({r.detail})"
            ]
    if set(recorded) != {r.rule for r in again.rules}:
        return ["the stop record settled other rules than this policy enables"]
    return []


def compare_and_gate(
    base: ScoredRun,
    variant: ScoredRun,
    policy: Policy,
    *,
    allow_mismatch: bool,
    seed: int,
    adjust: Callable[[Comparison], Comparison] | None = None,
) -> GateResult:
    """The comparison (passed through `adjust`, e.g. the A/A floor) and the gate's verdict; for a stopped
    `lbeval ab` session, on the inputs run, following the decisions recomputed from the records (docstring)."""
    fix = adjust or (lambda c: c)
    stop, problems = _stop_of(base, variant)
    if stop is None:
        c = fix(compare(base, variant, allow_mismatch=allow_mismatch, seed=seed))
        verdict = evaluation(c, policy).verdict
        if problems:
            verdict = Verdict(EXIT_NO_VERDICT, verdict.results, [*problems, *verdict.reasons], verdict.policy)
        return GateResult(c, verdict)
    side_a = 0 if stop.runs[0] == f"{base.loaded.manifest.variant}/{base.loaded.manifest.run_id}" else 1
    vb, pb = _view(base, stop, side_a)
    vv, pv = _view(variant, stop, 1 - side_a)
    c = fix(compare(vb, vv, allow_mismatch=allow_mismatch, seed=seed))
    ev = evaluation(c, policy)
    again = settle_evaluated(ev, c, policy, stop.inputs_run, stop.inputs_planned)
    results = _stopped_results(ev.results, again)
    problems = [*pb, *pv, *_reproduces(stop, again), *ev.blocking]
    missing = [no_data_reason(r) for r in results if r.status == NO_DATA]
    code, reasons = fold([r.status for r in results], problems, ev.thin, missing)
    return GateResult(c, Verdict(code, results, reasons, policy.source, stopped=stop.headline()))
