"""Repeated real A/A sessions under load: `python -m bench aa-sessions`.

One `cpu-smollm2` server (started here) is both sides of K `lbeval ab aa aa` sessions (default 5) on the 12
longbench-mini inputs (6 Qasper + 6 GovReport, the server's tokenizer), one-token timing only (`--passes timing
--scenarios cache --timing-reps R`, default 8, the first count that met +-10 % at 12 inputs; no scenario units,
whose requests are not timing pairs). Session i runs with `--seed i`, so every session draws its own AB/BA order
and input order. In each session a one-core CPU spinner (`python -c "while True: pass"`) runs from the pair at
3/4 of the planned pairs to the session's end (switched by watching ab_pairs.jsonl grow): with fixed repetitions
that is the session's last quarter, the case a paired interval must survive. With `--timing-until PCT`
(lbeval's adaptive repetitions; `--timing-budget S` caps the server-seconds) the session stops when the
half-widths of the always-valid confidence sequence and of the gated interval are both at most PCT, or the
budget is spent. By default (`--load-until end`) the spinner stays on through the whole added phase, so more
than a quarter is loaded; `--load-until planned` turns it off at the last planned pair (the last quarter of the
session as planned, the A/A experiment's shape), and the added repetitions run without it.

For each session and measure (warm and cold server prefill) it reads the figure the gate reads (the gated 20%
trimmed mean of the per-input log ratios with Yuen's interval, `PairedMeasure.gated`) and the paired mean, and
checks the goal: the interval contains 0 (nothing changed) and its ends lie within +-10 %. Writes
<runs>/aa-sessions/table.md and table.json; every session's run folders are kept under <runs>/aa-sessions/runs.
The table also holds every candidate interval of bench/aa_methods.py on this invocation's sessions (their
false-alarm counts). Prints the 1-minute load average before and after each session: other jobs on the machine
add load this bench does not control.

    python -m bench aa-sessions [--sessions 5] [--reps 8] [--timing-until 10 [--timing-budget 900]]
                                [--load-until end|planned] [--runs runs]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import aa_methods
from bench.aa_methods import MEASURES
from bench.bench_aa import Load
from bench.faults import lbeval_argv
from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.atomic import atomic_write
from eval.errors import ConfigError
from eval.records.run_folder import PAIRS_NAME
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import check_requirements, start
from scorers.paired_timing import TimingChange

SPEC = "cpu-smollm2"
PER_DATASET = 6
LOAD_FROM = 0.75  # the spinner starts at this fraction of the session's planned pairs and runs to its end
GOAL_PCT = 10.0
LOAD_UNTIL = {"end": "its end", "planned": "its last planned pair"}  # --load-until


@dataclass(frozen=True)
class Figure:
    session: int
    measure: str
    figure: str  # "gated" (what the gate reads) | "paired mean"
    change: float | None
    low: float | None
    high: float | None
    n_inputs: int
    contains_0: bool
    within_goal: bool  # both ends within +-GOAL_PCT


@dataclass(frozen=True)
class Session:
    index: int
    seconds: float
    load_before: float
    load_after: float
    pairs: int
    stopped: str  # the adaptive record's reason, or "fixed repetitions"
    spinner_s: float = 0.0  # the one-core spinner's wall seconds in the session


def say(line: str) -> None:
    print(f"aa-sessions: {line}", flush=True)


def prepare(url: str, out: Path) -> Path:
    inputs = out / "inputs-mini-12.jsonl"
    argv = ["prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", str(PER_DATASET)]
    proc = subprocess.run(
        [*lbeval_argv(), *argv, "--base-url", url, "--out", str(inputs)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"aa-sessions: prepare failed: {proc.stderr.strip().splitlines()[-1:]}")
    return inputs


def run_session(
    url: str, inputs: Path, runs: Path, run_id: str, seed: int, args: argparse.Namespace
) -> tuple[float, float]:
    """One `lbeval ab aa aa` (its AB/BA order seeded with `seed`) with the spinner on from LOAD_FROM of the
    planned pairs to the session's end (--load-until end) or to the last planned pair (--load-until planned);
    its wall seconds and the spinner's."""
    argv = ["ab", "aa", "aa", "--base-url-a", url, "--base-url-b", url, "--run-id", run_id, "--inputs", str(inputs),
            "--out", str(runs), "--passes", "timing", "--scenarios", "cache", "--timing-reps", str(args.reps),
            "--seed", str(seed), "--quiet"]  # fmt: skip
    if args.timing_until:
        argv += ["--timing-until", str(args.timing_until)]
    if args.timing_budget:
        argv += ["--timing-budget", str(args.timing_budget)]
    pairs_file = runs / "aa" / f"{run_id}-a" / PAIRS_NAME
    planned = 2 * PER_DATASET * args.reps
    on_at = round(LOAD_FROM * planned)
    t0 = time.monotonic()
    with Load() as load:
        proc = subprocess.Popen(
            [*lbeval_argv(), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            while proc.poll() is None:
                time.sleep(0.05)
                sent = pairs_file.read_text().count("\n") if pairs_file.exists() else 0
                if sent >= planned and args.load_until == "planned":
                    load.off()
                elif sent >= on_at and not load.spans:
                    load.on()
            _, err = proc.communicate()
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(60)
    if proc.returncode != 0:
        raise SystemExit(f"aa-sessions: lbeval ab exited {proc.returncode}: {(err or '').strip()[-2000:]}")
    return time.monotonic() - t0, sum(off - on for on, off in load.spans)


def figure(session: int, measure: str, name: str, t: TimingChange | None) -> Figure:
    if t is None:
        return Figure(session, measure, name, None, None, None, 0, False, False)
    return Figure(session, measure, name, t.estimate, t.ci_low, t.ci_high, t.n_inputs,
                  t.ci_low <= 0 <= t.ci_high, max(-t.ci_low, t.ci_high) <= GOAL_PCT)  # fmt: skip


def read_session(runs: Path, run_id: str, index: int) -> tuple[list[Figure], int, str]:
    c = compare(score_run(runs / "aa" / f"{run_id}-a"), score_run(runs / "aa" / f"{run_id}-b"))
    if c.paired is None:
        raise SystemExit(f"aa-sessions: session {run_id} has no paired timing")
    out: list[Figure] = []
    for m, label in MEASURES.items():
        pm = c.paired.measures.get(m)
        out.append(figure(index, label, "gated", pm.gated if pm else None))
        out.append(figure(index, label, "paired mean", pm.paired if pm else None))
    adaptive = c.paired.adaptive
    stopped = adaptive.headline() if adaptive is not None else "fixed repetitions"
    return out, c.paired.pairs, stopped


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def markdown(figures: list[Figure], sessions: list[Session], header: str) -> str:
    lines = [header, "", "| session | measure | figure | change | CI | inputs | contains 0 | within +-10% |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for f in figures:
        ci = f"[{pct(f.low)}, {pct(f.high)}]"
        lines.append(f"| {f.session} | {f.measure} | {f.figure} | {pct(f.change)} | {ci} | {f.n_inputs} | "
                     f"{'yes' if f.contains_0 else 'NO'} | {'yes' if f.within_goal else 'NO'} |")  # fmt: skip
    lines += [
        "",
        "| session | seconds | spinner s | pairs | load before | load after | stopped |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {s.index} | {s.seconds:.0f} | {s.spinner_s:.0f} | {s.pairs} | {s.load_before:.1f} | "
              f"{s.load_after:.1f} | {s.stopped} |" for s in sessions]  # fmt: skip
    gated = [f for f in figures if f.figure == "gated"]
    ok = sum(f.contains_0 and f.within_goal for f in gated)
    lines += [
        "",
        f"Goal (every gated interval contains 0 and lies within +-{GOAL_PCT:g}%): {ok} of {len(gated)}.",
    ]
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench aa-sessions", description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=5, help="A/A sessions (default 5)")
    p.add_argument("--reps", type=int, default=8, help="timing repetitions per session (default 8)")
    p.add_argument(
        "--timing-until", type=float, default=None, help="lbeval ab --timing-until PCT (default off)"
    )
    p.add_argument(
        "--timing-budget", type=float, default=None, help="lbeval ab --timing-budget S (default: none)"
    )
    p.add_argument(
        "--load-until", choices=sorted(LOAD_UNTIL), default="end",
        help="the spinner runs to the session's end (default; through any added repetitions) or to its last "
        "planned pair (the last quarter of the session as planned; added repetitions run without it)",
    )  # fmt: skip
    p.add_argument("--runs", type=Path, default=Path("runs"), help="runs folder (default runs/)")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    spec = get_launch_spec(SPEC)
    try:
        check_requirements(spec)
    except ConfigError as exc:
        say(f"skipped ({exc})")
        return 0
    out = args.runs / "aa-sessions"
    out.mkdir(parents=True, exist_ok=True)
    t0, stamp = time.monotonic(), time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    figures: list[Figure] = []
    sessions: list[Session] = []
    with start(spec, log=out / "server.log") as server:
        say(f"server healthy after {server.healthy_after_s:.0f} s at {server.base_url}")
        inputs = prepare(server.base_url, out)
        for i in range(1, args.sessions + 1):
            before = os.getloadavg()[0]
            say(f"session {i} of {args.sessions} (load average {before:.1f})")
            run_id = f"aa-{stamp}-{i}"
            seconds, spinner_s = run_session(server.base_url, inputs, out / "runs", run_id, i, args)
            found, pairs, stopped = read_session(out / "runs", run_id, i)
            figures += found
            sessions.append(Session(i, seconds, before, os.getloadavg()[0], pairs, stopped, spinner_s))
            for f in found:
                say(f"  {f.measure} {f.figure}: {pct(f.change)} [{pct(f.low)}, {pct(f.high)}]")
    header = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.sessions} A/A sessions of `lbeval ab aa aa` "
              f"on one {SPEC} server, {2 * PER_DATASET} mini inputs, --passes timing --timing-reps {args.reps}"
              f"{f' --timing-until {args.timing_until:g}' if args.timing_until else ''}"
              f"{f' --timing-budget {args.timing_budget:g}' if args.timing_budget else ''}; a one-core spinner from "
              f"{LOAD_FROM:.0%} of each session's planned pairs to {LOAD_UNTIL[args.load_until]}; {time.monotonic() - t0:.0f} s in all on "
              f"{os.cpu_count()} cores")  # fmt: skip
    text = markdown(figures, sessions, header)
    complete, left_out = aa_methods.sessions_in([out / "runs"])
    mine = f"aa-{stamp}-"  # this invocation's sessions only
    text += "\n" + aa_methods.table(
        [c for c in complete if c[0].startswith(mine)], [r for r in left_out if r.startswith(mine)]
    )
    atomic_write(out / "table.md", text)
    data = {
        "header": header,
        "figures": [asdict(f) for f in figures],
        "sessions": [asdict(s) for s in sessions],
    }
    atomic_write(out / "table.json", json.dumps(data, indent=1) + "\n")
    print(text)
    gated = [f for f in figures if f.figure == "gated"]
    return 0 if all(f.contains_0 and f.within_goal for f in gated) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
