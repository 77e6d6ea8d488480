"""`make demo`: the whole suite on the shipped longbench-mini sample, two variants of the embedded CPU server.

    python -m eval.demo [--base cpu-smollm2] [--variant cpu-smollm2-fp8kv] [--out runs/demo] ...

Steps (each printed with the command a user would type, and timed):
1. start the base variant's server (eval/serve/variants.toml) and, with its tokenizer, `lbeval prepare --source mini`;
2. `lbeval ab BASE VARIANT --base-url-a URL`: lbeval starts the second variant's server, both live at once (about
   8 GB together), and every unit goes to both in a seeded, balanced, paired order (README "Interleaved A/B"):
   the cold, warm, repeat, timing and control passes, then the batch, hitlen (hit lengths around one and two
   blocks) and repeats scenarios on 2 of the inputs with 8-token outputs. Both sides must run the very same plan,
   so both run every scenario: the attribution table has both columns, and the gate's hitlen_cache_honoured
   both runs. The second server is stopped after the session, the first one then;
3. `lbeval score` both runs, `lbeval compare` them (with the paired-in-time timing table: the paired change, the
   sequential-style figure beside it, the drift reading), `lbeval gate` (its verdict is printed, not enforced);
4. print where the report is.
Re-running resumes the session, or reuses its complete runs (the run ids follow the inputs); delete the output
folder to start over.
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
from eval.commands.options import add_specs_option
from eval.errors import EXIT_INTERRUPTED, LbevalError
from eval.prepare.inputs import inputs_digest
from eval.records.run_folder import append_server_record
from eval.run.resume import records_kept, run_dir_for
from eval.serve.cpu_features import fp8_kv_cache
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import sigterm_as_interrupt, start
from eval.terminal import echo, echo_err

DEFAULT_BASE = "cpu-smollm2"
DEFAULT_VARIANT = "cpu-smollm2-fp8kv"
# where the CPU cannot keep an fp8 KV cache (no AVX-512 or AMX: eval/serve/cpu_features.py), the worked example's
# variant instead: two bugs inside the engine (partial-prefix numerics, a slower warm path; README)
FALLBACK_VARIANT = "cpu-smollm2-before-fix"
HEARTBEAT_S = 60.0  # off a terminal (no progress bars): a line this often during a run step


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m eval.demo", description=__doc__.split("\n", 1)[0])
    p.add_argument("--base", default=DEFAULT_BASE, help="base launch spec (default %(default)s)")
    p.add_argument(
        "--variant",
        default=None,
        help=f"compared launch spec (default {DEFAULT_VARIANT}; {FALLBACK_VARIANT} on a CPU without AVX-512 or AMX)",
    )
    add_specs_option(p)
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
        help="both runs' scenarios (default %(default)s)",
    )
    p.add_argument("--seed", default="0", help="lbeval ab's seed of the pairs' order (default %(default)s)")
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


PASSES = "cold,warm,repeat,controls,timing"  # every pass of the cache scenario (lbeval ab's default: timing)


def ab_argv(args: argparse.Namespace, inputs: Path, base_url: str) -> list[str]:
    """`lbeval ab` of both variants: side A on the demo's server, side B's launch spec started by lbeval."""
    argv = ["ab", args.base, args.variant, "--inputs", str(inputs), "--out", str(args.out / "runs")]
    argv += ["--base-url-a", base_url, "--seed", args.seed, "--passes", PASSES]
    argv += ["--timing-reps", args.timing_reps, *(f"--specs={f}" for f in args.specs)]
    argv += ["--scenarios", args.scenarios, "--batch-sizes", args.batch_sizes, "--repeats", args.repeats]
    argv += ["--hit-lengths", args.hit_lengths]
    argv += ["--scenario-inputs", args.scenario_inputs, "--scenario-max-tokens", args.scenario_max_tokens]
    return argv + (["--quiet"] if args.quiet or not sys.stderr.isatty() else [])


def demo(args: argparse.Namespace) -> Path:
    steps = Steps()
    if args.variant is None:
        args.variant = DEFAULT_VARIANT if fp8_kv_cache() else FALLBACK_VARIANT
        if args.variant == FALLBACK_VARIANT:
            steps.say(
                f"variant {FALLBACK_VARIANT}: this CPU has no AVX-512 or AMX, which {DEFAULT_VARIANT}'s fp8 KV "
                "cache needs on vLLM's CPU build"
            )
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
        title = f"2. interleaved A/B: {args.base} on that server, {args.variant} on one lbeval starts"
        base_dir = _run_dir(args, "a")
        steps.lbeval(title, ab_argv(args, inputs, server.base_url), watch=base_dir)
        if base_dir is not None:  # lbeval ab notes the servers it started; this one the demo started
            append_server_record(base_dir, server.describe())
    runs = str(args.out / "runs")
    for name in (args.base, args.variant):
        steps.lbeval(f"3. score {name}", ["score", name, "--runs", runs])
    steps.lbeval("4. compare", ["compare", args.base, args.variant, "--runs", runs])
    verdict = steps.lbeval(
        "5. release gate (verdict shown, not enforced here)",
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


def _run_dir(args: argparse.Namespace, side: str) -> Path | None:
    """Where the demo's `lbeval ab` session writes side a's (the base's) or b's run: lbeval ab's default run id,
    ab-<inputs hash>, with -a/-b when both sides are one variant (eval/run/ab.ab_run_ids); None before the
    inputs exist."""
    inputs = args.out / "inputs.jsonl"
    try:
        run_id = f"ab-{inputs_digest(inputs)[:12]}"
    except (OSError, LbevalError):
        return None
    same = args.base == args.variant
    return run_dir_for(
        args.out / "runs",
        args.base if side == "a" else args.variant,
        inputs,
        run_id + (f"-{side}" if same else ""),
    )


def interrupted_lines(args: argparse.Namespace) -> list[str]:
    """The records each run kept, and how to resume."""
    lines = []
    for variant, side in ((args.base, "a"), (args.variant, "b")):
        run_dir = _run_dir(args, side)
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
