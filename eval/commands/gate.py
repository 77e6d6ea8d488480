"""`lbeval gate BASE VARIANT`: a release verdict from a policy; exit 0 pass, 1 fail, 2 no verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval.commands.compare import (
    add_aa_floor_argument,
    add_policy_argument,
    add_run_pair_arguments,
    score_pair,
    with_aa_floor,
)
from eval.errors import ConfigError, LbevalError, UsageError
from eval.gate.junit import write_junit
from eval.gate.policy import load_policy
from eval.gate.verdict import Verdict, no_verdict
from eval.report.console import cause_lines, gate_lines, hang, policy_floor
from eval.terminal import echo

HELP = "Release gate: check a policy (TOML) on base vs variant; exit 0 pass, 1 a rule fails, 2 no verdict."


def configure(p: argparse.ArgumentParser) -> None:
    add_run_pair_arguments(p)
    add_policy_argument(p)
    add_aa_floor_argument(p)
    p.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML, one test case per rule")


def verdict_for(args: argparse.Namespace) -> Verdict:
    policy = load_policy(args.policy)  # a bad policy is a ConfigError: exit 78, not a verdict
    echo("\n".join(hang(f"lbeval gate: policy {policy.source}")))
    from eval.analyze.compare import BOOTSTRAP_SEED  # heavy (scorers): imported when used
    from eval.gate.settle import compare_and_gate

    try:
        base, variant = score_pair(args)
        # mismatches are not an error here: they make the verdict's data reasons (exit 2, each one named);
        # a stopped lbeval ab session is judged on the inputs run (eval/gate/settle.py)
        gated = compare_and_gate(
            base, variant, policy, allow_mismatch=True, seed=BOOTSTRAP_SEED,
            adjust=lambda c: with_aa_floor(args, c),  # A/A runs that cannot calibrate: no verdict, named
        )  # fmt: skip
    except (UsageError, ConfigError):
        raise  # a mistyped variant or a bad option is not the data's verdict: exit 64 / 78
    except LbevalError as exc:
        return no_verdict(str(exc))
    b, v = base.scores.run, variant.scores.run
    echo(
        "\n".join(hang(f"lbeval gate: base {b.variant} run {b.run_id} vs variant {v.variant} run {v.run_id}"))
    )
    # every cause row that differs, whatever the verdict (the cold numerics line first when they changed)
    for line in cause_lines(gated.comparison, gated.verdict, policy_floor(policy)):
        echo(line)
    return gated.verdict


def unexpected(exc: BaseException) -> str:
    """One line for an exception nothing expected: its type, its message and where it was raised."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" (at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno})" if tb is not None else ""
    text = " ".join(str(exc).split())[:200]
    return f"unexpected error {type(exc).__name__}{where}: {text or 'no message'}; no verdict on this data"


def run(args: argparse.Namespace) -> int:
    try:
        verdict = verdict_for(args)
    except (UsageError, ConfigError):
        raise
    except LbevalError as exc:
        verdict = no_verdict(str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug or unforeseen data is no verdict (2), never 0 or 1
        verdict = no_verdict(unexpected(exc))
    for line in gate_lines(verdict):  # one line per rule, wrapped to 100 columns
        echo(line)
    if args.junit:
        write_junit(args.junit, verdict, f"lbeval gate {args.base} vs {args.variant}")
    return verdict.exit_code
