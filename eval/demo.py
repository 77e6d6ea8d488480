"""`make demo`: the whole suite on the shipped longbench-mini sample, two variants of the embedded CPU server.

    python -m eval.demo [--base cpu-smollm2] [--variant cpu-smollm2-fp8kv] [--out runs/demo] ...

Steps (each printed with the command a user would type, and timed):
1. start the base variant's server (eval/serve/variants.toml) and, with its tokenizer, `lbeval prepare --source mini`;
2. `lbeval run` the base variant on that server (cold, warm, repeat, timing and control passes, then the batch,
   hitlen (hit lengths around one and two blocks) and repeats scenarios on 2 of the inputs with 8-token
   outputs: the attribution table); stop it;
3. `lbeval run --spec VARIANT`: lbeval starts the second variant's server, runs (with the hitlen scenario on the
   same 2 inputs, so that the gate's hitlen_cache_honoured has both runs), and stops it;
4. `lbeval score` both runs, `lbeval compare` them, `lbeval gate` (its verdict is printed, not enforced);
5. print where the report is.
Re-running reuses complete runs in the output folder (the run ids follow the inputs); delete it to start over.
`make demo` builds the server venv and the model first (`make server-venv server-model`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from eval.cli import main as lbeval
from eval.errors import EXIT_INTERRUPTED, LbevalError
from eval.records.run_folder import append_server_record
from eval.run.resume import records_kept, run_dir_for
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import sigterm_as_interrupt, start
from eval.terminal import echo, echo_err

DEFAULT_BASE = "cpu-smollm2"
DEFAULT_VARIANT = "cpu-smollm2-fp8kv"
HEARTBEAT_S = 60.0  # off a terminal (no progress bars): a line this often during a run step


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m eval.demo", description=__doc__.split("\n", 1)[0])
    p.add_argument("--base", default=DEFAULT_BASE, help="base launch spec (default %(default)s)")
    p.add_argument("--variant", default=DEFAULT_VARIANT, help="compared launch spec (default %(default)s)")
    p.add_argument(
        "--specs", type=Path, action="append", default=[], metavar="FILE", help="launch specs file"
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder (default %(default)s)")
    p.add_argument("--datasets", default="qasper,gov_report")
    p.add_argument("--n", default="6", help="rows per dataset of the mini sample (default: all 6)")
    p.add_argument(
        "--max-tokens", default="qasper=16,gov_report=32", help="output limits (default %(default)s)"
    )
    p.add_argument("--timing-reps", default="3", help="timing repetitions per input (default %(default)s)")
    p.add_argument(
        "--scenarios",
        default="cache,batch,hitlen,repeats",
        help="the base run's scenarios (default %(default)s)",
    )
    p.add_argument(
        "--variant-scenarios",
        default="cache,hitlen",
        help="the variant run's scenarios (default %(default)s)",
    )
    p.add_argument("--batch-sizes", default="1,4", help="batch scenario (default %(default)s)")
    p.add_argument("--repeats", default="4", help="repeats scenario (default %(default)s)")
    p.add_argument(
        "--hit-lengths",
        default="127,128,129,255,256,257",
        help="hitlen scenario: the lengths around one and two blocks (default %(default)s; the full set of "
        "`lbeval run` adds 3 blocks, the last block and n-1, about twice the cost)",
    )
    p.add_argument("--scenario-inputs", default="2", help="inputs the scenarios run on (default %(default)s)")
    p.add_argument("--scenario-max-tokens", default="8", help="scenario output limit (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (default when not on a terminal)")
    return p.parse_args(argv)


class Steps:
    """Prints each step with its command line, runs it through the lbeval CLI, and times it."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.times: list[tuple[str, float]] = []

    def say(self, message: str) -> None:
        echo(f"[demo {time.monotonic() - self.t0:6.0f} s] {message}", flush=True)

    def lbeval(self, title: str, argv: list[str], ok: Sequence[int] = (0,), watch: Path | None = None) -> int:
        """Run one step; `watch`: the run folder it writes (a heartbeat line off a terminal)."""
        self.say(f"{title}\n  $ lbeval {' '.join(argv)}")
        t = time.monotonic()
        with self.heartbeat(title, watch):
            code = lbeval(argv)
        self.times.append((title, time.monotonic() - t))
        if code == EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        if code not in ok:
            raise LbevalError(f"demo: `lbeval {argv[0]}` exited with {code}")
        self.say(f"{title.split(' (')[0]}: done in {time.monotonic() - t:.0f} s (exit {code})")
        return code

    @contextlib.contextmanager
    def heartbeat(self, title: str, run_dir: Path | None) -> Iterator[None]:
        """Without progress bars (stderr not a terminal), a line every HEARTBEAT_S with the records so far."""
        if run_dir is None or sys.stderr.isatty():
            yield
            return
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                self.say(f"{title.split(' (')[0]}: {records_kept(run_dir)} records so far")

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def run_argv(args: argparse.Namespace, variant: str, inputs: Path) -> list[str]:
    argv = ["run", "--variant", variant, "--inputs", str(inputs), "--out", str(args.out / "runs")]
    argv += ["--timing-reps", args.timing_reps, *(f"--specs={f}" for f in args.specs)]
    scenarios = args.scenarios if variant == args.base else args.variant_scenarios
    argv += ["--scenarios", scenarios, "--batch-sizes", args.batch_sizes, "--repeats", args.repeats]
    argv += ["--hit-lengths", args.hit_lengths]
    argv += ["--scenario-inputs", args.scenario_inputs, "--scenario-max-tokens", args.scenario_max_tokens]
    return argv + (["--quiet"] if args.quiet or not sys.stderr.isatty() else [])


def demo(args: argparse.Namespace) -> Path:
    steps = Steps()
    inputs = args.out / "inputs.jsonl"
    base_spec = get_launch_spec(args.base, args.specs)
    get_launch_spec(args.variant, args.specs)  # fail now, not after the base run, on a bad name
    steps.say(f"base {args.base}: {base_spec.description}")
    t = time.monotonic()
    with start(base_spec, echo=steps.say) as server:
        steps.times.append((f"start {args.base}", time.monotonic() - t))
        prepare = ["prepare", "--source", "mini", "--datasets", args.datasets, "--n", args.n]
        prepare += ["--base-url", server.base_url, "--max-tokens", args.max_tokens, "--out", str(inputs)]
        steps.lbeval("1. prepare the inputs with the server's tokenizer", prepare)
        run_base = [*run_argv(args, args.base, inputs), "--base-url", server.base_url]
        steps.lbeval(f"2. run {args.base} on that server", run_base, watch=_run_dir(args, args.base))
        latest = args.out / "runs" / args.base / "LATEST"
        append_server_record(latest.parent / latest.read_text(encoding="utf-8").strip(), server.describe())
    steps.lbeval(
        f"3. run {args.variant} (lbeval starts and stops its server)",
        run_argv(args, args.variant, inputs),
        watch=_run_dir(args, args.variant),
    )
    runs = str(args.out / "runs")
    for name in (args.base, args.variant):
        steps.lbeval(f"4. score {name}", ["score", name, "--runs", runs])
    steps.lbeval("5. compare", ["compare", args.base, args.variant, "--runs", runs])
    verdict = steps.lbeval(
        "6. release gate (verdict shown, not enforced here)",
        ["gate", args.base, args.variant, "--runs", runs],
        ok=(0, 1, 2),
    )
    report: Path = args.out / "runs" / "compare" / f"{args.base}__{args.variant}"
    steps.say("timings: " + "; ".join(f"{title.split(' (')[0]} {s:.0f} s" for title, s in steps.times))
    steps.say(f"gate exit code {verdict} (0 pass, 1 a rule fails, 2 no verdict)")
    steps.say(
        f"done in {time.monotonic() - steps.t0:.0f} s. Report: {report / 'report.md'} (and report.html)"
    )
    return report


def _run_dir(args: argparse.Namespace, variant: str) -> Path | None:
    return run_dir_for(args.out / "runs", variant, args.out / "inputs.jsonl")


def interrupted_lines(args: argparse.Namespace) -> list[str]:
    """The records each run kept, and how to resume."""
    lines = []
    for variant in (args.base, args.variant):
        run_dir = _run_dir(args, variant)
        if run_dir is not None and run_dir.is_dir():
            lines.append(f"demo: {variant}: {records_kept(run_dir)} records kept in {run_dir}")
    return lines + ["demo: `make demo` (or the same python -m eval.demo command) again resumes"]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with sigterm_as_interrupt():
            demo(args)
    except LbevalError as exc:
        echo_err(f"demo: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        echo_err("demo: interrupted (servers stopped)")
        for line in interrupted_lines(args):
            echo_err(line)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
