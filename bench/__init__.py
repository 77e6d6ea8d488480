"""`make bench`: speed and size measurements (never timed assertions in tests)."""

from __future__ import annotations

import os

from eval.benchmarks.plugins import load_benchmarks

load_benchmarks()  # bench calls the stages directly, not through the command layer that loads them
SMOKE_ENV = "LBEVAL_BENCH_SMOKE"


def smoke() -> bool:
    """LBEVAL_BENCH_SMOKE=1: every bench runs its smallest configuration and starts no real server, so
    tests/bench/test_smoke.py can check each command's output shape in seconds; the figures then mean nothing."""
    return os.environ.get(SMOKE_ENV, "") not in ("", "0")
