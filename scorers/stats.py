"""Paired bootstrap over inputs: the relative change of a mean (B vs A) and the mean of paired differences.

What the interval describes. The inputs (prompts, examples) are treated as a sample from a larger population
of inputs of the same kind; resampling them with replacement asks "how much would the figure move had we
drawn a different set of inputs of the same kind?". The interval is that input-to-input variation, for
this A, this B, these measurements. It is not an interval for machine drift: the repetitions of an input
stay together and enter only through the input's cells, so a machine that was uniformly slower during B's
measurements moves the estimate and the whole interval together; nor does it say how the figure varies
between two runs on different days. Alternate A and B over time (interleaved passes) to keep drift out of
the difference instead of hoping the interval covers it.

`paired_bootstrap_relative_change(a, b)`: a and b are [n_inputs, reps] arrays (reps may differ between a
and b; NaN marks a missing repetition). Row i of a and row i of b are the same input.
- Estimate: mean(b) / mean(a) - 1, each mean over all non-NaN cells (an input with more valid
  repetitions weighs more, exactly as in the plain mean of all measurements).
- Resample r draws `idx[r] = rng.integers(0, n_inputs, size=n_inputs)` (drawn as one
  `rng.integers(0, n_inputs, size=(chunk, n_inputs))` block per chunk of resamples, rng =
  `numpy.random.default_rng(seed)`), and computes the same statistic over the cells of rows idx[r] of a and
  the same rows of b (an input drawn twice counts twice, with all its repetitions).
- Interval: the (1 - confidence) / 2 and 1 - (1 - confidence) / 2 quantiles of the resampled statistics
  (`numpy.quantile`, linear interpolation): a percentile interval.
- NaN handling: missing cells are left out of the sums and counts; an input with no valid cell on a side
  is an error (drop it, or its partner row, before calling), as is a mean(a) of 0 in the data or in a
  resample (a relative change from 0 is undefined; use the difference instead).

`paired_bootstrap_difference(a, b)`: a and b are [n] arrays of per-example values (e.g. scores of two
variants on the same examples). Estimate mean(b - a); resamples of examples as above; same interval. No
NaN allowed.

Both are deterministic for a given seed and inputs, vectorized (10,000 resamples of 32 inputs x 5 reps
take a few milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

_CELLS_PER_CHUNK = 4_000_000  # bounds the index block's memory; part of the definition of the draws


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float
    low: float
    high: float
    n_inputs: int
    n_resamples: int
    seed: int
    confidence: (
        float  # e.g. 0.95; an interleaved session's gated timing figure: 0.975 (eval/analyze/ab_timing.py)
    )

    @property
    def ci_label(self) -> str:
        """'95% CI', '97.5% CI': the interval's name wherever it is shown."""
        return f"{100 * self.confidence:g}% CI"


def signed_pct(value: float) -> str:
    """A percent with its sign, to one decimal, as every change is shown: a value that rounds to zero is
    +0.0%, whatever the sign of the float it came from (a ratio of 1 less a rounding error is -1e-14, not a
    fall: "-0.0%" would say one)."""
    return f"{round(value, 1) + 0.0:+.1f}%"


def _check(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")


def _resampled(
    per_input: list[NDArray[np.float64]], seed: int, n_resamples: int
) -> list[NDArray[np.float64]]:
    """For each per-input vector v: sum of v over the inputs drawn in each resample (one row per resample)."""
    n = len(per_input[0])
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // n)
    out: list[list[NDArray[np.float64]]] = [[] for _ in per_input]
    for start in range(0, n_resamples, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_resamples - start), n))
        for k, values in enumerate(per_input):
            out[k].append(values[idx].sum(axis=1))
    return [np.concatenate(parts) for parts in out]


def _interval(stats: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def _sums_counts(x: ArrayLike, name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty [n_inputs, reps] array, got shape {arr.shape}")
    valid = ~np.isnan(arr)
    counts = valid.sum(axis=1).astype(np.float64)
    if np.any(counts == 0):
        raise ValueError(f"{name}: input {int(np.argmin(counts))} has no valid repetition (all NaN)")
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name}: infinite values")
    return np.where(valid, arr, 0.0).sum(axis=1), counts


def paired_bootstrap_relative_change(
    a: ArrayLike, b: ArrayLike, *, seed: int, n_resamples: int = 10000, confidence: float = 0.95
) -> BootstrapResult:
    """mean(b) / mean(a) - 1 with a paired percentile bootstrap over inputs (see the module docstring)."""
    _check(n_resamples, confidence)
    sum_a, cnt_a = _sums_counts(a, "a")
    sum_b, cnt_b = _sums_counts(b, "b")
    if len(sum_a) != len(sum_b):
        raise ValueError(f"a has {len(sum_a)} inputs, b has {len(sum_b)}: rows must be the same inputs")
    mean_a = sum_a.sum() / cnt_a.sum()
    if mean_a == 0.0:
        raise ValueError("mean(a) is 0: a relative change is undefined")
    estimate = float((sum_b.sum() / cnt_b.sum()) / mean_a - 1.0)
    s_a, c_a, s_b, c_b = _resampled([sum_a, cnt_a, sum_b, cnt_b], seed, n_resamples)
    means_a = s_a / c_a
    if np.any(means_a == 0.0):
        raise ValueError("a resample has mean(a) = 0: a relative change is undefined")
    low, high = _interval((s_b / c_b) / means_a - 1.0, confidence)
    return BootstrapResult(estimate, low, high, len(sum_a), n_resamples, seed, confidence)


def paired_bootstrap_difference(
    a: ArrayLike, b: ArrayLike, *, seed: int, n_resamples: int = 10000, confidence: float = 0.95
) -> BootstrapResult:
    """mean(b - a) over examples paired by position, with a percentile bootstrap over examples."""
    _check(n_resamples, confidence)
    arr_a = np.asarray(a, dtype=np.float64)
    arr_b = np.asarray(b, dtype=np.float64)
    if arr_a.ndim != 1 or arr_a.shape != arr_b.shape or arr_a.size == 0:
        raise ValueError(
            f"a and b must be non-empty 1-D arrays of one length, got {arr_a.shape} and {arr_b.shape}"
        )
    diff = arr_b - arr_a
    if not np.all(np.isfinite(diff)):
        raise ValueError("a and b must be finite (no NaN)")
    (sums,) = _resampled([diff], seed, n_resamples)
    low, high = _interval(sums / diff.size, confidence)
    return BootstrapResult(float(diff.mean()), low, high, diff.size, n_resamples, seed, confidence)
