"""The gated interval after an adaptive stop (`lbeval ab --timing-until`), in simulated A/A sessions.

`--timing-until PCT` stops adding repetitions at the first look where the half-widths of both the always-valid
confidence sequence and the gated interval (Yuen's 97.5 % t on the per-input means, what the gate reads) are
at most PCT (eval/run/adaptive.py). The gated interval is a fixed-sample interval: stopping when its width
first falls under a target picks looks where the spread happened to be small, which could make it exclude 0
more often than it does at a fixed number of repetitions. This bench measures that.

Each simulated session is bench/bench_coverage.py's pair-level A/A model (12 inputs, passes cold, warm and
timing, PLANNED repetitions in eval/run/ab.session_order with eval/run/ab.pair_orders), extended by the
repetitions the adaptive phase adds, in its own send order (eval/run/adaptive.added_order: rounds of
round_reps(PLANNED) repetitions per input, input by input, each input's back to back; the AB/BA orders from
pair_orders over the extended plan), each added pair right after the last on the timeline. The noise models are bench_coverage's; under `load_late` the load starts at 3/4 of the planned
session and runs to its end, added rounds included, as `bench aa-sessions` runs its spinner.

Stop rules, each on the same simulated pairs:
  fixed   no adaptive phase: the planned repetitions only (the reference)
  added   one whole added round (ADDED repetitions per input) in every session, whatever the data (a control:
          added timing pairs, no data-dependent stop)
  cs      the rule before 2026-12-04: the sequence's half-width alone (the first look at or after the planned
          pairs with half-width <= PCT, else MAX_REPS)
  both    the shipped rule: eval/run/adaptive.extend_timing itself, driven by hooks that hand it the pairs
For each: the share of sessions whose gated interval at the stop excludes 0 (a false alarm, Wilson 95 %), the
share within +-PCT (both ends), the share with half-width <= PCT, and the median repetitions.

    python -m bench adaptive    (LBEVAL_ADAPTIVE_SESSIONS=N sessions per noise model, default QUICK_SESSIONS)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from bench import smoke
from bench.bench_coverage import NOISES, TIMING_S, Schedule, schedule, simulate, wilson
from eval.run.ab import pair_orders
from eval.run.adaptive import (
    Hooks,
    Look,
    TimingTarget,
    added_order,
    added_units,
    extend_timing,
    half_width_pct,
    round_reps,
)
from eval.run.steps import Unit, plan_units
from scorers.paired_timing import gated_timing_change

INPUTS, PLANNED, MAX_REPS, TARGET = 12, 4, 24, 10.0
ADDED = round_reps(PLANNED)  # the "added" control: one whole added round
QUICK_SESSIONS = 100
RULES = ("fixed", "added", "cs", "both")


@dataclass(frozen=True)
class Pairs:
    """One simulated session's timing pairs in send order (planned, then the added rounds): input, (row, rep),
    log(b / a)."""

    inputs: list[str]
    units: list[tuple[int, int]]
    ratios: list[float]
    planned: list[Unit]


def extended_schedule(seed: int) -> tuple[Schedule, Schedule, list[tuple[int, int]], list[Unit]]:
    """The planned schedule followed by the added rounds: (for load_late: the planned length; for the other
    models: the whole length), the pairs' (row, repetition) and the planned units."""
    base = schedule(INPUTS, PLANNED, seed)
    units = plan_units(INPUTS, ("cold", "warm", "timing"), PLANNED)
    extras = added_order(units, MAX_REPS)  # the phase's own send order (rounds of input segments)
    orders = pair_orders(units + added_units(units, MAX_REPS), seed)
    keys = _planned_keys(base)
    clock = base.length_s
    ids, blocks, b_first, t1, t2 = list(base.ids), list(base.blocks), list(base.b_first), list(base.t_first), list(base.t_second)  # fmt: skip
    for u in extras:
        ids.append(u.row_index)
        blocks.append((u.row_index, (u.repetition + 1) // 2))
        b_first.append(orders[(u.row_index, u.kind, u.repetition)] == "BA")
        t1.append(clock + TIMING_S)
        t2.append(clock + 2 * TIMING_S)
        clock += 2 * TIMING_S
        keys.append((u.row_index, u.repetition))
    arrays = (np.array(b_first), np.array(t1), np.array(t2))
    whole = Schedule(ids, blocks, *arrays, clock)
    return Schedule(ids, blocks, *arrays, base.length_s), whole, keys, units


def _planned_keys(base: Schedule) -> list[tuple[int, int]]:
    """(row, repetition) of the planned schedule's pairs: an input's timing units are sent in repetition order."""
    seen: dict[int, int] = {}
    out = []
    for row in base.ids:
        out.append((row, seen.get(row, 0)))
        seen[row] = seen.get(row, 0) + 1
    return out


def session_pairs(noise: str, seed: int) -> Pairs:
    planned_len, whole, keys, units = extended_schedule(seed)
    rng = np.random.default_rng([seed, NOISES.index(noise), 19])
    s = simulate(planned_len if noise == "load_late" else whole, noise, 0.0, rng)
    ratios = np.log(s.b / s.a).tolist()
    return Pairs([f"d/{i}" for i in s.ids], keys, ratios, units)


def _gated(p: Pairs, n: int) -> tuple[float, float]:
    ch = gated_timing_change(p.inputs[:n], np.ones(n), np.exp(np.asarray(p.ratios[:n])))
    return ch.ci_low, ch.ci_high


def stop_cs(p: Pairs, planned_n: int) -> int:
    horizon = planned_n
    for n in range(planned_n, len(p.ratios) + 1):
        hw = half_width_pct(p.ratios[:n], horizon)
        if hw is not None and hw <= TARGET:
            return n
    return len(p.ratios)


def stop_both(p: Pairs, planned_n: int) -> int:
    """extend_timing on these pairs: the number of pairs it stopped at."""
    sent = {"n": planned_n}
    index = {key: k for k, key in enumerate(p.units)}

    def send(unit: Unit) -> bool:
        assert index[(unit.row_index, unit.repetition)] == sent["n"]  # the bench's order is the phase's
        sent["n"] += 1
        return True

    def look() -> Look:
        n = sent["n"]
        return Look(p.ratios[:n], float(n), [], p.inputs[:n])

    extend_timing(TimingTarget(TARGET, max_reps=MAX_REPS), p.planned, PLANNED, Hooks(send, look))
    return sent["n"]


@dataclass(frozen=True)
class Row:
    noise: str
    rule: str
    sessions: int
    false_alarms: int
    low: float
    high: float
    within: float  # both ends within +-TARGET
    narrow: float  # half-width <= TARGET
    median_reps: float


def run(noise: str, sessions: int) -> list[Row]:
    hits = {r: [0, 0, 0] for r in RULES}
    reps: dict[str, list[float]] = {r: [] for r in RULES}
    for k in range(sessions):
        p = session_pairs(noise, 5_000_011 + k)
        planned_n = INPUTS * PLANNED
        for rule, n in (
            ("fixed", planned_n),
            ("added", planned_n + ADDED * INPUTS),
            ("cs", stop_cs(p, planned_n)),
            ("both", stop_both(p, planned_n)),
        ):
            lo, hi = _gated(p, n)
            hits[rule][0] += lo > 0 or hi < 0
            hits[rule][1] += lo >= -TARGET and hi <= TARGET
            hits[rule][2] += (hi - lo) / 2 <= TARGET
            reps[rule].append(n / INPUTS)
    out = []
    for rule in RULES:
        fa, within, narrow = hits[rule]
        low, high = wilson(fa, sessions)
        out.append(Row(noise, rule, sessions, fa, low, high, within / sessions, narrow / sessions,
                       float(np.median(reps[rule]))))  # fmt: skip
    return out


def main() -> None:
    sessions = int(os.environ.get("LBEVAL_ADAPTIVE_SESSIONS", str(2 if smoke() else QUICK_SESSIONS)))
    started = time.time()
    print(f"adaptive: {sessions} A/A sessions per noise model, {INPUTS} inputs, {PLANNED} planned repetitions, "
          f"--timing-until {TARGET:g}, at most {MAX_REPS}; load avg {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(
        "| noise | stop rule | gated excludes 0 [Wilson 95%] | within +-10% | half-width <= 10% | median reps |"
    )
    print("|---|---|---|---|---|---|")
    for noise in NOISES:
        for r in run(noise, sessions):
            print(f"| {r.noise} | {r.rule} | {r.false_alarms}/{r.sessions} = {100 * r.false_alarms / r.sessions:.1f}% "
                  f"[{100 * r.low:.1f}, {100 * r.high:.1f}] | {100 * r.within:.0f}% | {100 * r.narrow:.0f}% | "
                  f"{r.median_reps:g} |", flush=True)  # fmt: skip
    print(f"adaptive: {time.time() - started:.0f} s, load avg {os.getloadavg()[0]:.2f}")
