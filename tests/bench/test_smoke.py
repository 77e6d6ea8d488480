"""A smoke run of every `python -m bench` command in its smallest configuration (bench.SMOKE_ENV): each runs to
its end in seconds and prints the lines of its expected shape. Nothing is timed and no figure is judged (they mean
nothing at this size); the real-server commands start no server here: bench_aa and bench_gap's real part say
they skipped, and faults, aa-sessions and power-real are run to their option parsing only (`--help`, a bad
option); aa-methods and bench.plan_cost read a small A/A session of the fake server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import SMOKE_ENV
from tests.eval.aa_factory import session

ROOT = Path(__file__).resolve().parents[2]
NUM = r"[-+]?[0-9]+(?:\.[0-9]+)?"


def bench(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, SMOKE_ENV: "1"}
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def sections(stdout: str) -> dict[str, list[str]]:
    """`python -m bench`'s output split at its "== bench_<name>" lines."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in stdout.splitlines():
        if line.startswith("== "):
            name = line[3:]
            out[name] = []
        elif name:
            out[name].append(line)
    return out


def matching(lines: list[str], pattern: str) -> list[str]:
    return [ln for ln in lines if re.fullmatch(pattern, ln)]


# per bench module: (pattern, how many lines of its section must match it exactly)
SHAPES: dict[str, list[tuple[str, int]]] = {
    "bench_aa": [(r"bench_aa: skipped \(LBEVAL_BENCH_SMOKE set: it needs the real CPU server\)", 1)],
    "bench_adaptive": [
        (rf"adaptive: 2 A/A sessions per noise model, 12 inputs, .* load avg {NUM}", 1),
        # 6 noise models x 4 stop rules
        (rf"\| [a-z_]+ \| (fixed|added|cs|both) \| [0-2]/2 = {NUM}% \[{NUM}, {NUM}\] \| .* \| {NUM} \|", 24),
    ],
    "bench_bootstrap": [
        (
            rf"bootstrap: relative change, 200 resamples of 32 inputs x 5 reps: {NUM} ms \(median of 1\); .*",
            1,
        ),
        (rf"bootstrap: paired difference, 200 resamples of 32 examples: {NUM} ms \(median of 1\); .*", 1),
    ],
    "bench_client": [
        (rf"client CPU per request, (chat|completions) +(whole|streamed) *: median +{NUM} ms, best .*", 4),
        (
            rf"bytes per generated token on disk: +{NUM} \(whole record line; top-k alone +{NUM}; target < 200\)",
            1,
        ),
        (rf"record without top-k: +{NUM} bytes per token", 1),
    ],
    "bench_coverage": [
        (r"coverage: 2 A/A sessions per cell, 50 resamples, seed offset 0, load avg .*", 1),
        (
            rf"  [a-z_0-9]+ +mean rate {NUM}  worst {NUM} \[{NUM}, {NUM}\] \([a-z_]+, [0-9]+x[0-9]\)  (meets|FAILS) .*",
            11,
        ),
        (rf"  power yuen_trim20_975 (quiet|load ) \+[0-9]+% +[0-9]+ inputs x4: excludes 0 {NUM}, .*", 32),
    ],
    "bench_gap": [
        (rf"gap fake server: [0-9]+ one-token timing requests at concurrency 1: gap median {NUM} ms .*", 1),
        (r"gap real server: skipped \(LBEVAL_BENCH_SMOKE set\)", 1),
    ],
    "bench_power": [
        (r"power: 4 planned inputs x 2 timing repetitions, 1 seeds per cell, .*", 1),
        (r"\| quiet \| \+20 % \| \+10 % \| [01] of 1 \| .* \| [01] \| [01] \|", 1),
    ],
    "bench_replicas": [
        (
            r"default plan \(cold/warm/repeat/controls/timing, timing x2\), fake latency 100 ms, concurrency 1 each",
            1,
        ),
        (rf"\| 4 \| [12] \| [0-9]+ \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|  \| {NUM} \| {NUM} \|", 2),
        (rf"load average at the (start|end) \(1, 5, 15 min\): {NUM} {NUM} {NUM}", 2),
    ],
    "bench_scoring": [
        (rf"scoring: 42 rows in {NUM} s = [0-9]+ rows/s \(.*\), peak RSS .*", 2),
        (r"scoring: official rouge package on 3 English summary rows: .* identical floats on [0-3]/3", 1),
        (r"scoring: MISMATCH.*", 0),
    ],
    "bench_stop_check": [
        (rf"stop check after +4 of 4 inputs: from scratch +{NUM} ms .* per look .*", 1),
        (r"stop check over the whole session: 4 incremental looks .*", 1),
    ],
}


def test_every_bench_module_runs_its_smallest_configuration_and_prints_its_shape() -> None:
    proc = bench("bench")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = sections(proc.stdout)
    here = ROOT / "bench"
    assert sorted(got) == sorted(p.stem for p in here.glob("bench_*.py")) == sorted(SHAPES)
    for name, shapes in SHAPES.items():
        for pattern, count in shapes:
            assert len(matching(got[name], pattern)) == count, (name, pattern, got[name])


@pytest.mark.parametrize("command", ["faults", "aa-sessions", "power-real"])
def test_the_real_server_commands_parse_their_options(command: str) -> None:
    helped = bench("bench", command, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: python -m bench {command}")
    bad = bench("bench", command, "--no-such-option")
    assert bad.returncode == 2 and "unrecognized arguments: --no-such-option" in bad.stderr


def test_aa_methods_and_plan_cost_read_an_aa_session(tmp_path: Path) -> None:
    da, db = session(tmp_path, "aa", "aa", sigma=0.05)
    runs = da.parent.parent
    assert da.parent.name == "aa" and da.name.endswith("-a") and db.name == da.name[:-2] + "-b"
    proc = bench("bench", "aa-methods", str(runs), "--out", str(tmp_path / "methods.md"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = (tmp_path / "methods.md").read_text(encoding="utf-8")
    assert table == proc.stdout.removesuffix("\n")
    assert table.startswith("1 A/A sessions, warm and cold server prefill: every candidate interval")
    # one summary row per method of bench_coverage, then one row per measure of the one session
    assert len(re.findall(r"^\| [a-z_0-9]+ \| [0-9.]+% \| 2 \| [0-2] \| ", table, re.M)) == 11
    assert len(re.findall(rf"^\| {da.name[:-2]} \| (warm|cold) prefill \| ", table, re.M)) == 2
    assert "Blocks not one AB and one BA pair: none (every session as designed)" in table
    empty = bench("bench", "aa-methods", str(tmp_path / "nothing"))
    assert empty.returncode == 2 and "no A/A session" in empty.stdout
    cost = bench("bench.plan_cost", str(da))
    assert cost.returncode == 0, cost.stderr[-2000:]
    lines = cost.stdout.splitlines()
    assert re.fullmatch(
        rf"{re.escape(str(da))}: [0-9]+ records, {NUM} server-seconds \(6 cache inputs\)", lines[0]
    )
    assert len(matching(lines, r"  [a-z_ ]+ +[0-9.]+ s +[0-9]+ units +[0-9.]+ s/unit +[0-9]+ requests")) >= 2
