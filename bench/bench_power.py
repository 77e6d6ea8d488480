"""Power of the timing rule on the fake server (the fake part; docs/timing.md "Power").

`lbeval ab --stop-when-settled` sessions (eval/run/ab.execute_ab with eval/gate/settle.stop_check) on two fake
servers, the variant's server slowed on the warm path only (FakeServer.warm_slowdown: requests with a prefix
hit) by 5, 10, 20 and 40 %, every reported prefill time carrying seeded per-request noise:

  quiet  log noise N(0, 0.025) (per-pair ratios within about +-10 %)
  load   N(0, 0.05) plus, with probability 0.35, an Exp(mean 0.5) delay (the one-core load of the real A/A experiment)

The policy holds warm_prefill_change alone, three-way, at the shipped limit (max_change_pct = 10) and, quiet, at
a tight one (2.5), PLANNED inputs planned. The session stops when the rule settles (its 95 % confidence sequence, eval/gate/settle.py):
per cell, over SEEDS seeds, the median inputs run and server-seconds (both fake servers' busy seconds in the
pairing, ab_stop.json) until it settled FAIL, and how many of the seeds settled FAIL, settled PASS or ran all
PLANNED inputs without settling. A slowdown at or below the limit cannot FAIL a three-way rule: it settles
PASS or stays undecided, by design.

    python -m bench power          (LBEVAL_POWER_SEEDS=N: seeds per cell, default 3; LBEVAL_POWER_QUICK=1;
                                    LBEVAL_POWER_NOISE=load: that noise model's cells only;
                                    LBEVAL_POWER_INPUTS / LBEVAL_POWER_REPS: the plan, default 24 x 2)
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench import smoke
from eval.gate.policy import parse_policy
from eval.gate.settle import stop_check
from eval.records.stop import SETTLED_FAIL, SETTLED_PASS, read_stop
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

PLANNED = 24  # LBEVAL_POWER_INPUTS overrides
REPS = 2  # LBEVAL_POWER_REPS overrides
EFFECTS = (5.0, 10.0, 20.0, 40.0)
NOISES = ("quiet", "load")
# (noise, limit %, effect %): quiet at the shipped limit and a tight one; the load at the shipped limit
CELLS = tuple((n, lim, e) for n, lim in (("quiet", 10.0), ("quiet", 2.5), ("load", 10.0)) for e in EFFECTS)
# LBEVAL_POWER_QUICK=1: the cells a loaded shared machine can run in minutes (the limit above and below the effect)
QUICK_CELLS = (("quiet", 10.0, 20.0), ("quiet", 10.0, 40.0), ("quiet", 2.5, 5.0), ("quiet", 2.5, 10.0))


@dataclass(frozen=True)
class Outcome:
    decision: str  # SETTLED_FAIL, SETTLED_PASS or "open" (ran every planned input)
    inputs: int
    server_s: float | None


def noise_model(name: str, rng: np.random.Generator) -> float:
    if name == "quiet":
        return float(rng.normal(0.0, 0.025))
    delay = float(rng.exponential(0.5)) if rng.random() < 0.35 else 0.0
    return float(rng.normal(0.0, 0.05)) + delay


@dataclass(frozen=True)
class Plan:
    inputs: int = PLANNED
    reps: int = REPS


def one_session(tmp: Path, noise: str, effect: float, limit: float, seed: int, plan: Plan) -> Outcome:
    policy = parse_policy(
        f"schema_version = 1\n[rules.warm_prefill_change]\nmax_change_pct = {limit}\n", "power.toml"
    )
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i, words=40 + i % 13) for i in range(plan.inputs)])
    rng = np.random.default_rng([seed, int(10 * effect), int(10 * limit), NOISES.index(noise)])
    with FakeServer() as a, FakeServer() as b:
        a.prefill_noise = b.prefill_noise = lambda: noise_model(noise, rng)
        b.warm_slowdown = 1.0 + effect / 100.0
        ca = config_for(
            a, inputs, tmp / "runs", variant="base", passes=("cold", "warm", "timing"), timing_reps=plan.reps
        )
        cb = replace(ca, variant="var", topology=endpoints(b.base_url))
        dirs = execute_ab(AbConfig(ca, cb, seed=seed, quiet=True, stop_check=stop_check(policy)))
    stop = read_stop(dirs[1])
    if stop is None:
        return Outcome("open", plan.inputs, None)
    return Outcome(stop.decision, stop.inputs_run, stop.server_seconds)


def cell_line(noise: str, effect: float, limit: float, outs: list[Outcome]) -> str:
    failed = [o for o in outs if o.decision == SETTLED_FAIL]
    passed = sum(o.decision == SETTLED_PASS for o in outs)
    open_ = len(outs) - len(failed) - passed
    inputs = f"{statistics.median(o.inputs for o in failed):.0f}" if failed else "-"
    secs = [o.server_s for o in failed if o.server_s is not None]
    server = f"{statistics.median(secs):.2f}" if secs else "-"
    return (
        f"| {noise} | +{effect:g} % | +{limit:g} % | {len(failed)} of {len(outs)} | {inputs} | {server} | "
        f"{passed} | {open_} |"
    )


def main() -> None:
    seeds = int(os.environ.get("LBEVAL_POWER_SEEDS", "1" if smoke() else "3"))
    cells = (
        QUICK_CELLS[:1] if smoke() else QUICK_CELLS if os.environ.get("LBEVAL_POWER_QUICK") == "1" else CELLS
    )
    only = os.environ.get("LBEVAL_POWER_NOISE")  # one noise model's cells (quiet or load)
    cells = tuple(c for c in cells if only in (None, "", c[0]))
    started = time.time()
    plan = (
        Plan(4, 2)
        if smoke()
        else Plan(
            int(os.environ.get("LBEVAL_POWER_INPUTS", PLANNED)),
            int(os.environ.get("LBEVAL_POWER_REPS", REPS)),
        )
    )
    print(f"power: {plan.inputs} planned inputs x {plan.reps} timing repetitions, {seeds} seeds per cell, "
          f"load avg {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| noise | warm slowdown | limit | settled FAIL | median inputs to FAIL | median server-s to FAIL | "
          "settled PASS | not settled |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for noise, limit, effect in cells:
        outs = []
        for seed in range(seeds):
            with tempfile.TemporaryDirectory() as d:
                outs.append(one_session(Path(d), noise, effect, limit, seed, plan))
        print(cell_line(noise, effect, limit, outs), flush=True)
    print(f"power: {time.time() - started:.0f} s, load avg {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
