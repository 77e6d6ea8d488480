"""Power of the timing rule in the real engine (the real part): `python -m bench power-real`.

For each effect E in `--effects` (default 10,20 %): one interleaved session `lbeval ab cpu-smollm2
cpu-smollm2-warm-slowdown-E --stop-when-settled`. The variant is the engine-fault plugin's warm_slowdown (a sleep
of E % of an engine step's time after every step that has a prefix-hit request scheduled; outputs identical,
docs/faults.md), written as a launch spec into <runs>/power-real/specs.toml on top of
cpu-smollm2-fault-warm-slowdown. The plan: the 12 longbench-mini inputs of `make faults` (`--n 6`), `--passes
timing --scenarios cache --timing-reps R` (default 8); the session stops after the first input at which the
gate's verdict has settled (eval/gate/settle.py), else runs every input. Both servers are started by lbeval; only
one request runs at a time.

Per effect: the default gate's verdict and exit code, the rows that failed, the inputs run to the verdict
(ab_stop.json), the variant's server-seconds, and the gated warm prefill change (20 % trimmed mean, Yuen 97.5 %)
the rule read. With the shipped limit (+10 %) a +10 % slowdown cannot FAIL the three-way rule (its interval can
at best straddle the limit), by design; a +20 % one FAILs once the interval's lower end is above +10 %.
Writes <runs>/power-real/table.md and table.json.

With `--load`, a one-core CPU spinner (bench/bench_aa.Load, the A/A sessions' load) runs through each whole
session, the servers' start included: the "under load" cell.

`--timing-until PCT [--timing-budget S]` are lbeval ab's adaptive repetitions, passed on: the table then says how
many repetitions each session took and why it stopped.

    python -m bench power-real [--effects 10,20] [--reps 8] [--load] [--timing-until PCT [--timing-budget S]]
                               [--runs runs]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.aa_sessions import pct
from bench.bench_aa import Load
from bench.faults import Case, Failing, Outcome, ab_case, prepare
from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.atomic import atomic_write
from eval.errors import ConfigError
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import check_requirements

BASE = "cpu-smollm2-fault-warm-slowdown"
PER_DATASET = 6


@dataclass(frozen=True)
class Row:
    effect_pct: int
    loaded: bool  # the one-core spinner ran through the session
    outcome: Outcome  # bench faults' reading of the session: verdict, failed rows, inputs, server-seconds
    wall_s: float
    warm_change: float | None
    warm_low: float | None
    warm_high: float | None
    repetitions: str = (
        "fixed"  # with --timing-until: the adaptive record's headline (how many, why it stopped)
    )


def say(line: str) -> None:
    print(f"power-real: {line} (load {os.getloadavg()[0]:.1f})", flush=True)


def spec_name(effect: int) -> str:
    return f"cpu-smollm2-warm-slowdown-{effect}"


def write_specs(effects: list[int], path: Path) -> None:
    blocks = [
        f'[variants.{spec_name(e)}]\nextends = "{BASE}"\n'
        f'description = "FAULT: +{e}% engine-step time while a prefix-hit request is scheduled (bench power-real)"\n'
        f'env = {{ LBEVAL_FAULT = "warm_slowdown", LBEVAL_FAULT_SLOWDOWN = "{e / 100:g}" }}\n'
        for e in effects
    ]
    atomic_write(path, "\n".join(blocks))


def warm_interval(outcome: Outcome) -> tuple[float | None, float | None, float | None, str]:
    """The gated warm prefill change the rule read, from the session's two run folders, and how many
    repetitions it took (the adaptive record's headline, "fixed" without --timing-until)."""
    if len(outcome.run_dirs) != 2:
        return None, None, None, "fixed"
    base, variant = (Path(d) for d in outcome.run_dirs)
    c = compare(score_run(base), score_run(variant))
    adaptive = c.paired.adaptive if c.paired is not None else None
    reps = adaptive.headline() if adaptive is not None else "fixed"
    pm = c.paired.measures.get("warm_prefill_ms") if c.paired is not None else None
    if pm is None or pm.gated is None:
        return None, None, None, reps
    return pm.gated.estimate, pm.gated.ci_low, pm.gated.ci_high, reps


def run_effect(
    effect: int, inputs: Path, out: Path, specs: Path, args: argparse.Namespace, stamp: str
) -> Row:
    expect = (Failing("warm_prefill_change", ("timing/warm_prefill_ms",), "the warm path only"),)
    case = Case(f"warm_slowdown_{effect}", spec_name(effect), expect, "ab", ())
    # a run id per effect and invocation: the base side's default one would hold the previous effect's pairing
    plan = ["--specs", str(specs), "--passes", "timing", "--scenarios", "cache", "--timing-reps", str(args.reps),
            "--run-id", f"power-{effect}-{stamp}"]  # fmt: skip
    if args.timing_until is not None:
        plan += ["--timing-until", f"{args.timing_until:g}"]
    if args.timing_budget is not None:
        plan += ["--timing-budget", f"{args.timing_budget:g}"]
    t0 = time.monotonic()
    with Load() as load:
        if args.load:
            load.on()
        outcome = ab_case(case, inputs, out / "runs", out, plan)
    wall = time.monotonic() - t0
    change, low, high, reps = warm_interval(outcome)
    return Row(effect, args.load, outcome, round(wall, 1), change, low, high, reps)


def markdown(rows: list[Row], header: str) -> str:
    lines = [header, "", "| warm slowdown | one-core load | gate | failed rows | inputs to verdict | repetitions | "
             "variant server-s | wall s | warm prefill, gated [97.5% CI] |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        ci = f"{pct(r.warm_change)} [{pct(r.warm_low)}, {pct(r.warm_high)}]"
        o = r.outcome
        failed = ", ".join(o.caught_by) or "-"
        lines.append(f"| +{r.effect_pct}% | {'yes' if r.loaded else 'no'} | {o.verdict} (exit {o.exit_code}) | "
                     f"{failed} | {o.inputs} | {r.repetitions} | {o.server_s} | {r.wall_s:.0f} | {ci} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench power-real", description=__doc__.split("\n\n")[0])
    p.add_argument("--effects", default="10,20", help="warm slowdowns in %% (default 10,20)")
    p.add_argument("--reps", type=int, default=8, help="timing repetitions per input (default 8)")
    p.add_argument("--load", action="store_true", help="a one-core spinner through each session")
    p.add_argument(
        "--timing-until", type=float, default=None, help="lbeval ab --timing-until PCT (default off)"
    )
    p.add_argument("--timing-budget", type=float, default=None, help="lbeval ab --timing-budget S (server-s)")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="runs folder (default runs/)")
    args = p.parse_args(argv)
    try:
        args.effect_list = [int(e) for e in args.effects.split(",") if e.strip()]
    except ValueError:
        p.error(f"--effects: a comma list of whole percentages, not {args.effects!r}")
    if not args.effect_list or any(e <= 0 for e in args.effect_list) or args.reps < 1:
        p.error("--effects needs positive percentages and --reps at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        check_requirements(get_launch_spec(BASE))
    except ConfigError as exc:
        say(f"skipped ({exc})")
        return 0
    out = args.runs / "power-real"
    out.mkdir(parents=True, exist_ok=True)
    specs = out / "specs.toml"
    write_specs(args.effect_list, specs)
    inputs = prepare(args.runs, PER_DATASET)
    t0, rows, stamp = time.monotonic(), [], time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for effect in args.effect_list:
        say(f"+{effect}% warm slowdown, {2 * PER_DATASET} inputs x {args.reps} timing repetitions")
        rows.append(run_effect(effect, inputs, out, specs, args, stamp))
        r = rows[-1]
        say(f"  {r.outcome.verdict} after {r.outcome.inputs} inputs, {r.outcome.server_s} server-s: warm {pct(r.warm_change)} "
            f"[{pct(r.warm_low)}, {pct(r.warm_high)}]")  # fmt: skip
    header = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; `lbeval ab cpu-smollm2 "
              f"cpu-smollm2-warm-slowdown-E --stop-when-settled`, {2 * PER_DATASET} mini inputs, --passes timing "
              f"--scenarios cache --timing-reps {args.reps}{', a one-core spinner throughout' if args.load else ''}; "
              f"{time.monotonic() - t0:.0f} s in all, load average "
              f"{os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} cores")  # fmt: skip
    text = markdown(rows, header)
    atomic_write(out / "table.md", text)
    atomic_write(
        out / "table.json", json.dumps({"header": header, "rows": [asdict(r) for r in rows]}, indent=1)
    )
    print(text)
    return 0 if all(r.outcome.verdict != "ERROR" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
