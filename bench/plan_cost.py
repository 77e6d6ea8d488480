"""Server-seconds of a run's plan, per scenario and per unit: `python -m bench.plan_cost RUN_DIR [RUN_DIR ...]`.

Not part of `make bench` (it reads run folders of a real server; docs/scenarios.md gives the figures and the
commands that made them). A server-second is a second in which the server had at least one of the run's
requests in flight: the union of the records' [sent_at, sent_at + done_s] intervals (a batch of B requests
sent at once counts its wall time once, not B times). Per unit: a cache main unit, a timing unit, or one
scenario unit (one input's requests of that scenario), so the cost of a plan on other inputs can be computed as
(units) x (seconds per unit).

The hitlen units are also split by hit class (the cold reference, then each class's prime and full request), and
`--without-hit-classes "middle,deepest partial"` projects the plan with and without those classes: the plan of N
inputs is N cache inputs (a main unit and `--timing-reps` timing units each, at this run's mean seconds per unit)
and one scenario input per 12 (at this run's mean seconds per scenario input, less the classes left out), for
N = 12 (the mini inputs) and 32. A class's requests run alone (a hitlen unit has no other request in flight), so
the seconds of the plan without it are the run's seconds without its requests.

    python -m bench.plan_cost RUN_DIR [RUN_DIR ...] [--without-hit-classes A,B] [--timing-reps 5]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.records import scenarios as sc
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord

PROJECTED = ((12, 1), (32, 2))  # (inputs, scenario inputs: one per DEFAULT_PLAN.inputs_per)


@dataclass(frozen=True)
class Cost:
    seconds: float  # server-seconds: union of the requests' intervals
    units: int  # (input, unit kind) pairs
    requests: int


def busy_seconds(records: Iterable[RequestRecord]) -> float:
    """Length of the union of the records' [sent_at, sent_at + done_s] intervals."""
    spans = sorted(
        (r.timings.sent_at, r.timings.sent_at + r.timings.done_s)
        for r in records
        if r.timings is not None and r.timings.done_s is not None
    )
    total, end = 0.0, float("-inf")
    for lo, hi in spans:
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def unit_of(r: RequestRecord) -> str:
    """The unit kind a record belongs to: the scenario's name, or cache's main / timing unit."""
    if r.scenario != "cache":
        return r.scenario
    return "cache timing" if r.pass_name.startswith("timing_") else "cache main"


def costs(records: Sequence[RequestRecord]) -> dict[str, Cost]:
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by[unit_of(r)].append(r)
    out = {}
    for name, recs in sorted(by.items()):
        units = {(r.dataset, r.example_id, r.repetition if name == "cache timing" else 0) for r in recs}
        out[name] = Cost(busy_seconds(recs), len(units), len(recs))
    return out


@dataclass(frozen=True)
class Rates:
    """A least-squares fit over the requests sent alone: seconds = per_request + per_prefill_token * (prompt
    tokens not cached) + per_output_token * (completion tokens)."""

    per_request: float
    per_prefill_token: float
    per_output_token: float
    n: int


def fit_rates(records: Sequence[RequestRecord]) -> Rates | None:
    rows: list[tuple[float, float, float]] = []
    for r in records:
        t, u = r.timings, r.usage
        if t is None or t.done_s is None or u.prompt_tokens is None or u.completion_tokens is None:
            continue
        if r.pass_name in ("batch_member", "batch_filler", "batch_warm_member", "repeats_batched"):
            continue  # sent with others: their seconds overlap
        rows.append((u.prompt_tokens - (u.cached_tokens or 0), u.completion_tokens, t.done_s))
    if len(rows) < 3:
        return None
    x = np.array([[1.0, p, c] for p, c, _ in rows], dtype=float)
    y = np.array([s for *_, s in rows], dtype=float)
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return Rates(float(coef[0]), float(coef[1]), float(coef[2]), len(rows))


def per_input(records: Sequence[RequestRecord]) -> dict[tuple[str, str], dict[str, float]]:
    """Server-seconds per input (dataset, id) and unit kind: what one more input of that kind costs."""
    by: dict[tuple[str, str], dict[str, list[RequestRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by[(r.dataset, r.example_id)][unit_of(r)].append(r)
    return {key: {name: busy_seconds(recs) for name, recs in kinds.items()} for key, kinds in by.items()}


def hit_class_of(r: RequestRecord) -> str | None:
    """A hitlen record's class ("cold" for the reference), None for any other record."""
    if r.scenario != "hitlen":
        return None
    return "cold" if r.pass_name == "hitlen_cold" else str(r.variation.get(sc.HIT_CLASS))


def by_hit_class(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Server-seconds of the hitlen records per class, summed over the scenario inputs."""
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        name = hit_class_of(r)
        if name is not None:
            by[name].append(r)
    return {name: busy_seconds(recs) for name, recs in by.items()}


@dataclass(frozen=True)
class Projection:
    inputs: int
    scenario_inputs: int
    cache_only: float  # inputs x (main + timing_reps x timing) seconds per unit
    scenarios: float  # scenario_inputs x seconds per scenario input (with every class the run planned)
    without: float  # ... without the classes left out

    def extra(self, with_all: bool) -> float:
        return (self.scenarios if with_all else self.without) / self.cache_only


def project(
    records: Sequence[RequestRecord],
    timing_reps: int,
    without: frozenset[str],
    inputs: int,
    scenario_inputs: int,
) -> Projection | None:
    """The plan of `inputs` inputs at this run's mean seconds per unit (None: no cache or scenario unit)."""
    table = costs(records)
    main, timing = table.get("cache main"), table.get("cache timing")
    scen = [c for name, c in table.items() if not name.startswith("cache")]
    scenario_keys = {(r.dataset, r.example_id) for r in records if r.scenario != "cache"}
    if main is None or timing is None or not scen or not scenario_keys:
        return None
    per_input = main.seconds / main.units + timing_reps * timing.seconds / timing.units
    per_scenario = sum(c.seconds for c in scen) / len(scenario_keys)
    dropped = sum(s for name, s in by_hit_class(records).items() if name in without) / len(scenario_keys)
    return Projection(
        inputs,
        scenario_inputs,
        inputs * per_input,
        scenario_inputs * per_scenario,
        scenario_inputs * (per_scenario - dropped),
    )


def print_projections(records: Sequence[RequestRecord], timing_reps: int, without: frozenset[str]) -> None:
    left = ", ".join(sorted(without))
    for inputs, scenario_inputs in PROJECTED:
        p = project(records, timing_reps, without, inputs, scenario_inputs)
        if p is None:
            return
        print(
            f"  projected, {inputs} inputs ({scenario_inputs} scenario): cache-only {p.cache_only:.0f} s; "
            f"default plan +{p.scenarios:.0f} s (+{100 * p.extra(True):.1f}%); without {left}: "
            f"+{p.without:.0f} s (+{100 * p.extra(False):.1f}%); with vs without: "
            f"{100 * ((p.cache_only + p.scenarios) / (p.cache_only + p.without) - 1):+.1f}%"
        )


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.plan_cost", description="Server-seconds of a run's plan."
    )
    p.add_argument("runs", nargs="+", type=Path, help="run folders")
    p.add_argument(
        "--without-hit-classes", default="", help="comma list of hitlen classes to project without"
    )
    p.add_argument("--timing-reps", type=int, default=5, help="timing units per input projected (default 5)")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    without = frozenset(c.strip() for c in args.without_hit_classes.split(",") if c.strip())
    for arg in args.runs:
        loaded = load_run(Path(arg))
        table = costs(loaded.records)
        total = busy_seconds(loaded.records)
        inputs = len({(r.dataset, r.example_id) for r in loaded.records if r.scenario == "cache"})
        print(f"{arg}: {len(loaded.records)} records, {total:.1f} server-seconds ({inputs} cache inputs)")
        for name, c in table.items():
            per = c.seconds / c.units if c.units else 0.0
            print(
                f"  {name:13} {c.seconds:8.1f} s  {c.units:3} units  {per:7.2f} s/unit  {c.requests:4} requests"
            )
        for (dataset, example), kinds in per_input(loaded.records).items():
            cells = ", ".join(f"{name} {sec:.1f}" for name, sec in sorted(kinds.items()))
            print(f"  {dataset}/{example[:12]}: {cells}")
        rates = fit_rates(loaded.records)
        if rates is not None:
            print(
                f"  fit over {rates.n} requests sent alone: {rates.per_request:.2f} s per request + "
                f"{1000 * rates.per_prefill_token:.1f} ms per prefilled token + {rates.per_output_token:.2f} s per "
                "output token"
            )
        classes = by_hit_class(loaded.records)
        if classes:
            print("  hitlen by class: " + ", ".join(f"{n} {sec:.1f} s" for n, sec in sorted(classes.items())))
        if without:
            print_projections(loaded.records, args.timing_reps, without)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
