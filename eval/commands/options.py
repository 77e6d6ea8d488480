"""Options several commands share, defined once (`--specs`), and the option validators of the commands:
argparse `type=` functions, one per kind of value.

Each takes the option's text and returns the value, or raises `argparse.ArgumentTypeError` with one line saying
what the value must be; argparse prefixes the option's name and the command exits 64 (a bad command line). No
value is ever replaced by another: `--max-tokens 0` is refused, not read as "no limit"; `nan`, `inf` and numbers
too large to wait for are refused wherever a number of seconds is asked for (a retry that sleeps forever is a
hang). The bounds are those of what the value is used for (RetryPolicy's longest wait for `--backoff`).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from eval.prepare.inputs import unicode_problem
from eval.run.retry import RetryPolicy
from eval.serve.endpoints import MAX_REPLICAS

MAX_TIMEOUT_S = 86_400.0  # one request may take at most a day as a whole
MAX_RETRIES = 100  # beyond this the doubling backoff has long reached its ceiling: a hang in all but name
MAX_BACKOFF_S = RetryPolicy().max_backoff_s  # the longest wait between two tries
# counts that size a plan or what runs at once: each unit of the plan is held in memory before anything is sent
# (`--timing-reps 100000000` took 930 MB with nothing sent), each request in flight is a thread
MAX_TIMING_REPS = 1000  # timing repetitions per input (2,000 requests per input)
MAX_CONCURRENCY = 256  # requests in flight per server
MAX_DP_RANKS = MAX_REPLICAS  # a routing endpoint's ranks: replicas, as a launch spec's dp_ranks


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def timeout_seconds(text: str) -> float:
    """`--timeout`: seconds, more than 0 and at most a day."""
    value = _number(text)
    if not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"seconds more than 0 and at most {MAX_TIMEOUT_S:g}, got {text!r}")
    return value


def backoff_seconds(text: str) -> float:
    """`--backoff`: the first retry wait in seconds, 0 to the longest wait (it doubles up to that)."""
    value = _number(text)
    if not 0 <= value <= MAX_BACKOFF_S:
        raise argparse.ArgumentTypeError(f"seconds from 0 to {MAX_BACKOFF_S:g}, got {text!r}")
    return value


def retries_count(text: str) -> int:
    """`--retries`: 0 to MAX_RETRIES."""
    value = _integer(text)
    if not 0 <= value <= MAX_RETRIES:
        raise argparse.ArgumentTypeError(f"from 0 to {MAX_RETRIES}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count or a token limit: a whole number of at least 1 (0 and negatives are refused, never replaced)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _count_up_to(limit: int, text: str) -> int:
    value = positive_int(text)
    if value > limit:
        raise argparse.ArgumentTypeError(f"from 1 to {limit}, got {text!r}")
    return value


def timing_reps(text: str) -> int:
    """`--timing-reps`: 1 to MAX_TIMING_REPS."""
    return _count_up_to(MAX_TIMING_REPS, text)


def concurrency(text: str) -> int:
    """`--concurrency`: 1 to MAX_CONCURRENCY."""
    return _count_up_to(MAX_CONCURRENCY, text)


def dp_ranks(text: str) -> int:
    """`--dp-ranks`: 1 to MAX_DP_RANKS."""
    return _count_up_to(MAX_DP_RANKS, text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (give a finite number)")


def template_kwargs(text: str) -> dict[str, Any] | None:
    """`--chat-template-kwargs`: a JSON object (strict: no NaN or Infinity, not nested past Python's limit), or
    'none'."""
    if text.strip().lower() == "none":
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg})") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except RecursionError:
        raise argparse.ArgumentTypeError("nested too deeply") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object or 'none'")
    problem = unicode_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_specs_option(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> argparse.Action:
    """`--specs FILE` (repeatable): TOML files of `[variants.NAME]` launch specs, on top of the shipped ones."""
    return p.add_argument(
        "--specs",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a TOML file of [variants.NAME] launch specs, on top of the shipped ones (repeatable)",
    )
