"""Every candidate interval on the pairs of real A/A sessions (the real part of the method selection):
`python -m bench aa-methods DIR [DIR ...] [--out PATH]`.

The coverage experiment (bench/bench_coverage.py) picks the gated interval on simulated sessions; this reads the
same candidates (its METHODS, each at its own nominal level) off real ones. DIR is a runs folder holding `lbeval
ab aa aa` sessions, `aa/<run_id>-a` beside `aa/<run_id>-b` (bench aa-sessions keeps its sessions under
<runs>/aa-sessions/runs). For each session and measure (warm and cold server prefill) it takes the session's
kept pairs (eval/analyze/ab_timing.paired_values: adjacent, both records ok, own figures) with their AB/BA
randomization blocks, and computes every method. In an A/A session an interval that excludes 0 is a false
alarm. Per method: how many of the intervals did, the rate with its Wilson 95 % interval against the method's
nominal rate, and the median width. A session whose blocks are not each one AB and one BA pair is named (the
randomization method assumes that design).

Writes PATH (default: aa-methods.md in the first DIR) and prints it.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.bench_coverage import FLIPS, METHODS, RESAMPLES, Session, wilson
from eval.analyze.ab_timing import paired_values, randomization_blocks, session_pairs
from eval.analyze.score import score_run
from eval.atomic import atomic_write
from eval.records.ab_pairs import PairRecord
from eval.records.run_folder import read_manifest
from scorers.paired_timing import TimingChange

MEASURES = {"warm_prefill_ms": "warm prefill", "cold_prefill_ms": "cold prefill"}  # the two the gate reads
SEED = 20261204  # the bootstraps' and the randomization draws' seed (every session and method)


@dataclass(frozen=True)
class Reading:
    session: str  # the run id, without its -a/-b
    measure: str
    method: str
    change: TimingChange | None  # None: the method has no interval here (too few inputs)


def sessions_in(dirs: list[Path]) -> tuple[list[tuple[str, Path, Path]], list[str]]:
    """The A/A sessions whose both runs are complete, and the ids of those left out (running, or cut short)."""
    found, left_out = [], []
    for d in dirs:
        for a in sorted((d / "aa").glob("*-a")):
            b = a.with_name(a.name[:-2] + "-b")
            if not b.is_dir():
                continue
            if read_manifest(a).complete and read_manifest(b).complete:
                found.append((a.name[:-2], a, b))
            else:
                left_out.append(a.name[:-2])
    return found, left_out


def unbalanced_blocks(pairs: list[PairRecord]) -> int:
    """Blocks of two pairs whose orders are not one AB and one BA (0 in a session of eval/run/ab.pair_orders)."""
    block_of = randomization_blocks(pairs)
    orders: dict[str, list[str]] = {}
    for p in pairs:
        orders.setdefault(block_of[p.unit], []).append(p.order)
    return sum(len(o) == 2 and sorted(o) != ["AB", "BA"] for o in orders.values())


def read_session(run_id: str, dir_a: Path, dir_b: Path) -> tuple[list[Reading], int]:
    ra, rb = score_run(dir_a), score_run(dir_b)
    pairs = session_pairs(ra, rb)
    if pairs is None:
        raise SystemExit(f"aa-methods: {dir_a} and {dir_b} are not one lbeval ab session")
    out: list[Reading] = []
    for measure in MEASURES:
        v = paired_values(ra, rb, pairs, measure)
        s = Session(v.input_ids, v.blocks, np.array(v.a), np.array(v.b))  # type: ignore[arg-type]
        for name, method in METHODS.items():
            try:
                change: TimingChange | None = method(s, SEED, RESAMPLES)
            except ValueError:  # too few inputs or pairs for this method
                change = None
            out.append(Reading(run_id, measure, name, change))
    return out, unbalanced_blocks(pairs)


def excludes_0(t: TimingChange) -> bool:
    return t.ci_low > 0 or t.ci_high < 0


def summary(readings: list[Reading]) -> list[str]:
    lines = ["| method | nominal level | intervals | excluding 0 | rate [Wilson 95%] | nominal rate | median width |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in METHODS:
        got = [r.change for r in readings if r.method == name and r.change is not None]
        if not got:
            continue
        k, n = sum(excludes_0(t) for t in got), len(got)
        lo, hi = wilson(k, n)
        widths = [t.ci_high - t.ci_low for t in got]
        width = f"{statistics.median(widths):.1f} points" if all(map(math.isfinite, widths)) else "unbounded"
        level = got[0].confidence
        lines.append(f"| {name} | {100 * level:g}% | {n} | {k} | {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] "
                     f"| {100 * (1 - level):.1f}% | {width} |")  # fmt: skip
    return lines


def per_session(readings: list[Reading], methods: tuple[str, ...]) -> list[str]:
    head = " | ".join(methods)
    lines = [f"| session | measure | {head} |", "|---|---|" + "---|" * len(methods)]
    keys = list(dict.fromkeys((r.session, r.measure) for r in readings))
    by = {(r.session, r.measure, r.method): r.change for r in readings}
    for session, measure in keys:
        cells = []
        for m in methods:
            t = by.get((session, measure, m))
            cells.append("n/a" if t is None else f"{t.estimate:+.1f}% [{t.ci_low:+.1f}, {t.ci_high:+.1f}]"
                         f"{' **excl. 0**' if excludes_0(t) else ''}")  # fmt: skip
        lines.append(f"| {session} | {MEASURES[measure]} | {' | '.join(cells)} |")
    return lines


def markdown(readings: list[Reading], unbalanced: dict[str, int], left_out: list[str]) -> str:
    n_sessions = len({r.session for r in readings})
    lines = [f"{n_sessions} A/A sessions, warm and cold server prefill: every candidate interval "
             f"(bench/bench_coverage.py METHODS; bootstraps {RESAMPLES} resamples, randomization {FLIPS} "
             f"flips, seed {SEED})", "", *summary(readings), ""]  # fmt: skip
    lines += per_session(
        readings, ("yuen_trim20_975", "t_mean_975", "randomization", "hodges_lehmann", "boot_t")
    )
    bad = {s: k for s, k in unbalanced.items() if k}
    lines += [
        "",
        "Blocks not one AB and one BA pair: "
        + (", ".join(f"{s}: {k}" for s, k in bad.items()) if bad else "none (every session as designed)"),
    ]
    if left_out:
        lines += ["", f"Left out, their runs not complete (running, or cut short): {', '.join(left_out)}"]
    return "\n".join(lines) + "\n"


def table(sessions: list[tuple[str, Path, Path]], left_out: list[str]) -> str:
    """Every method on each of these sessions (from sessions_in), as markdown."""
    readings: list[Reading] = []
    unbalanced: dict[str, int] = {}
    for run_id, a, b in sessions:
        got, unbalanced[run_id] = read_session(run_id, a, b)
        readings += got
    return markdown(readings, unbalanced, left_out)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench aa-methods", description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, help="runs folders holding aa/<run_id>-a and aa/<run_id>-b")
    p.add_argument("--out", type=Path, default=None, help="the table's path (default DIR/aa-methods.md)")
    args = p.parse_args(argv)
    found, left_out = sessions_in(args.dirs)
    if not found:
        if left_out:
            print(f"aa-methods: left out (not complete): {', '.join(left_out)}")
        print(
            f"aa-methods: no A/A session (aa/<id>-a beside aa/<id>-b) under {', '.join(map(str, args.dirs))}"
        )
        return 2
    text = table(found, left_out)
    atomic_write(args.out or args.dirs[0] / "aa-methods.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
