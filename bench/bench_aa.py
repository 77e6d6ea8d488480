"""The A/A drift experiment on the real CPU server, both ways: sequential runs vs one `lbeval ab`.

One `cpu-smollm2` server (started here), the 12 longbench-mini inputs (6 Qasper + 6 GovReport, the server's
tokenizer), one-token timing only (`--passes timing --timing-reps 3`), and a CPU-bound load: a child process
spinning on one core (`python -c "while True: pass"`) on the 2-core machine.

  (a) sequential: `lbeval run` seq-idle with no load, then seq-load with the load on for the whole run;
      `lbeval compare`'s timing change (median ratio, bootstrap over inputs) of warm and cold prefill.
  (b) interleaved: `lbeval ab aa aa` with the one server as both sides (so the two sides differ in nothing but
      the time they ran: a pure A/A; two servers would add a server-to-server difference the A/A would then
      measure too), the load on during the middle half of the session (from the pair at 1/4 to the pair at
      3/4, switched by watching ab_pairs.jsonl grow); the paired change of adjacent requests, its 95% CI, the
      sequential-style figure of the same requests and compare's drift reading.

The goal: the interleaved CI contains 0 and lies within +-10 %, where the sequential one is off by
tens of percent. Other jobs on the machine add load this bench does not control: the 1-minute load average is
printed before and after each phase. Everything goes into a temporary folder (kept with LBEVAL_AA_KEEP=1);
the server and the load process are stopped on every exit path. Skips with one line when the server venv or the
model is absent (`make server-venv server-model`). `LBEVAL_AA_REPS` changes the repetitions (default 3).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bench import SMOKE_ENV, smoke
from eval.analyze.ab_timing import paired_values, session_pairs
from eval.analyze.compare import Change, Comparison, compare
from eval.analyze.score import score_run
from eval.errors import ConfigError
from eval.records.ab_pairs import read_pairs
from eval.records.run_folder import PAIRS_NAME
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import check_requirements, start
from scorers.paired_timing import TimingChange, UnpairedTimingChange

SPEC = "cpu-smollm2"
PER_DATASET = 6
MEASURES = {"warm_prefill_ms": "warm prefill", "cold_prefill_ms": "cold prefill"}
LOAD_FROM, LOAD_TO = 0.25, 0.75  # the interleaved session's load: from this fraction of its pairs to that one
GOAL_PCT = 10.0
BUSY_LOAD = 1.0  # a 1-min load average above this before the bench starts: other jobs are running
OWN_LOAD = 2.0  # above the core count by more than this during the bench: more than the server and the load


def _lbeval() -> list[str]:
    exe = Path(sys.executable).with_name("lbeval")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "import sys; from eval.cli import main; "
                                            "sys.exit(main(sys.argv[1:]))"]  # fmt: skip


def _run(*argv: str) -> None:
    proc = subprocess.run([*_lbeval(), *argv], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"lbeval {argv[0]} exited {proc.returncode}:\n{proc.stderr[-3000:]}")


SEEN_LOADS: list[float] = []  # the 1-min load averages printed during the bench


def _loadavg() -> str:
    SEEN_LOADS.append(os.getloadavg()[0])
    return f"{SEEN_LOADS[-1]:.2f}"


class Load:
    """One CPU-bound child process, on while `on()`..`off()`; killed on exit whatever happens."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.spans: list[tuple[float, float]] = []  # (on, off) wall times
        self._since = 0.0

    def on(self) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            self._since = time.time()

    def off(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self.spans.append((self._since, time.time()))

    def __enter__(self) -> Load:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.off()


@dataclass(frozen=True)
class Row:
    way: str
    measure: str
    change: float | None
    low: float | None
    high: float | None
    n_inputs: int
    load: str


def _common(inputs: Path, out: Path, reps: int) -> list[str]:
    return ["--inputs", str(inputs), "--out", str(out), "--passes", "timing", "--timing-reps", str(reps),
            "--quiet"]  # fmt: skip


def sequential(url: str, inputs: Path, out: Path, reps: int, load: Load) -> Comparison:
    say(f"(a) sequential: seq-idle without load (load average {_loadavg()})")
    _run("run", "--variant", "aa", "--base-url", url, "--run-id", "seq-idle", *_common(inputs, out, reps))
    say(f"(a) sequential: seq-load with the load on (load average {_loadavg()})")
    load.on()
    try:
        _run("run", "--variant", "aa", "--base-url", url, "--run-id", "seq-load", *_common(inputs, out, reps))
    finally:
        load.off()
    say(f"(a) done (load average {_loadavg()})")
    return compare(score_run(out / "aa" / "seq-idle"), score_run(out / "aa" / "seq-load"))


def interleaved(url: str, inputs: Path, out: Path, reps: int, load: Load, n_pairs: int) -> Comparison:
    say(f"(b) interleaved: lbeval ab aa aa, one server as both sides (load average {_loadavg()})")
    argv = ["ab", "aa", "aa", "--base-url-a", url, "--base-url-b", url, "--run-id", "interleaved"]
    pairs_file = out / "aa" / "interleaved-a" / PAIRS_NAME
    on_at, off_at = round(LOAD_FROM * n_pairs), round(LOAD_TO * n_pairs)
    proc = subprocess.Popen([*_lbeval(), *argv, *_common(inputs, out, reps)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        size = -1
        while proc.poll() is None:
            time.sleep(0.01)  # the next pair starts a few tens of ms after a pair's line is written
            now = pairs_file.stat().st_size if pairs_file.exists() else 0
            if now != size:
                size = now
                done = pairs_file.read_text().count("\n") if now else 0
                if on_at <= done < off_at:
                    load.on()
                elif done >= off_at:
                    load.off()
        _, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        load.off()
    if proc.returncode != 0:
        raise RuntimeError(f"lbeval ab exited {proc.returncode}:\n{(err or '')[-3000:]}")
    say(f"(b) done (load average {_loadavg()}); the load ran during pairs {on_at + 1}-{off_at} of {n_pairs}")
    return compare(score_run(out / "aa" / "interleaved-a"), score_run(out / "aa" / "interleaved-b"))


def load_effect(c: Comparison, measure: str, spans: list[tuple[float, float]]) -> float | None:
    """Side a's median in the loaded pairs over its median in the others, minus 1 (percent): what the load did."""
    pairs = session_pairs(c.base, c.variant)
    if pairs is None or not spans:
        return None
    values = paired_values(c.base, c.variant, pairs, measure)
    t0 = min(s for p in read_pairs(c.base.loaded.run_dir) for s in (p.a.start, p.b.start) if s is not None)
    on, off = spans[-1][0] - t0, spans[-1][1] - t0
    loaded = sorted(v for v, t in zip(values.a, values.times_s, strict=True) if on <= t < off)
    idle = sorted(v for v, t in zip(values.a, values.times_s, strict=True) if not on <= t < off)
    if not loaded or not idle:
        return None
    return (loaded[len(loaded) // 2] / idle[len(idle) // 2] - 1) * 100


def _row(way: str, label: str, t: Change | TimingChange | UnpairedTimingChange | None, load: str) -> Row:
    if t is None:
        return Row(way, label, None, None, None, 0, load)
    if isinstance(t, Change):
        return Row(way, label, t.estimate, t.low, t.high, t.n_inputs, load)
    return Row(way, label, t.estimate, t.ci_low, t.ci_high, t.n_inputs, load)


def rows(seq: Comparison, il: Comparison, n_pairs: int) -> list[Row]:
    out: list[Row] = []
    span = f"pairs {round(LOAD_FROM * n_pairs) + 1}-{round(LOAD_TO * n_pairs)} of {n_pairs}"
    for m, label in MEASURES.items():
        out.append(_row("sequential", label, seq.timing_changes.get(m), "the whole 2nd run"))
        pm = il.paired.measures.get(m) if il.paired else None
        out.append(_row("interleaved", label, pm.paired if pm else None, span))
        out.append(_row("  median pair", label, pm.paired_median if pm else None, span))
        out.append(_row("  as unpaired", label, pm.sequential_style if pm else None, span))
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def report(seq: Comparison, il: Comparison, n_pairs: int, load: Load) -> None:
    table = rows(seq, il, n_pairs)
    say("change = side B vs side A of an A/A (the truth is 0). sequential: seq-load vs seq-idle, median ratio, "
        "bootstrap over inputs (lbeval compare's timing table); interleaved: exp(mean log(b/a)) - 1 over the pairs "
        "of adjacent requests, cluster bootstrap over inputs; as unpaired: the same requests of the interleaved "
        "session as two samples")  # fmt: skip
    say(f"{'way':<17} {'measure':<13} {'change':>8}  {'95% CI':<18} {'inputs':>6}  load")
    for r in table:
        ci = f"[{_pct(r.low)}, {_pct(r.high)}]"
        say(f"{r.way:<17} {r.measure:<13} {_pct(r.change):>8}  {ci:<18} {r.n_inputs:>6}  {r.load}")
    for m, label in MEASURES.items():
        pm = il.paired.measures.get(m) if il.paired else None
        say(f"load effect on {label} within the interleaved session (side a, loaded vs idle pairs' medians): "
            f"{_pct(load_effect(il, m, load.spans))}")  # fmt: skip
        say(f"drift reading, {label}: {pm.reading if pm and pm.reading else 'n/a'}")
        p = pm.paired if pm else None
        ok = p is not None and p.ci_low <= 0 <= p.ci_high and max(-p.ci_low, p.ci_high) <= GOAL_PCT
        ch = seq.timing_changes.get(m)
        seq_off = ch is not None and not ch.low <= 0 <= ch.high
        say(f"goal, {label}: interleaved CI contains 0 and within +-{GOAL_PCT:g}%: {'yes' if ok else 'NO'}; "
            f"sequential CI excludes 0: {'yes' if seq_off else 'no'}")  # fmt: skip


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    if smoke():
        say(f"bench_aa: skipped ({SMOKE_ENV} set: it needs the real CPU server)")
        return
    spec = get_launch_spec(SPEC)
    try:
        check_requirements(spec)
    except ConfigError as exc:
        say(f"bench_aa: skipped ({exc})")
        return
    reps = int(os.environ.get("LBEVAL_AA_REPS", "3"))
    n_pairs = 2 * PER_DATASET * reps
    tmp = Path(tempfile.mkdtemp(prefix="lbeval-aa-"))
    t0 = time.monotonic()
    start_load = os.getloadavg()[0]
    say(f"bench_aa: A/A on {SPEC}, {2 * PER_DATASET} mini inputs, timing x{reps}; 1-min load average at start "
        f"{_loadavg()} on {os.cpu_count()} cores (other jobs' load is not controlled); folder {tmp}")  # fmt: skip
    try:
        with Load() as load, start(spec, log=tmp / "server.log") as server:
            say(f"server healthy after {server.healthy_after_s:.0f} s at {server.base_url}")
            inputs = tmp / "inputs.jsonl"
            _run("prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", str(PER_DATASET),
                 "--base-url", server.base_url, "--out", str(inputs))  # fmt: skip
            seq = sequential(server.base_url, inputs, tmp / "runs", reps, load)
            il = interleaved(server.base_url, inputs, tmp / "runs", reps, load, n_pairs)
        report(seq, il, n_pairs, load)
        say(f"bench_aa: {time.monotonic() - t0:.0f} s; 1-min load average at the end {_loadavg()}")
        busiest = max(SEEN_LOADS, default=0.0)
        if start_load > BUSY_LOAD or busiest > (os.cpu_count() or 1) + OWN_LOAD:
            say(f"note: other jobs ran (load average {start_load:.2f} at the start, up to {busiest:.2f}): other "
                "jobs' bursts last seconds and change a request's time several-fold, which pairs a few seconds "
                "apart do not cancel; the interleaved CI is then wider than on a quiet machine")  # fmt: skip
    finally:
        if os.environ.get("LBEVAL_AA_KEEP", "") in ("", "0"):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f"kept {tmp}")
