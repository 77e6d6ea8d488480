"""Coverage of the paired timing intervals in simulated A/A sessions, and their power (docs/timing.md).

Each simulated session is an `lbeval ab` session at the level of its pairs: the units of
eval/run/steps.plan_units (passes cold, warm, timing; R timing repetitions), sent in eval/run/ab.session_order
with the AB/BA orders of eval/run/ab.pair_orders (the session's seed), on a timeline: a main unit takes
MAIN_S seconds per side, a timing unit TIMING_S, and the measured warm request ends the unit. Both sides are
one server (A/A) unless a noise model says a burst hits one side. The warm prefill time of a request is its
input's base time times exp(noise), the noise from the model:

  quiet        per request N(0, 0.025) (per-pair ratios within about +-10 %, the quiet real server)
  load         a one-core load: N(0, 0.05) plus, with probability 0.35, an Exp(mean 0.5) delay (per-pair
               ratios from about -75 % to +300 % over a session, as under the real one-core spinner)
  load_late    quiet, and the load model in the last quarter of the session's time (the real A/A experiment's shape)
  bursts_both  quiet plus bursts: starts a Poisson process of rate 1 / 40 s, lengths U(2, 10) s, each a factor
               exp(U(log 1.3, log 3)) on every request of both sides inside it
  bursts_one   the same bursts, each on one side (drawn at random): two servers, one disturbed
  drift        quiet plus a linear drift of both sides of U(-30, +30) % over the session

and every model adds a position effect: the second request of a pair is 2 % slower (what the AB/BA
balance must cancel). Methods (scorers/paired_timing.py): the percentile cluster bootstrap of the mean and of
the median (the shipped method before the gated interval), the t interval and Yuen's trimmed t on the per-input means,
Hodges-Lehmann with the signed-rank interval, randomization inference over the AB/BA blocks, and the
bootstrap-t. A false alarm: the 95 % interval excludes 0. Each rate is given with its Wilson 95 % interval.
"gate5": the A/A session would have FAILed the old two-way rule with a `max_change_pct = 5` limit (upper bound
above +5 %). The shipped three-way rule (eval/gate/ruleset/timing.rule_prefill_change, limit RULE_LIMIT = 10 %): "rule
FAIL" is an A/A session whose lower end is above +10 % (a false FAIL), "undecided" one whose interval straddles
+10 % (no verdict: re-run with --timing-until), the rest PASS (upper end <= +10 %).

Power: the same sessions with side B slowed by 5/10/20/40 % (quiet and load): the share of sessions whose
interval's lower end is above 0, and above +5 % (the gate FAILs with a 5 % limit and the change is shown
beyond it), by the number of inputs.

`python -m bench coverage` runs the full experiment (SESSIONS sessions per cell); LBEVAL_COVERAGE_QUICK=1 runs
QUICK_SESSIONS per cell with fewer resamples (under a minute). LBEVAL_COVERAGE_JSON=path writes every cell.
LBEVAL_COVERAGE_SEED_OFFSET=K adds K to every session's seed (coverage cells and power): K = FRESH_OFFSET draws
sessions the method's selection never saw (every seed of the default run is below it).
LBEVAL_COVERAGE_SESSIONS=N overrides the sessions per cell.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from bench import smoke
from eval.records.vocabulary import UNIT_TIMING
from eval.run.ab import pair_orders, session_order
from eval.run.steps import plan_units
from scorers import paired_timing as pt

SESSIONS, QUICK_SESSIONS = 500, 60
RESAMPLES, QUICK_RESAMPLES = 1000, 400
FLIPS = 1999  # randomization sets per session (the scorer's default is 4999)
CHOSEN = "yuen_trim20_975"  # the shipped method (eval/analyze/ab_timing.py): the power table measures it
INPUTS, REPS = (6, 12, 32), (2, 3, 4, 5)
NOISES = ("quiet", "load", "load_late", "bursts_both", "bursts_one", "drift")
MAIN_S, TIMING_S = 1.5, 0.4
POSITION = 0.02
EFFECTS = (5.0, 10.0, 20.0, 40.0)
POWER_INPUTS = (6, 12, 20, 32)
POWER_REPS = 4
RULE_LIMIT = 10.0  # the shipped timing rules' max_change_pct (eval/gate/policy_default.toml)
# above every seed of an offset-0 run (cells: 1_000_003 * 32 + 10_007 * 5 + sessions; power: 7_000_001 + ...), so
# a run with this offset draws only sessions the selection of CHOSEN never saw
FRESH_OFFSET = 1_000_000_000


@dataclass(frozen=True)
class Session:
    """One simulated session's timing pairs: input ids, randomization blocks, side A and B warm prefill."""

    ids: list[int]
    blocks: list[tuple[int, int]]
    a: NDArray[np.float64]
    b: NDArray[np.float64]


@dataclass(frozen=True)
class Schedule:
    """The timing pairs of a plan in send order: input, block, whether B went first, the warm request times."""

    ids: list[int]
    blocks: list[tuple[int, int]]
    b_first: NDArray[np.bool_]
    t_first: NDArray[np.float64]  # seconds: the warm request of the pair's first side
    t_second: NDArray[np.float64]
    length_s: float


def schedule(n_inputs: int, reps: int, seed: int) -> Schedule:
    units = plan_units(n_inputs, ("cold", "warm", "timing"), reps)
    orders = pair_orders(units, seed)
    ids, blocks, b_first, t1, t2 = [], [], [], [], []
    clock = 0.0
    for u in session_order(units, seed):
        d = TIMING_S if u.kind == UNIT_TIMING else MAIN_S
        if u.kind == UNIT_TIMING:
            ids.append(u.row_index)
            blocks.append((u.row_index, (u.repetition + 1) // 2))  # unit j = r + 1 of its input: block j // 2
            b_first.append(orders[(u.row_index, u.kind, u.repetition)] == "BA")
            t1.append(clock + d)
            t2.append(clock + 2 * d)
        clock += 2 * d
    return Schedule(ids, blocks, np.array(b_first), np.array(t1), np.array(t2), clock)


def _load(rng: np.random.Generator, size: int) -> NDArray[np.float64]:
    return rng.normal(0.0, 0.05, size) + (rng.random(size) < 0.35) * rng.exponential(0.5, size)


def _bursts(rng: np.random.Generator, length: float, one_side: bool) -> list[tuple[float, float, float, int]]:
    out, t = [], float(rng.exponential(40.0)) - 10.0
    while t < length:
        side = int(rng.integers(0, 2)) if one_side else -1  # 0: A, 1: B, -1: both
        out.append(
            (t, t + float(rng.uniform(2.0, 10.0)), float(rng.uniform(math.log(1.3), math.log(3.0))), side)
        )
        t += float(rng.exponential(40.0))
    return out


def _side_noise(
    rng: np.random.Generator,
    noise: str,
    times: NDArray[np.float64],
    side: int,
    sched: Schedule,
    extra: object,
) -> NDArray[np.float64]:
    n = times.size
    if noise == "load":
        return _load(rng, n)
    out = rng.normal(0.0, 0.025, n)
    if noise == "load_late":
        late = times >= 0.75 * sched.length_s
        out[late] = _load(rng, int(late.sum()))
    elif noise.startswith("bursts"):
        for start, end, factor, hit in extra:  # type: ignore[attr-defined]
            if hit in (-1, side):
                out[(times >= start) & (times < end)] += factor
    elif noise == "drift":
        out += float(extra) * times / sched.length_s  # type: ignore[arg-type]
    return out


def simulate(
    sched: Schedule, noise: str, effect_pct: float, rng: np.random.Generator, position: float = POSITION
) -> Session:
    """Warm prefill times of both sides of every timing pair (side B slowed by effect_pct)."""
    extra: object = None
    if noise.startswith("bursts"):
        extra = _bursts(rng, sched.length_s, noise == "bursts_one")
    elif noise == "drift":
        extra = math.log1p(float(rng.uniform(-0.3, 0.3)))
    t_a = np.where(sched.b_first, sched.t_second, sched.t_first)
    t_b = np.where(sched.b_first, sched.t_first, sched.t_second)
    base = np.exp(rng.normal(math.log(50.0), 0.5, max(sched.ids) + 1))[sched.ids]
    log_a = _side_noise(rng, noise, t_a, 0, sched, extra) + position * ~sched.b_first
    log_b = _side_noise(rng, noise, t_b, 1, sched, extra) + position * sched.b_first
    return Session(
        sched.ids, sched.blocks, base * np.exp(log_a), base * np.exp(log_b) * (1 + effect_pct / 100)
    )


Method = Callable[[Session, int, int], pt.TimingChange]

METHODS: dict[str, Method] = {
    "boot_mean": lambda s, seed, r: pt.paired_timing_change(s.ids, s.a, s.b, seed=seed, n_resamples=r),
    "boot_median": lambda s, seed, r: pt.paired_timing_change(
        s.ids, s.a, s.b, seed=seed, n_resamples=r, statistic="median"
    ),
    "t_mean": lambda s, seed, r: pt.t_interval_change(s.ids, s.a, s.b),
    "yuen_trim20": lambda s, seed, r: pt.trimmed_t_change(s.ids, s.a, s.b),
    "hodges_lehmann": lambda s, seed, r: pt.hodges_lehmann_change(s.ids, s.a, s.b),
    "randomization": lambda s, seed, r: pt.randomization_change(
        s.ids, s.a, s.b, blocks=s.blocks, seed=seed, max_flips=FLIPS
    ),
    "boot_t": lambda s, seed, r: pt.studentized_bootstrap_change(s.ids, s.a, s.b, seed=seed, n_resamples=r),
    # wider nominal levels: a false-alarm rate at most 5 % in every cell needs a true rate below 5 %
    "t_mean_975": lambda s, seed, r: pt.t_interval_change(s.ids, s.a, s.b, confidence=0.975),
    "yuen_trim20_975": lambda s, seed, r: pt.trimmed_t_change(s.ids, s.a, s.b, confidence=0.975),
    "yuen_trim20_98": lambda s, seed, r: pt.trimmed_t_change(s.ids, s.a, s.b, confidence=0.98),
    "hodges_lehmann_97": lambda s, seed, r: pt.hodges_lehmann_change(s.ids, s.a, s.b, confidence=0.97),
}


def _methods() -> dict[str, Method]:
    """LBEVAL_COVERAGE_METHODS=a,b: only these methods (a re-run of some cells' methods), else all."""
    wanted = os.environ.get("LBEVAL_COVERAGE_METHODS")
    return {k: v for k, v in METHODS.items() if wanted is None or k in wanted.split(",")}


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k / n (Wilson 1927)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Cell:
    method: str
    inputs: int
    reps: int
    noise: str
    sessions: int
    false_alarms: int
    rate: float
    low: float
    high: float
    gate5: float  # share of sessions whose upper bound is above +5 %
    median_half_width_pct: float
    rule_fail: float = 0.0  # the three-way rule at RULE_LIMIT: share of sessions whose lower end is above it
    rule_undecided: float = 0.0  # ... whose interval straddles it (no verdict)


def seed_offset() -> int:
    """LBEVAL_COVERAGE_SEED_OFFSET: added to every session's seed (0: the seeds the figures were chosen on)."""
    return int(os.environ.get("LBEVAL_COVERAGE_SEED_OFFSET", "0"))


def cell_seed(n_inputs: int, reps: int, k: int, offset: int = 0) -> int:
    """The seed of session k of a cell (its schedule's AB/BA orders, its noise draws, its method's resamples)."""
    return offset + 1_000_003 * n_inputs + 10_007 * reps + k


def run_cell(
    n_inputs: int, reps: int, noise: str, sessions: int, resamples: int, offset: int = 0
) -> list[Cell]:
    methods = _methods()
    hits = {m: 0 for m in methods}
    gate = {m: 0 for m in methods}
    fails = {m: 0 for m in methods}
    undecided = {m: 0 for m in methods}
    widths: dict[str, list[float]] = {m: [] for m in methods}
    for k in range(sessions):
        seed = cell_seed(n_inputs, reps, k, offset)
        rng = np.random.default_rng([seed, NOISES.index(noise)])
        s = simulate(schedule(n_inputs, reps, seed), noise, 0.0, rng)
        for name, method in methods.items():
            ch = method(s, seed, resamples)
            hits[name] += ch.ci_low > 0 or ch.ci_high < 0
            gate[name] += ch.ci_high > 5.0
            fails[name] += ch.ci_low > RULE_LIMIT
            undecided[name] += ch.ci_low <= RULE_LIMIT < ch.ci_high
            widths[name].append((ch.ci_high - ch.ci_low) / 2)
    out = []
    for name in methods:
        low, high = wilson(hits[name], sessions)
        out.append(Cell(name, n_inputs, reps, noise, sessions, hits[name], hits[name] / sessions, low, high,
                        gate[name] / sessions, float(np.median(widths[name])), fails[name] / sessions,
                        undecided[name] / sessions))  # fmt: skip
    return out


def power(method: str, sessions: int, resamples: int, offset: int = 0) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for noise in ("quiet", "load"):
        for effect in EFFECTS:
            for n in POWER_INPUTS:
                above0 = above5 = 0
                length = 0.0
                for k in range(sessions):
                    seed = offset + 7_000_001 + 1009 * n + k
                    rng = np.random.default_rng([seed, int(effect), NOISES.index(noise)])
                    sched = schedule(n, POWER_REPS, seed)
                    length = sched.length_s
                    s = simulate(sched, noise, effect, rng)
                    ch = METHODS[method](s, seed, resamples)
                    above0 += ch.ci_low > 0
                    above5 += ch.ci_low > 5.0
                rows.append({"noise": noise, "effect_pct": effect, "inputs": n, "reps": POWER_REPS,
                             "sessions": sessions, "session_s": length, "excludes_0": above0 / sessions, "beyond_5": above5 / sessions})  # fmt: skip
    return rows


def end_to_end(sessions: int, n_inputs: int = 6, reps: int = 2) -> list[str]:
    """The check of the pair-level simulation: A/A sessions through eval/run/ab.execute_ab on one fake server
    (tests/support/fake_server.py) whose every prefill time gets the `load` model's noise (no position effect), the warm
    prefill pairs read back as compare reads them, against the pair-level simulation of the same cell."""
    import tempfile
    from dataclasses import replace
    from pathlib import Path

    from eval.analyze.ab_timing import paired_values, session_pairs
    from eval.analyze.score import score_run
    from eval.run.ab import AbConfig, execute_ab
    from tests.eval.fake_fixtures import config_for, make_row, write_rows
    from tests.support.fake_server import FakeServer

    methods = ("boot_mean", "t_mean", CHOSEN, "randomization")
    e2e = {m: 0 for m in methods}
    sim = {m: 0 for m in methods}
    with tempfile.TemporaryDirectory() as tmp, FakeServer() as server:
        rng = np.random.default_rng(20261202)
        server.prefill_noise = lambda: float(_load(rng, 1)[0])
        inputs = write_rows(
            Path(tmp) / "inputs.jsonl", [make_row(i, words=60 + 20 * i) for i in range(n_inputs)]
        )
        for k in range(sessions):
            base = config_for(server, inputs, Path(tmp) / f"s{k}", variant="a", timing_reps=reps,
                              passes=("cold", "warm", "timing"))  # fmt: skip
            da, db = execute_ab(AbConfig(base, replace(base, variant="b"), seed=k, quiet=True))
            ra, rb = score_run(da), score_run(db)
            pairs = session_pairs(ra, rb)
            assert pairs is not None
            v = paired_values(ra, rb, pairs, "warm_prefill_ms")
            reps_of = {(p.dataset, p.example_id, p.repetition) for p in pairs}
            assert len(v.a) == n_inputs * reps, f"session {k}: {len(v.a)} pairs of {len(reps_of)}"
            s = Session(v.input_ids, v.blocks, np.array(v.a), np.array(v.b))  # type: ignore[arg-type]
            seed = cell_seed(n_inputs, reps, k)
            t = simulate(
                schedule(n_inputs, reps, k), "load", 0.0, np.random.default_rng([seed, 99]), position=0.0
            )
            for m in methods:
                for store, session in ((e2e, s), (sim, t)):
                    ch = METHODS[m](session, seed, RESAMPLES)
                    store[m] += ch.ci_low > 0 or ch.ci_high < 0
    out = []
    for m in methods:
        lo, hi = wilson(e2e[m], sessions)
        slo, shi = wilson(sim[m], sessions)
        out.append(f"| {m} | {n_inputs} x {reps} | {100 * e2e[m] / sessions:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] | "
                   f"{100 * sim[m] / sessions:.1f} [{100 * slo:.1f}, {100 * shi:.1f}] | {sessions} |")  # fmt: skip
    return out


def markdown(cells: list[Cell], rows: list[dict[str, object]]) -> str:
    """The coverage table (a row per noise model and cell, a column per method) and the power table."""
    methods = list(dict.fromkeys(c.method for c in cells))
    lines = ["| noise | inputs x reps | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    keys = list(dict.fromkeys((c.noise, c.inputs, c.reps) for c in cells))
    by = {(c.noise, c.inputs, c.reps, c.method): c for c in cells}
    for noise, n, r in keys:
        row = [f"{100 * by[noise, n, r, m].rate:.1f} [{100 * by[noise, n, r, m].low:.1f}, "
               f"{100 * by[noise, n, r, m].high:.1f}]" for m in methods]  # fmt: skip
        lines.append(f"| {noise} | {n} x {r} | " + " | ".join(row) + " |")
    lines += ["", "| method | cells meeting <= 5 % (upper <= 8 %) | worst cell | median half-width, load 12 x 4 |",
              "|---|---|---|---|"]  # fmt: skip
    for m in methods:
        mine = [c for c in cells if c.method == m]
        good = sum(c.rate <= 0.05 and c.high <= 0.08 for c in mine)
        w = max(mine, key=lambda c: c.high)
        hw = [c.median_half_width_pct for c in mine if (c.noise, c.inputs, c.reps) == ("load", 12, 4)]
        lines.append(f"| {m} | {good} of {len(mine)} | {100 * w.rate:.1f} [{100 * w.low:.1f}, {100 * w.high:.1f}] "
                     f"({w.noise} {w.inputs} x {w.reps}) | {hw[0] if hw else math.nan:.1f} % |")  # fmt: skip
    lines += ["", f"Three-way rule at +{RULE_LIMIT:g} % ({CHOSEN}), A/A sessions:", "",
              "| noise | inputs x reps | rule FAIL % [Wilson 95 %] | undecided (no verdict) % | PASS % |",
              "|---|---|---|---|---|"]  # fmt: skip
    lines += rule_rows([c for c in cells if c.method == CHOSEN])
    lines += ["", "| noise | effect | inputs x reps | session s | interval excludes 0 | lower end > +5 % |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for p in rows:
        lines.append(f"| {p['noise']} | +{p['effect_pct']:.0f} % | {p['inputs']} x {p['reps']} | "
                     f"{p['session_s']:.0f} | {p['excludes_0']:.2f} | {p['beyond_5']:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def rule_rows(cells: list[Cell]) -> list[str]:
    """The three-way rule's outcomes in A/A sessions, one Markdown row per cell."""
    out = []
    for c in cells:
        lo, hi = wilson(round(c.rule_fail * c.sessions), c.sessions)
        out.append(f"| {c.noise} | {c.inputs} x {c.reps} | {100 * c.rule_fail:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] "
                   f"| {100 * c.rule_undecided:.1f} | {100 * (1 - c.rule_fail - c.rule_undecided):.1f} |")  # fmt: skip
    return out


def main() -> None:
    e2e = int(os.environ.get("LBEVAL_COVERAGE_E2E", "0"))
    if e2e:  # the one-off end-to-end check (docs/timing.md), on its own
        print("| method | cell | lbeval ab on the fake server | pair-level simulation | sessions |")
        print("\n".join(end_to_end(e2e)))
        return
    quick = os.environ.get("LBEVAL_COVERAGE_QUICK") == "1"
    sessions = int(
        os.environ.get("LBEVAL_COVERAGE_SESSIONS", 2 if smoke() else QUICK_SESSIONS if quick else SESSIONS)
    )
    resamples = 50 if smoke() else QUICK_RESAMPLES if quick else RESAMPLES
    offset = seed_offset()
    started = time.time()
    cells: list[Cell] = []
    for noise in NOISES:
        for n in INPUTS:
            for reps in REPS:
                cells.extend(run_cell(n, reps, noise, sessions, resamples, offset))
    print(
        f"coverage: {sessions} A/A sessions per cell, {resamples} resamples, seed offset {offset}, "
        f"load avg {os.getloadavg()[0]:.2f}"
    )
    if quick:
        print(
            "  (quick mode: too few sessions for the <= 5 % (upper <= 8 %) verdicts; they need the full 500)"
        )
    for method in _methods():
        mine = [c for c in cells if c.method == method]
        worst = max(mine, key=lambda c: c.high)
        ok = all(c.rate <= 0.05 and c.high <= 0.08 for c in mine)
        print(f"  {method:15s} mean rate {np.mean([c.rate for c in mine]):.3f}  worst {worst.rate:.3f} "
              f"[{worst.low:.3f}, {worst.high:.3f}] ({worst.noise}, {worst.inputs}x{worst.reps})  "
              f"{'meets' if ok else 'FAILS'} <=5% (upper <=8%) in every cell")  # fmt: skip
        fail, undecided = max(c.rule_fail for c in mine), max(c.rule_undecided for c in mine)
        print(f"  {'':15s} three-way rule at +{RULE_LIMIT:g}%: A/A FAIL at most {fail:.3f}, no verdict at most "
              f"{undecided:.3f} of the sessions of a cell")  # fmt: skip
    chosen = CHOSEN
    power_sessions = sessions if smoke() else max(40, sessions // 5)
    rows = power(chosen, power_sessions, resamples, offset) if chosen in _methods() else []
    for r in rows:
        print(
            f"  power {chosen} {r['noise']:5s} +{r['effect_pct']:.0f}% {r['inputs']:2d} inputs x{r['reps']}: "
            f"excludes 0 {r['excludes_0']:.2f}, lower end > +5% {r['beyond_5']:.2f}"
        )
    print(f"coverage: {time.time() - started:.0f} s, load avg {os.getloadavg()[0]:.2f}")
    md = os.environ.get("LBEVAL_COVERAGE_MD")
    if md:
        with open(md, "w", encoding="utf-8") as f:
            f.write(markdown(cells, rows))
    target = os.environ.get("LBEVAL_COVERAGE_JSON")
    if target:
        with open(target, "w", encoding="utf-8") as f:
            json.dump({"cells": [asdict(c) for c in cells], "power": rows}, f, indent=1)
