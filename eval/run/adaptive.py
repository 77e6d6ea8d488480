"""Adaptive timing repetitions (`lbeval ab --timing-until PCT [--timing-budget S]`).

After the session's planned units, more repetitions of the timing units are added in rounds until the paired
timing intervals' half-widths are at most PCT % (below), or the next input's segment would overrun the
server-seconds budget (both servers' busy seconds in the pairing; the dearest segment so far is what the next
is assumed to cost), or MAX_REPS repetitions. A round gives every input with timing units `round_reps` more
repetitions (the planned count made even, at least 2), input by input in the session's input order, each
input's repetitions back to back (`round_segments`); each pair's AB/BA order comes from eval/run/ab.pair_orders
over the plan extended by these units, so the orders depend only on the seed and the plan. Why back to back:
the gated interval treats inputs as independent, which holds when each input's pairs are close in time, as in
the planned phase; a round of one repetition per input across all inputs spreads every disturbance of a few
seconds over many inputs at once, and one-sided bursts then make the gated interval exclude 0 in 16-38 % of
simulated A/A sessions (`python -m bench adaptive`, docs/adaptive.md).

Four intervals are looked at after every AB/BA block of two pairs (and at the end of an input's segment), two
for the warm prefill and two for the cold one (a timing unit sends both, and the gate reads both), and the
target is met only when every half-width is at most PCT (the widest decides; the record keeps all four and the
reason names the widest):
- an always-valid confidence sequence (scorers/sequential.asymptotic_cs, alpha 0.05, rho2 tuned for the planned
  pairs, no bounds before CS_MIN_N pairs) on the per-pair log ratios log(b / a) of the server prefill times
  of the adjacent timing pairs, in send order: stopping at the first look whose half-width is small enough does
  not make the interval too narrow, as a fixed-sample interval recomputed after every pair would;
- the gated interval (scorers.paired_timing.gated_timing_change: the trimmed mean of the per-input mean log
  ratios, Yuen's 97.5 % t), the one the gate reads, on the same pairs: without it a session could stop on the
  sequence's half-width while the gated interval is still wider than PCT (seen in real A/A sessions:
  sequence 8.9 %, gated [-10.4, +8.9] %). It is a fixed-sample interval, but the stop reads its width, not
  where it lies, and only together with the sequence's.
A server figure that is not the request's own (eval/records/server_figures.own_prefill_s) enters none. A look
without cold pairs (the tests' made-up looks) reads the warm pair of intervals only. The records of the added
repetitions are ordinary timing records; the decision (target, budget, repetitions, why it stopped) is
written to both run folders as `adaptive.json` (`AdaptiveRecord`), which the report reads. A resumed session
redoes the round the records show it was killed in (its complete units are not sent again). Before each added
round the record is written as "running" with the round counted, so a session killed inside a round leaves its
added records in the plan (resumable, not damage).

With `--stop-when-settled` as well, the phase also stops when the gate's verdict has settled (stopped
"settled"): before every input's segment the session's stop check is asked with every input run and the rounds' per-pair
log ratios (`PairRatios`, warm and cold); eval/gate/settle.py settles a timing rule there only when the gate's
three-way result on the data so far and this confidence sequence decide it the same way. The sequence is
always valid, so stopping at the first such look keeps its error rate; requiring the gate to agree only makes
a stop rarer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.atomic import atomic_write
from eval.records.ab_pairs import PairRecord
from eval.records.final import select_final
from eval.records.server_figures import own_prefill_s
from eval.records.types import RequestRecord
from eval.records.vocabulary import UNIT_TIMING
from eval.run.steps import Unit, timing_steps
from scorers.paired_timing import gated_timing_change
from scorers.sequential import asymptotic_cs, asymptotic_rho2

ADAPTIVE_NAME = "adaptive.json"
# 2 adds the gated and the cold half-widths (a version 1 record reads with them None)
ADAPTIVE_SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
CS_ALPHA = 0.05
CS_MIN_N = 10
MAX_REPS = 50


@dataclass(frozen=True)
class TimingTarget:
    """--timing-until PCT: the half-width to reach (percent); --timing-budget S: server-seconds at most."""

    until_pct: float
    budget_s: float | None = None
    max_reps: int = MAX_REPS


@dataclass(frozen=True)
class AdaptiveRecord:
    schema_version: int
    until_pct: float
    budget_s: float | None
    reps_planned: int
    reps_done: int  # the most repetitions any input got (planned + added)
    pairs: int  # timing pairs the confidence sequence was computed on
    half_width_pct: float | None  # the sequence's, of the last look (None: fewer than CS_MIN_N pairs)
    spent_s: float
    stopped: str  # "target", "settled", "budget", "max_reps", "interrupted"; "running" while a round runs
    reason: str  # in words
    gated_half_width_pct: float | None = None  # the warm gated interval's (None: not computable)
    cold_half_width_pct: float | None = None  # the cold prefill's sequence (None: no cold pairs, or too few)
    cold_gated_half_width_pct: float | None = None  # the cold prefill's gated interval

    def headline(self) -> str:
        return (f"{self.pairs} timing pairs, up to {self.reps_done} repetitions per input (planned "
                f"{self.reps_planned}): {self.reason}")  # fmt: skip


def write_adaptive(run_dir: Path, record: AdaptiveRecord) -> None:
    atomic_write(run_dir / ADAPTIVE_NAME, json.dumps(asdict(record), indent=1) + "\n")


def read_adaptive(run_dir: Path) -> AdaptiveRecord | None:
    """The session's adaptive record, or None (no --timing-until, or a damaged file: then no claim is made)."""
    path = run_dir / ADAPTIVE_NAME
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return AdaptiveRecord(**data) if data.get("schema_version") in READABLE_VERSIONS else None
    except (OSError, ValueError, TypeError):
        return None


def timing_rows(units: list[Unit]) -> list[int]:
    """The inputs (row indexes) that have timing units, in the order `units` first name them."""
    return list(dict.fromkeys(u.row_index for u in units if u.kind == UNIT_TIMING))


def extra_units(units: list[Unit], repetition: int) -> list[Unit]:
    """Repetition `repetition` of the timing unit of every input that has timing units in the plan."""
    return [Unit(i, UNIT_TIMING, repetition, timing_steps(repetition)) for i in sorted(timing_rows(units))]


def added_units(units: list[Unit], max_reps: int) -> list[Unit]:
    """Every unit the phase could add, repetition by repetition: the order in which eval/run/ab.pair_orders draws
    their AB/BA orders over the extended plan (not the send order: `added_order`)."""
    return [u for r in range(planned_reps(units), max_reps) for u in extra_units(units, r)]


def planned_pairs(units: list[Unit]) -> int:
    """The planned timing pairs: the horizon the confidence sequence is tuned for."""
    return planned_reps(units) * len(timing_rows(units))


def planned_reps(units: list[Unit]) -> int:
    return max((u.repetition + 1 for u in units if u.kind == UNIT_TIMING), default=0)


def reps_recorded(records: list[RequestRecord]) -> int:
    """Timing repetitions the records show (1 + the highest repetition of a timing pass), 0 without any."""
    reps = [r.repetition + 1 for r in records if r.pass_name in ("timing_cold", "timing_warm")]
    return max(reps, default=0)


def _prefill(records: list[RequestRecord], pass_name: str) -> dict[tuple[str, str, int], tuple[int, float]]:
    """(dataset, example_id, repetition) -> (seq, server prefill seconds) of each ok final record of the pass
    whose figures are its own."""
    out: dict[tuple[str, str, int], tuple[int, float]] = {}
    for slot, rec in select_final(records).final.items():
        value = own_prefill_s(rec)
        if slot.pass_name == pass_name and rec.status == "ok" and value is not None and value > 0:
            out[(slot.dataset, slot.example_id, slot.repetition)] = (rec.seq, value)
    return out


@dataclass(frozen=True)
class InputRatio:
    input_id: str  # "<dataset>/<example_id>", as in eval/analyze/ab_timing.paired_values
    log_ratio: float


def input_ratios(
    pairs: list[PairRecord],
    records_a: list[RequestRecord],
    records_b: list[RequestRecord],
    pass_name: str = "timing_warm",
) -> list[InputRatio]:
    """log(b / a) of the server prefill of `pass_name` (timing_warm or timing_cold) of every adjacent timing
    pair, in send order, with its input."""
    wa, wb = _prefill(records_a, pass_name), _prefill(records_b, pass_name)
    out = []
    for p in pairs:
        key = (p.dataset, p.example_id, p.repetition)
        if p.kind != UNIT_TIMING or not p.adjacent or key not in wa or key not in wb:
            continue
        (sa, va), (sb, vb) = wa[key], wb[key]
        if sa in p.a.seqs and sb in p.b.seqs:
            out.append(InputRatio(f"{p.dataset}/{p.example_id}", math.log(vb / va)))
    return out


def half_width_pct(ratios: list[float], horizon: int) -> float | None:
    """The half-width in percent of the confidence sequence at its last look; None before CS_MIN_N pairs."""
    if len(ratios) < CS_MIN_N:
        return None
    cs = asymptotic_cs(
        ratios, rho2=asymptotic_rho2(max(horizon, 1), alpha=CS_ALPHA), alpha=CS_ALPHA, min_n=CS_MIN_N
    )
    return 50.0 * (math.expm1(cs.highs[-1]) - math.expm1(cs.lows[-1]))


def gated_half_width_pct(ratios: Sequence[float], inputs: Sequence[str]) -> float | None:
    """The half-width in percent of the gated interval over these pairs (None: fewer than two inputs)."""
    if len(set(inputs)) < 2 or len(inputs) != len(ratios):
        return None
    ch = gated_timing_change(list(inputs), np.ones(len(ratios)), np.exp(np.asarray(ratios, dtype=np.float64)))
    return (ch.ci_high - ch.ci_low) / 2.0


@dataclass(frozen=True)
class Look:
    """What the loop is shown after a pair: the warm log ratios so far with each one's input, the
    server-seconds spent, and the cold log ratios with theirs."""

    ratios: list[float]
    spent_s: float
    cold: list[float] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)  # the input of each warm ratio
    cold_inputs: list[str] = field(default_factory=list)  # the input of each cold ratio


@dataclass(frozen=True)
class Width:
    """One interval's half-width at a look, in percent (None: not computable yet)."""

    name: str  # "warm, 95% CS", "warm, gated", "cold, 95% CS", "cold, gated"
    half_pct: float | None


@dataclass(frozen=True)
class Widths:
    """The half-widths of a look: the sequence's and the gated interval's of the warm prefill, and of the cold
    prefill when the look has cold pairs (a timing unit sends both; the gate reads both)."""

    widths: tuple[Width, ...]

    def of(self, name: str) -> float | None:
        return next((w.half_pct for w in self.widths if w.name == name), None)

    def met(self, until_pct: float) -> bool:
        return all(w.half_pct is not None and w.half_pct <= until_pct for w in self.widths)

    def words(self) -> str:
        return "half-widths " + ", ".join(f"{w.name} {_hw(w.half_pct)}" for w in self.widths)

    def widest(self) -> str:
        """The interval that decides the target: one not yet computable, else the widest."""
        missing = [w.name for w in self.widths if w.half_pct is None]
        return missing[0] if missing else max(self.widths, key=lambda w: w.half_pct or 0.0).name


def widths(seen: Look, horizon: int) -> Widths:
    out = [Width("warm, 95% CS", half_width_pct(seen.ratios, horizon)),
           Width("warm, gated", gated_half_width_pct(seen.ratios, seen.inputs))]  # fmt: skip
    if seen.cold:
        out += [Width("cold, 95% CS", half_width_pct(seen.cold, horizon)),
                Width("cold, gated", gated_half_width_pct(seen.cold, seen.cold_inputs))]  # fmt: skip
    return Widths(tuple(out))


@dataclass(frozen=True)
class PairRatios:
    """What the stop check is shown in the adaptive phase: per-pair log ratios (variant / base server prefill)
    of the adjacent timing pairs in send order, by the comparison's measure name (warm_prefill_ms,
    cold_prefill_ms), and the horizon the confidence sequence is tuned for (the planned timing pairs)."""

    by_measure: Mapping[str, tuple[float, ...]]
    horizon: int


def pair_ratios(seen: Look, units: list[Unit]) -> PairRatios:
    """The look's ratios for the stop check, tuned like the adaptive phase's own sequence."""
    by_measure = {"warm_prefill_ms": tuple(seen.ratios), "cold_prefill_ms": tuple(seen.cold)}
    return PairRatios(by_measure, planned_pairs(units))


@dataclass(frozen=True)
class Hooks:
    """extend_timing's callbacks: `send(unit)` runs one unit's pair (False: the session was stopped), `look()`
    reads the pairs so far, `settled(look)` a reason to stop when the gate's verdict has settled (None: not,
    or no --stop-when-settled), `progress(record)` writes the record before each round."""

    send: Callable[[Unit], bool]
    look: Callable[[], Look]
    settled: Callable[[Look], str | None] = lambda _seen: None
    progress: Callable[[AdaptiveRecord], None] = lambda _record: None


def round_reps(planned: int) -> int:
    """Repetitions an added round gives each input (module docstring): the planned count made even, at least 2."""
    return max(2, planned + planned % 2)


def rounds(planned: int, max_reps: int) -> Iterator[tuple[int, int]]:
    """The added rounds [first, end): they follow one another from the planned count on, each ending on an even
    repetition count so that an input's AB/BA blocks (repetitions 2k and 2k + 1, eval/run/ab.pair_orders) never
    straddle two rounds; the last clipped at max_reps."""
    first, step = planned, round_reps(planned)
    while first < max_reps:
        end = min(first + step - first % 2, max_reps)
        yield first, end
        first = end


def round_segments(units: list[Unit], first: int, end: int) -> list[list[Unit]]:
    """An added round in send order: per input (in the order `units` first name them), its repetitions first ..
    end-1 back to back."""
    return [[Unit(i, UNIT_TIMING, r, timing_steps(r)) for r in range(first, end)] for i in timing_rows(units)]


def added_order(units: list[Unit], max_reps: int = MAX_REPS) -> list[Unit]:
    """Every unit the adaptive phase could add, in the order it sends them (the simulations' schedule)."""
    spans = rounds(planned_reps(units), max_reps)
    return [u for first, end in spans for segment in round_segments(units, first, end) for u in segment]


def extend_timing(target: TimingTarget, units: list[Unit], recorded: int, hooks: Hooks) -> AdaptiveRecord:
    """Add repetitions (module docstring); `recorded`: the timing repetitions the runs already hold (a resumed
    session redoes the round it was killed in; its complete units are not sent again)."""
    planned, horizon = planned_reps(units), planned_pairs(units)
    state = _Phase(target, horizon, planned, hooks, max(recorded, planned))  # done: what some input holds
    resume = max(recorded - 1, planned)  # a repetition of the round to start with
    seen = hooks.look()
    for first, end in rounds(planned, target.max_reps):
        if end <= resume:
            continue  # a round a resumed session already sent
        for k, segment in enumerate(round_segments(units, first, end)):
            stop = state.check(seen)
            if stop is not None:
                return stop
            if k == 0:  # the round is in the plan before any of it is sent (a kill inside leaves no damage)
                hooks.progress(state.record("running", f"adding repetitions {first + 1}-{end} (if no session "
                                            "runs: interrupted)", seen, max(state.done, end)))  # fmt: skip
            stop, seen = state.segment(segment, seen)
            if stop is not None:
                return stop
    why = f"{state.done} repetitions, the most added" if timing_rows(units) else "no timing units to add"
    return state.check(seen) or state.record("max_reps", f"{why} ({widths(seen, horizon).words()})", seen)


@dataclass
class _Phase:
    """The adaptive phase's running state: the repetitions some input holds, the dearest input segment so far
    (what the next one is assumed to cost against the budget)."""

    target: TimingTarget
    horizon: int
    planned: int
    hooks: Hooks
    done: int
    segment_s: float = 0.0

    def record(self, stopped: str, reason: str, seen: Look, done: int | None = None) -> AdaptiveRecord:
        w = widths(seen, self.horizon)
        return AdaptiveRecord(ADAPTIVE_SCHEMA_VERSION, self.target.until_pct, self.target.budget_s,
                              self.planned, self.done if done is None else done, len(seen.ratios),
                              w.of("warm, 95% CS"), seen.spent_s, stopped, reason, w.of("warm, gated"),
                              w.of("cold, 95% CS"), w.of("cold, gated"))  # fmt: skip

    def check(self, seen: Look) -> AdaptiveRecord | None:
        """The stop before the next input segment (target, settled, budget), or None."""
        w = widths(seen, self.horizon)
        if w.met(self.target.until_pct):
            return self.record(
                "target", f"{w.words()} <= {self.target.until_pct:g}%; the widest: {w.widest()}", seen
            )
        why_settled = self.hooks.settled(seen)
        if why_settled is not None:
            return self.record("settled", f"the gate's verdict settled ({why_settled})", seen)
        budget = self.target.budget_s
        if budget is not None and seen.spent_s + self.segment_s > budget:
            why = f"the budget of {budget:g} server-seconds would be overrun (spent {seen.spent_s:.1f} s"
            return self.record("budget", f"{why}, {w.words()})", seen)
        return None

    def segment(self, segment: list[Unit], seen: Look) -> tuple[AdaptiveRecord | None, Look]:
        """One input's repetitions of a round, looked at after each AB/BA block (an odd repetition) and at the
        segment's end; a stop record when the target is met inside it or the session was stopped."""
        before = seen.spent_s
        for unit in segment:
            if not self.hooks.send(unit):
                return self.record("interrupted", "the session was stopped", self.hooks.look(),
                                   max(self.done, unit.repetition + 1)), seen  # fmt: skip
            self.done = max(self.done, unit.repetition + 1)
            if unit.repetition % 2 == 1 or unit is segment[-1]:
                seen = self.hooks.look()
                if widths(seen, self.horizon).met(self.target.until_pct):
                    return self.check(seen), seen
        self.segment_s = max(self.segment_s, seen.spent_s - before)
        return None, seen


def _hw(hw: float | None) -> str:
    return "not yet computable" if hw is None else f"{hw:.1f}%"
