"""`lbeval ab BASE VARIANT --inputs FILE`: an interleaved A/B session on two live servers (eval/run/ab.py).

Each side's server: `--base-url-a/-b`, `--spec-a/-b`, or the launch spec named like the variant (as `lbeval run`).
`lbeval ab X X --base-url-a URL --base-url-b URL` with one server as both sides is the A/A noise floor.
`--base-url-a/-b` repeated (or specs with `replicas = N`): N replicas on each side, the pairs of replica i of A and
replica i of B running at once (eval/run/ab.py). The last
two lines printed on stdout are the two run directories. Exit codes as `lbeval run` (0 both complete, 3 not).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from eval.commands import run as run_command
from eval.commands.options import add_specs_option
from eval.errors import ConfigError
from eval.records.run_folder import read_manifest
from eval.records.stop import read_stop
from eval.redact import redacted_errors
from eval.run.ab import AbConfig, StopCheck, execute_ab
from eval.run.adaptive import TimingTarget, read_adaptive
from eval.run.runner import EXIT_INCOMPLETE, RunConfig
from eval.run.session import run_secrets
from eval.serve.launch_specs import spec_for_run
from eval.terminal import echo, echo_err

if TYPE_CHECKING:
    from eval.analyze.aa_floor import AaFloor

HELP = "Interleaved A/B: send every unit to two live servers in a seeded, balanced, paired order (resumable)."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", help="base variant name (side A)")
    p.add_argument("variant", help="variant name (side B); the same name twice is an A/A run")
    p.add_argument(
        "--base-url-a",
        action="append",
        help="side A's server, e.g. http://127.0.0.1:8000/v1; repeated: side A's replicas (as many as B's)",
    )
    p.add_argument(
        "--base-url-b",
        action="append",
        help="side B's server (may equal side A's: A/A on one server); repeated: side B's replicas",
    )
    p.add_argument(
        "--spec-a", metavar="NAME", help="side A's launch spec (default: the spec named like BASE)"
    )
    p.add_argument(
        "--spec-b", metavar="NAME", help="side B's launch spec (default: the spec named like VARIANT)"
    )
    add_specs_option(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the pairs' AB/BA order (default 0)")
    # every option of one `lbeval run`, for both sides
    run_command.add_side_arguments(
        p,
        passes="timing",
        seed="--sampling-seed",
        run_id="run directory name of both sides (default ab-<inputs hash>[-a|-b])",
    )
    p.add_argument(
        "--stop-when-settled",
        action="store_true",
        help="stop after the input where every enabled rule of the policy is settled (or one settled FAIL); "
        "re-running without it continues to the full run",
    )
    p.add_argument(
        "--policy", type=Path, help="the gate policy --stop-when-settled settles (default: the shipped one)"
    )
    p.add_argument(
        "--aa-floor",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="with --stop-when-settled: the two runs of an A/A session (lbeval ab X X, same inputs; folders or "
        "variant names under --out) whose floor a policy's max_change_aa_multiple reads; give the gate the "
        "same --aa-floor",
    )
    p.add_argument(
        "--timing-until",
        type=float,
        metavar="PCT",
        help="after the planned units, add paired timing repetitions until the warm-prefill change's 95%% "
        "confidence sequence has a half-width of at most PCT %% (docs/timing.md)",
    )
    p.add_argument(
        "--timing-budget",
        type=float,
        metavar="S",
        help="with --timing-until: stop adding repetitions before both servers' busy seconds exceed S",
    )
    run_command.add_scenario_arguments(
        p, "scenarios (as `lbeval run`; each scenario unit is a pair like the cache units)",
        "each scenario unit is sent to one server, then the other",
    )  # fmt: skip


def side_configs(args: argparse.Namespace) -> tuple[RunConfig, RunConfig]:
    """Both sides' RunConfigs: each side's server (--base-url-a/-b, --spec-a/-b, or the spec named like its
    variant, as `lbeval run`), the shared options for both; the same scenario settings on both sides (no launch
    spec `scenarios` table: the plans must match)."""
    configs: list[RunConfig] = []
    for variant, spec_name, urls in (
        (args.base, args.spec_a, args.base_url_a or []),
        (args.variant, args.spec_b, args.base_url_b or []),
    ):
        url = urls[0] if urls else None
        spec = spec_for_run(variant, spec_name, args.specs, url)
        if spec is None and url is None:
            raise ConfigError(f"{variant}: give --base-url-a/-b or a launch spec")
        config = run_command.run_config(args, variant, urls, spec, spec_scenarios=False)
        configs.append(replace(config, quiet=True))
    a, b = configs
    if args.run_id is not None:
        same = args.base == args.variant
        a = replace(a, run_id=args.run_id + ("-a" if same else ""))
        b = replace(b, run_id=args.run_id + ("-b" if same else ""))
    return a, b


def run(args: argparse.Namespace) -> int:
    check = _stop_check(args)
    target = _timing_target(args)  # a bad option stops here, before any server starts
    a, b = side_configs(args)
    # the managed servers are started by the session, once both run folders' locks are held
    secrets = run_secrets(a) | run_secrets(b)  # an error line leaving the session is printed by eval.cli
    with redacted_errors(secrets):
        dirs = execute_ab(AbConfig(a, b, args.seed, args.quiet, check, target))
    adaptive = read_adaptive(dirs[0])
    if adaptive is not None and args.timing_until is not None:
        echo_err(f"lbeval ab: {adaptive.headline()}")
    stop = read_stop(dirs[0])
    if stop is not None:  # stopped early by a settled decision: one line saying why
        echo_err(f"lbeval ab: {stop.headline()}")
        for run_dir in dirs:
            echo(run_dir)
        return 0
    complete = True
    for side, run_dir in zip("AB", dirs, strict=True):
        manifest = read_manifest(run_dir)
        for warning in manifest.warnings:
            echo_err(f"lbeval ab: {side}: warning: {warning}", secrets=secrets)
        complete = complete and manifest.complete
    state = "complete" if complete else "INCOMPLETE (re-run the same command to resume)"
    echo_err(f"lbeval ab: {state}")
    for run_dir in dirs:
        echo(run_dir)
    return 0 if complete else EXIT_INCOMPLETE


def _timing_target(args: argparse.Namespace) -> TimingTarget | None:
    if args.timing_until is None:
        if args.timing_budget is not None:
            raise ConfigError("--timing-budget is for --timing-until")
        return None
    if not 0.0 < args.timing_until < 100.0:
        raise ConfigError(f"--timing-until {args.timing_until:g}: a half-width in percent, in (0, 100)")
    if args.timing_budget is not None and not 0.0 < args.timing_budget < math.inf:
        raise ConfigError(f"--timing-budget {args.timing_budget:g}: server-seconds, > 0")
    if "timing" not in args.passes.split(","):
        raise ConfigError("--timing-until needs the timing pass (--passes ...,timing)")
    return TimingTarget(args.timing_until, args.timing_budget)


def _stop_check(args: argparse.Namespace) -> StopCheck | None:
    if not args.stop_when_settled:
        for option, given in (("--policy", args.policy), ("--aa-floor", args.aa_floor)):
            if given is not None:
                raise ConfigError(f"{option} is for --stop-when-settled (the gate takes its own {option})")
        return None
    from eval.gate.policy import load_policy  # heavy (analysis, scorers): imported when used
    from eval.gate.settle import stop_check

    policy = load_policy(args.policy)  # a bad policy stops here, before any server starts
    return stop_check(policy, _aa_floor(args))


def _aa_floor(args: argparse.Namespace) -> AaFloor | None:
    """The A/A floor of --aa-floor's runs, as `lbeval gate --aa-floor` computes it (its default bootstrap seed),
    so that the gate reproduces the stop; an A/A pair that cannot calibrate stops here (exit 2)."""
    if not args.aa_floor:
        return None
    from eval.analyze.aa_floor import aa_floor
    from eval.analyze.compare import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
    from eval.analyze.score import score_run
    from eval.records.run_folder import resolve_run

    a, b = (score_run(resolve_run(name, args.out)) for name in args.aa_floor)
    return aa_floor(a, b, seed=BOOTSTRAP_SEED, resamples=BOOTSTRAP_RESAMPLES)


def interrupted(args: argparse.Namespace) -> list[str]:
    """After Ctrl-C or SIGTERM (eval.cli prints these lines): how to resume both runs."""
    return [
        f"re-run the same lbeval ab command to resume both runs under {args.out}/ (complete pairs are kept; "
        "a pair left with one side done is re-run on the other side and marked rerun)"
    ]
