"""Paired bootstrap timing: 10,000 resamples of 32 inputs x 5 repetitions (relative change) and of 32
paired differences, seeded synthetic data; prints the median of 5 runs and the interval found."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from bench import smoke
from scorers.stats import paired_bootstrap_difference, paired_bootstrap_relative_change

INPUTS, REPS, RESAMPLES, RUNS = 32, 5, 10_000, 5


def _median_seconds(fn: Callable[..., object], *args: object, runs: int = RUNS, **kwargs: object) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    resamples, runs = (200, 1) if smoke() else (RESAMPLES, RUNS)
    rng = np.random.default_rng(20260909)
    base = rng.lognormal(mean=-1.0, sigma=0.3, size=(INPUTS, 1))  # per-input TTFT-like level (seconds)
    a = base * rng.normal(1.0, 0.03, size=(INPUTS, REPS))
    b = base * 0.95 * rng.normal(1.0, 0.03, size=(INPUTS, REPS))
    rel = paired_bootstrap_relative_change(a, b, seed=1, n_resamples=resamples)
    seconds = _median_seconds(
        paired_bootstrap_relative_change, a, b, seed=1, n_resamples=resamples, runs=runs
    )
    print(f"bootstrap: relative change, {resamples} resamples of {INPUTS} inputs x {REPS} reps: "
          f"{seconds * 1000:.1f} ms (median of {runs}); {rel.estimate:+.2%} [{rel.low:+.2%}, {rel.high:+.2%}]")  # fmt: skip
    sa, sb = rng.uniform(0, 1, INPUTS), rng.uniform(0, 1, INPUTS)
    diff = paired_bootstrap_difference(sa, sb, seed=1, n_resamples=resamples)
    seconds = _median_seconds(paired_bootstrap_difference, sa, sb, seed=1, n_resamples=resamples, runs=runs)
    print(f"bootstrap: paired difference, {resamples} resamples of {INPUTS} examples: {seconds * 1000:.1f} ms "
          f"(median of {runs}); {diff.estimate:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]")  # fmt: skip


if __name__ == "__main__":
    main()
