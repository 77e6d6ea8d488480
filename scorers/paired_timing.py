"""Interleaved A/B timing: paired log-ratios, a cluster bootstrap over inputs, and a drift check.

Design assumed. Two servers (A = base, B = variant) are live at once; each unit of work is sent to both, in
a seeded ABBA-balanced order, so the two requests of a pair are adjacent in time. One pair gives one
log-ratio log(b / a). Slow machine drift (thermal, noisy neighbours, a background job) multiplies both
timings of a pair by nearly the same factor and cancels in the ratio; it does not cancel when A's and B's
timings come from different periods (a sequential run: all of A, then all of B).

`paired_timing_change(input_ids, a, b)`: pair k is (input_ids[k], a[k], b[k]); an input may have several
pairs (repetitions, passes). The figure is exp(mean of all log-ratios) - 1, in percent: the ratio of B's
and A's geometric means over the pairs. The interval is a percentile cluster bootstrap over inputs: a
resample draws inputs with replacement and takes all the pairs of each drawn input (an input drawn twice
counts twice), so the repetitions of an input, which are not independent of one another, stay together.
The draws are those of `scorers.stats`: `rng = numpy.random.default_rng(seed)`, then
`rng.integers(0, n_inputs, size=(chunk, n_inputs))` per chunk of resamples, inputs numbered in order of
first appearance. Percentiles are taken on the log scale (`numpy.quantile`, linear interpolation) and
mapped to percent (a monotone map, so it commutes with the percentiles).

With `statistic="median"` the figure is exp(median of the log-ratios) - 1, the typical pair's change, with
the same draws (the median of each resample's pairs, every pair repeated as often as its input was drawn):
bursts from other jobs that hit one side of a few pairs move the mean of the log-ratios, not their median.

`unpaired_timing_change(ids_a, a, ids_b, b)`: the figure a sequential report would show, median(b) /
median(a) - 1 (or the ratio of means), A's and B's timings treated as two samples: the same cluster
bootstrap over inputs (an input drawn brings all its A cells and all its B cells) but the statistic ignores
which A timing was adjacent to which B timing. Reported next to the paired figure it shows what pairing
bought; fed a sequential split of interleaved data it shows what drift does to an unpaired comparison.

`drift_check(times_s, a, b)`: the trend over session time of the paired log-ratios and of each server's
own log timings. Slope: Theil-Sen (Theil 1950, Sen 1968), the median of the pairwise slopes
(y_j - y_i) / (x_j - x_i) over i < j with x_i != x_j. Test: Mann-Kendall / Kendall's tau between time and
value (Mann 1945; Kendall 1970, "Rank Correlation Methods", 4th ed., ch. 4), S = sum over i < j of
sign(x_j - x_i) * sign(y_j - y_i), with the variance under independence corrected for ties in both
variables (t: sizes of groups of tied times, u: of tied values):

    var(S) = [n(n-1)(2n+5) - sum t(t-1)(2t+5) - sum u(u-1)(2u+5)] / 18
             + [sum t(t-1)(t-2)] [sum u(u-1)(u-2)] / [9 n(n-1)(n-2)]
             + [sum t(t-1)] [sum u(u-1)] / [2 n(n-1)],

z = (S - sign(S)) / sqrt(var(S)) (continuity correction), two-sided p = 2 (1 - Phi(|z|)) with
Phi(z) = erfc(-z / sqrt 2) / 2. A slope b in log units per second is reported as 100 (exp(b * 60) - 1) %
per minute and 100 (exp(b * 3600) - 1) % per hour. Verdict "drift" when p < alpha AND the hourly change
has magnitude >= min_pct_per_hour; otherwise "no_drift". The test assumes independent observations:
autocorrelated noise (bursts) makes it reject too often, which is why the verdict also needs a slope large
enough to matter. Both are O(n^2) in time and memory (fine for a few thousand pairs).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

_CELLS_PER_CHUNK = 4_000_000  # as in scorers.stats: bounds memory; part of the definition of the draws

Statistic = Literal["median", "mean", "trimmed_mean", "hodges_lehmann"]
DriftVerdict = Literal["no_drift", "drift"]


@dataclass(frozen=True)
class TimingChange:
    """B vs A from paired timings, in percent (estimate and percentile-interval bounds)."""

    estimate: float
    ci_low: float
    ci_high: float
    n_inputs: int
    n_pairs: int
    resamples: int
    seed: int
    confidence: float
    statistic: Statistic = "mean"  # of the log-ratios: "mean" (the geometric-mean ratio) or "median"
    method: str = "percentile_bootstrap"  # the interval: percentile_bootstrap, t, yuen_t, signed_rank, ...


@dataclass(frozen=True)
class UnpairedTimingChange:
    """B vs A with A's and B's timings as two samples (statistic(b) / statistic(a) - 1), in percent."""

    estimate: float
    ci_low: float
    ci_high: float
    n_inputs: int
    n_a: int
    n_b: int
    statistic: Statistic
    resamples: int
    seed: int
    confidence: float


@dataclass(frozen=True)
class MannKendall:
    """Kendall's S between time and value, its tie-corrected null variance, z, two-sided p, tau-b."""

    n: int
    s: int
    var_s: float
    z: float
    p_value: float
    tau_b: float


@dataclass(frozen=True)
class Trend:
    """Theil-Sen slope of a log series over session time, the Mann-Kendall test, and the verdict."""

    n: int
    slope_log_per_second: float
    pct_per_minute: float
    pct_per_hour: float
    test: MannKendall
    verdict: DriftVerdict
    span_s: float = 0.0  # the series' time range, last time - first time (seconds)
    pct_over_span: float = 0.0  # the slope's change over that range: what the session saw, not extrapolated


@dataclass(frozen=True)
class DriftCheck:
    """Trends of the paired log-ratios log(b/a) and of each server's own log timings."""

    paired: Trend
    a: Trend
    b: Trend
    alpha: float
    min_pct_per_hour: float


def _timings(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of timings, got shape {arr.shape}")
    bad = ~(np.isfinite(arr) & (arr > 0.0))
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ValueError(
            f"{name}[{k}] = {float(arr[k])!r}: timings must be finite and > 0 (no NaN, 0 or negative)"
        )
    return arr


def log_ratios(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """log(b[k] / a[k]) per pair; ValueError on a length mismatch or a non-positive, NaN or infinite time."""
    arr_a, arr_b = _timings(a, "a"), _timings(b, "b")
    if arr_a.shape != arr_b.shape:
        raise ValueError(f"a has {arr_a.size} timings, b has {arr_b.size}: one of each per pair")
    return np.log(arr_b) - np.log(arr_a)


def percent_change(mean_log_ratio: float) -> float:
    """100 * (exp(m) - 1): a mean log-ratio as a percentage change (exact for a geometric mean)."""
    return 100.0 * math.expm1(mean_log_ratio)


def _check(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")


def _codes(ids: Sequence[Hashable], index: dict[Hashable, int]) -> NDArray[np.int64]:
    """Cluster number of each id, numbering new ids in order of first appearance (extends `index`)."""
    return np.array([index.setdefault(i, len(index)) for i in ids], dtype=np.int64)


def _resample_counts(n: int, seed: int, n_resamples: int) -> Iterator[NDArray[np.float64]]:
    """Per chunk of resamples: how many times each of the n inputs was drawn ([rows, n])."""
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // n)
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        flat = (idx + n * np.arange(rows, dtype=np.int64)[:, None]).ravel()
        yield np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def _per_cluster(codes: NDArray[np.int64], values: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    return np.bincount(codes, weights=values, minlength=n).astype(np.float64)


def _interval(stats: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_timing_change(
    input_ids: Sequence[Hashable],
    a: ArrayLike,
    b: ArrayLike,
    *,
    seed: int,
    statistic: Statistic = "mean",
    n_resamples: int = 10000,
    confidence: float = 0.95,
) -> TimingChange:
    """exp(statistic of log(b/a)) - 1 in percent, with a cluster bootstrap over inputs (module docstring).

    "mean": the ratio of the geometric means. "median": the typical pair's ratio, robust to a few pairs hit by a
    burst on one side (bootstrap: the median of each resample's expanded pairs, an input drawn twice counting
    its pairs twice)."""
    _check(n_resamples, confidence)
    ratios = log_ratios(a, b)
    if len(input_ids) != ratios.size:
        raise ValueError(f"{len(input_ids)} input ids for {ratios.size} pairs: one id per pair")
    codes = _codes(input_ids, {})
    n = int(codes.max()) + 1
    stats = np.concatenate(
        [_side_statistic(ratios, codes, c, statistic) for c in _resample_counts(n, seed, n_resamples)]
    )
    low, high = _interval(stats, confidence)
    point = float(np.median(ratios)) if statistic == "median" else float(ratios.mean())
    return TimingChange(
        estimate=percent_change(point),
        ci_low=percent_change(low),
        ci_high=percent_change(high),
        n_inputs=n,
        n_pairs=ratios.size,
        resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        statistic=statistic,
    )


def _weighted_medians(
    values: NDArray[np.float64], codes: NDArray[np.int64], counts: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Median of each resample ([rows] of cluster counts): every cell repeated as often as its input."""
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_codes = values[order], codes[order]
    out = np.empty(counts.shape[0], dtype=np.float64)
    block = max(1, _CELLS_PER_CHUNK // values.size)
    for start in range(0, counts.shape[0], block):
        cum = np.cumsum(counts[start : start + block][:, sorted_codes], axis=1)
        total = cum[:, -1]
        if np.any(total == 0):
            raise ValueError("a resample drew no timing of one side (inputs measured on one side only)")
        # 0-based positions of the two middle cells of the expanded sorted sample (equal when total is odd)
        lower = sorted_values[np.argmax(cum > ((total - 1) // 2)[:, None], axis=1)]
        upper = sorted_values[np.argmax(cum > (total // 2)[:, None], axis=1)]
        out[start : start + block] = (lower + upper) / 2.0
    return out


def _side_statistic(
    values: NDArray[np.float64], codes: NDArray[np.int64], counts: NDArray[np.float64], statistic: Statistic
) -> NDArray[np.float64]:
    if statistic == "median":
        return _weighted_medians(values, codes, counts)
    n = counts.shape[1]
    cells = counts @ _per_cluster(codes, np.ones_like(values), n)
    if np.any(cells == 0):
        raise ValueError("a resample drew no timing of one side (inputs measured on one side only)")
    return (counts @ _per_cluster(codes, values, n)) / cells


def unpaired_timing_change(
    ids_a: Sequence[Hashable],
    a: ArrayLike,
    ids_b: Sequence[Hashable],
    b: ArrayLike,
    *,
    seed: int,
    statistic: Statistic = "median",
    n_resamples: int = 10000,
    confidence: float = 0.95,
) -> UnpairedTimingChange:
    """statistic(b) / statistic(a) - 1 in percent, A and B as two samples, cluster bootstrap over inputs."""
    _check(n_resamples, confidence)
    arr_a, arr_b = _timings(a, "a"), _timings(b, "b")
    if len(ids_a) != arr_a.size or len(ids_b) != arr_b.size:
        raise ValueError("one input id per timing on each side")
    index: dict[Hashable, int] = {}
    codes_a, codes_b = _codes(ids_a, index), _codes(ids_b, index)
    n = len(index)
    point = np.median if statistic == "median" else np.mean
    ratios = [
        _side_statistic(arr_b, codes_b, c, statistic) / _side_statistic(arr_a, codes_a, c, statistic)
        for c in _resample_counts(n, seed, n_resamples)
    ]
    low, high = _interval(np.concatenate(ratios) - 1.0, confidence)
    return UnpairedTimingChange(
        estimate=100.0 * float(point(arr_b) / point(arr_a) - 1.0),
        ci_low=100.0 * low,
        ci_high=100.0 * high,
        n_inputs=n,
        n_a=arr_a.size,
        n_b=arr_b.size,
        statistic=statistic,
        resamples=n_resamples,
        seed=seed,
        confidence=confidence,
    )


def _series(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    arr_x = np.asarray(x, dtype=np.float64)
    arr_y = np.asarray(y, dtype=np.float64)
    if arr_x.ndim != 1 or arr_x.shape != arr_y.shape or arr_x.size < 2:
        raise ValueError(f"x and y must be 1-D of one length >= 2, got {arr_x.shape} and {arr_y.shape}")
    if not (np.all(np.isfinite(arr_x)) and np.all(np.isfinite(arr_y))):
        raise ValueError("x and y must be finite")
    return arr_x, arr_y


def theil_sen_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Median of (y_j - y_i) / (x_j - x_i) over pairs i < j with x_i != x_j (Theil 1950, Sen 1968)."""
    arr_x, arr_y = _series(x, y)
    i, j = np.triu_indices(arr_x.size, k=1)
    dx = arr_x[j] - arr_x[i]
    keep = dx != 0.0
    if not np.any(keep):
        raise ValueError("all x are equal: no slope")
    return float(np.median((arr_y[j] - arr_y[i])[keep] / dx[keep]))


def _tie_sums(v: NDArray[np.float64]) -> tuple[float, float, float]:
    """sum t(t-1), sum t(t-1)(t-2), sum t(t-1)(2t+5) over the sizes t of groups of equal values."""
    _, sizes = np.unique(v, return_counts=True)
    t = sizes.astype(np.float64)
    return (
        float(np.sum(t * (t - 1))),
        float(np.sum(t * (t - 1) * (t - 2))),
        float(np.sum(t * (t - 1) * (2 * t + 5))),
    )


def _normal_sf(z: float) -> float:
    """1 - Phi(z) = erfc(z / sqrt 2) / 2, computed without the cancellation of 1 - Phi for large z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_kendall(x: ArrayLike, y: ArrayLike) -> MannKendall:
    """Kendall's S of (x, y) with the tie-corrected normal approximation (formula in the module docstring)."""
    arr_x, arr_y = _series(x, y)
    n = arr_x.size
    i, j = np.triu_indices(n, k=1)
    s = int(np.sum(np.sign(arr_x[j] - arr_x[i]) * np.sign(arr_y[j] - arr_y[i])))
    t1, t2, t3 = _tie_sums(arr_x)
    u1, u2, u3 = _tie_sums(arr_y)
    var_s = (n * (n - 1) * (2 * n + 5) - t3 - u3) / 18.0 + t1 * u1 / (2.0 * n * (n - 1))
    if n > 2:
        var_s += t2 * u2 / (9.0 * n * (n - 1) * (n - 2))
    pairs = n * (n - 1) / 2.0
    denominator = math.sqrt((pairs - t1 / 2.0) * (pairs - u1 / 2.0))
    if var_s <= 0.0 or denominator == 0.0:  # all times or all values tied: no evidence of a trend
        return MannKendall(n, s, var_s, 0.0, 1.0, 0.0)
    z = (s - (s > 0) + (s < 0)) / math.sqrt(var_s)
    return MannKendall(n, s, var_s, z, min(1.0, 2.0 * _normal_sf(abs(z))), s / denominator)


def _pct_over(slope: float, seconds: float) -> float:
    """100 (exp(slope * seconds) - 1); inf when that overflows (a steep slope over a short session)."""
    try:
        return 100.0 * math.expm1(slope * seconds)
    except OverflowError:
        return math.inf


def log_trend(
    times_s: ArrayLike, log_values: ArrayLike, *, alpha: float = 0.01, min_pct_per_hour: float = 5.0
) -> Trend:
    """Trend of a log series over session time (seconds): Theil-Sen slope, Mann-Kendall test, verdict."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    if min_pct_per_hour < 0.0:
        raise ValueError("min_pct_per_hour must be >= 0")
    slope = theil_sen_slope(times_s, log_values)
    test = mann_kendall(times_s, log_values)
    per_hour = _pct_over(slope, 3600.0)
    drift = test.p_value < alpha and abs(per_hour) >= min_pct_per_hour
    times = np.asarray(times_s, dtype=np.float64)
    span = float(times.max() - times.min()) if times.size else 0.0
    return Trend(
        n=test.n,
        slope_log_per_second=slope,
        pct_per_minute=_pct_over(slope, 60.0),
        pct_per_hour=per_hour,
        test=test,
        verdict="drift" if drift else "no_drift",
        span_s=span,
        pct_over_span=_pct_over(slope, span),
    )


def drift_check(
    times_s: ArrayLike, a: ArrayLike, b: ArrayLike, *, alpha: float = 0.01, min_pct_per_hour: float = 5.0
) -> DriftCheck:
    """Trends of log(b/a), log(a) and log(b) over the pairs' session times (seconds, one per pair).

    min_pct_per_hour (default 5 %/h: 2.5 % over a 30-minute session, half a typical +-5 % gate band) is
    the smallest hourly change called drift; a significant but smaller trend is reported as "no_drift".
    """
    ratios = log_ratios(a, b)
    log_a, log_b = np.log(_timings(a, "a")), np.log(_timings(b, "b"))
    return DriftCheck(
        paired=log_trend(times_s, ratios, alpha=alpha, min_pct_per_hour=min_pct_per_hour),
        a=log_trend(times_s, log_a, alpha=alpha, min_pct_per_hour=min_pct_per_hour),
        b=log_trend(times_s, log_b, alpha=alpha, min_pct_per_hour=min_pct_per_hour),
        alpha=alpha,
        min_pct_per_hour=min_pct_per_hour,
    )


# ---- interval methods beside the percentile cluster bootstrap (chosen by bench/bench_coverage.py) ----
#
# All work on the log-ratios d_k = log(b_k / a_k) and report in percent like `paired_timing_change`.
#
# `t_interval_change`: the per-input means m_j of the d_k (n inputs), their mean and the Student t interval
# mean +- t_{n-1, 1-alpha/2} sd(m) / sqrt(n) (the inputs as a sample; an input's repetitions averaged first).
#
# `trimmed_t_change`: Yuen's (1974) trimmed-mean interval on the m_j: g = floor(trim n) inputs cut from each
# end, the mean of the h = n - 2g left, standard error s_w / ((1 - 2 trim') sqrt n) with s_w the standard
# deviation of the winsorized m_j and trim' = g / n, and t quantiles with h - 1 degrees of freedom.
#
# `hodges_lehmann_change`: the Hodges-Lehmann estimate of the m_j (the median of the n(n+1)/2 Walsh averages
# (m_i + m_j) / 2, i <= j) and the interval by inverting Wilcoxon's signed-rank test (exact null distribution
# of the rank sum): [W_(k), W_(M+1-k)] of the sorted Walsh averages with k the largest integer such that
# P(T+ <= k - 1) <= alpha / 2 (Lehmann 1975, "Nonparametrics", ch. 4). Needs n >= 6 at 95 %: with fewer
# inputs no interval of that level exists and the bounds are infinite.
#
# `randomization_change`: randomization inference on the session's own AB/BA assignment. The pairs fall in
# randomization blocks (`blocks`: the pairs whose orders were drawn together, eval/run/ab.pair_orders); under
# "B = A + delta on the log scale" the values d_k - delta of a block change sign together when the block's
# assignment is flipped. The test statistic is the mean; for a flip of the blocks in a set F the one-sided
# comparison of flipped and observed statistics changes at delta_F = (sum of d_k over F) / (pairs in F), the
# mean of the flipped blocks' pairs (Hartigan 1969, "Using subsample values as typical values", JASA 64), so
# the interval inverting both one-sided tests at alpha / 2 is [delta_(c+1), delta_(M-c)] of the M sorted
# delta_F with c = floor(alpha / 2 (M + 1)) - 1: every non-empty F when 2^blocks - 1 <= max_flips, else
# max_flips sets drawn uniformly (`numpy.random.default_rng(seed)`, each block in or out with probability
# 1/2, empty draws redrawn as in the Monte-Carlo test's (1 + count) / (M + 1) p-value). Exact under the
# sharp null whatever the noise's distribution, as long as the recorded orders were drawn as `pair_orders`
# draws them.
#
# `studentized_bootstrap_change`: the bootstrap-t over inputs: resample inputs (the draws of
# `paired_timing_change`), t* = (mean* - mean) / se*, se the standard error of the per-input means weighted by
# their pair counts; interval [mean - q_{1-alpha/2}(t*) se, mean - q_{alpha/2}(t*) se]. Resamples whose se* is 0
# (one distinct input drawn) are left out.


def _ids_and_ratios(
    input_ids: Sequence[Hashable], a: ArrayLike, b: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    ratios = log_ratios(a, b)
    if len(input_ids) != ratios.size:
        raise ValueError(f"{len(input_ids)} input ids for {ratios.size} pairs: one id per pair")
    return _codes(input_ids, {}), ratios


def per_input_means(input_ids: Sequence[Hashable], ratios: ArrayLike) -> NDArray[np.float64]:
    """Mean of the values of each input, inputs in order of first appearance."""
    values = np.asarray(ratios, dtype=np.float64)
    codes = _codes(input_ids, {})
    n = int(codes.max()) + 1
    return _per_cluster(codes, values, n) / _per_cluster(codes, np.ones_like(values), n)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom: 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0."""
    if df <= 0:
        raise ValueError("df must be > 0")
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def student_t_pdf(t: float, df: float) -> float:
    """The density of Student's t with df degrees of freedom."""
    log_c = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def student_t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom: Newton's method on `student_t_cdf` from a
    bracket found by doubling, with a bisection step whenever Newton leaves the bracket."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        low, high = high, high * 2.0
    x = (low + high) / 2.0
    for _ in range(100):
        f = student_t_cdf(x, df) - p
        if f < 0:
            low = x
        else:
            high = x
        step = x - f / student_t_pdf(x, df)
        nxt = step if low < step < high else (low + high) / 2.0
        if abs(nxt - x) <= 1e-12 * max(1.0, abs(x)):
            return nxt
        x = nxt
    return x


def _change(
    point: float,
    low: float,
    high: float,
    n: int,
    pairs: int,
    confidence: float,
    statistic: Statistic,
    method: str,
) -> TimingChange:
    return TimingChange(
        estimate=percent_change(point),
        ci_low=percent_change(low),
        ci_high=percent_change(high),
        n_inputs=n,
        n_pairs=pairs,
        resamples=0,
        seed=0,
        confidence=confidence,
        statistic=statistic,
        method=method,
    )


def _means(
    input_ids: Sequence[Hashable], a: ArrayLike, b: ArrayLike, least: int
) -> tuple[NDArray[np.float64], int]:
    codes, ratios = _ids_and_ratios(input_ids, a, b)
    m = per_input_means(input_ids, ratios)
    if m.size < least:
        raise ValueError(f"{m.size} inputs: this interval needs at least {least}")
    return m, ratios.size


def t_interval_change(
    input_ids: Sequence[Hashable], a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95
) -> TimingChange:
    """exp(mean of the per-input mean log-ratios) - 1 with the Student t interval over inputs (see above)."""
    _check(1, confidence)
    m, pairs = _means(input_ids, a, b, 2)
    n = m.size
    half = student_t_quantile(0.5 + confidence / 2.0, n - 1) * float(np.std(m, ddof=1)) / math.sqrt(n)
    mean = float(m.mean())
    return _change(mean, mean - half, mean + half, n, pairs, confidence, "mean", "t")


def trimmed_t_change(
    input_ids: Sequence[Hashable], a: ArrayLike, b: ArrayLike, *, trim: float = 0.2, confidence: float = 0.95
) -> TimingChange:
    """Yuen's trimmed mean of the per-input mean log-ratios with its t interval (see above)."""
    _check(1, confidence)
    if not 0.0 <= trim < 0.5:
        raise ValueError("trim must be in [0, 0.5)")
    m, pairs = _means(input_ids, a, b, 2)
    n = m.size
    g = int(math.floor(trim * n))
    h = n - 2 * g
    if h < 2:
        raise ValueError(f"{n} inputs trimmed by {g} at each end leave fewer than 2")
    s = np.sort(m)
    point = float(s[g : n - g].mean())
    winsorized = np.clip(s, s[g], s[n - g - 1])
    se = float(np.std(winsorized, ddof=1)) / ((1.0 - 2.0 * g / n) * math.sqrt(n))
    half = student_t_quantile(0.5 + confidence / 2.0, h - 1) * se
    return _change(point, point - half, point + half, n, pairs, confidence, "trimmed_mean", "yuen_t")


GATED_TRIM = 0.2  # the gated figure: trimmed_t_change with this trim and level (docs/timing.md: at 95 % its
GATED_CONFIDENCE = 0.975  # A/A false-alarm rate exceeded 5 % in 35 of 72 simulated cells; at 97.5 % in none)


def gated_timing_change(input_ids: Sequence[Hashable], a: ArrayLike, b: ArrayLike) -> TimingChange:
    """The timing figure the gate reads: trimmed_t_change with GATED_TRIM and GATED_CONFIDENCE. Its one
    definition, read by the comparison (eval/analyze/ab_timing.py) and by the adaptive stop (eval/run/adaptive.py)."""
    return trimmed_t_change(input_ids, a, b, trim=GATED_TRIM, confidence=GATED_CONFIDENCE)


def signed_rank_cdf(n: int) -> NDArray[np.float64]:
    """P(T+ <= k), k = 0..n(n+1)/2, for Wilcoxon's signed-rank sum of n untied values under the null."""
    counts = np.zeros(n * (n + 1) // 2 + 1, dtype=np.float64)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return np.cumsum(counts) / 2.0**n


def hodges_lehmann_change(
    input_ids: Sequence[Hashable], a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95
) -> TimingChange:
    """Hodges-Lehmann estimate of the per-input mean log-ratios with the signed-rank interval (see above)."""
    _check(1, confidence)
    m, pairs = _means(input_ids, a, b, 2)
    n = m.size
    i, j = np.triu_indices(n)
    walsh = np.sort((m[i] + m[j]) / 2.0)
    cdf = signed_rank_cdf(n)
    k = int(np.sum(cdf <= (1.0 - confidence) / 2.0 + 1e-12))  # P(T+ <= k - 1) <= alpha/2
    point = float(np.median(walsh))
    if k == 0:
        return _change(point, -math.inf, math.inf, n, pairs, confidence, "hodges_lehmann", "signed_rank")
    return _change(point, float(walsh[k - 1]), float(walsh[walsh.size - k]), n, pairs, confidence,
                   "hodges_lehmann", "signed_rank")  # fmt: skip


def _flip_sets(n_blocks: int, seed: int, max_flips: int) -> NDArray[np.float64]:
    """0/1 rows: which blocks each flip turns round; every non-empty set when few enough, else random draws."""
    if n_blocks < 1:
        raise ValueError("no randomization blocks")
    if n_blocks <= 30 and 2**n_blocks - 1 <= max_flips:
        codes = np.arange(1, 2**n_blocks, dtype=np.int64)
        return ((codes[:, None] >> np.arange(n_blocks, dtype=np.int64)) & 1).astype(np.float64)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2, size=(max_flips, n_blocks))
    empty = ~rows.any(axis=1)
    while np.any(empty):
        rows[empty] = rng.integers(0, 2, size=(int(empty.sum()), n_blocks))
        empty = ~rows.any(axis=1)
    return rows.astype(np.float64)


def randomization_change(
    input_ids: Sequence[Hashable],
    a: ArrayLike,
    b: ArrayLike,
    *,
    blocks: Sequence[Hashable],
    seed: int = 0,
    max_flips: int = 4999,
    confidence: float = 0.95,
) -> TimingChange:
    """exp(mean log-ratio) - 1 with the interval inverting the randomization test of the AB/BA assignment."""
    _check(max_flips, confidence)
    codes, ratios = _ids_and_ratios(input_ids, a, b)
    if len(blocks) != ratios.size:
        raise ValueError(f"{len(blocks)} block ids for {ratios.size} pairs: one per pair")
    block_codes = _codes(blocks, {})
    nb = int(block_codes.max()) + 1
    flips = _flip_sets(nb, seed, max_flips)
    sums = flips @ _per_cluster(block_codes, ratios, nb)
    sizes = flips @ _per_cluster(block_codes, np.ones_like(ratios), nb)
    subset_means = np.sort(sums / sizes)
    total = subset_means.size
    c = int(math.floor((1.0 - confidence) / 2.0 * (total + 1) + 1e-9)) - 1
    mean = float(ratios.mean())
    low, high = (
        (-math.inf, math.inf) if c < 0 else (float(subset_means[c]), float(subset_means[total - 1 - c]))
    )
    out = _change(mean, low, high, int(codes.max()) + 1, ratios.size, confidence, "mean", "randomization")
    return replace(out, resamples=total, seed=seed)


def studentized_bootstrap_change(
    input_ids: Sequence[Hashable],
    a: ArrayLike,
    b: ArrayLike,
    *,
    seed: int,
    n_resamples: int = 10000,
    confidence: float = 0.95,
) -> TimingChange:
    """exp(mean log-ratio) - 1 with the bootstrap-t interval over inputs (see above)."""
    _check(n_resamples, confidence)
    codes, ratios = _ids_and_ratios(input_ids, a, b)
    n = int(codes.max()) + 1
    if n < 2:
        raise ValueError("1 input: the bootstrap-t needs at least 2")
    sums, cells = _per_cluster(codes, ratios, n), _per_cluster(codes, np.ones_like(ratios), n)
    mean = float(sums.sum() / cells.sum())
    se = _ratio_se(sums[None, :], cells[None, :], np.ones((1, n)))[0]
    tstats = []
    for counts in _resample_counts(n, seed, n_resamples):
        means = (counts @ sums) / (counts @ cells)
        se_star = _ratio_se(sums[None, :], cells[None, :], counts)
        keep = se_star > 0
        tstats.append((means[keep] - mean) / se_star[keep])
    t = np.concatenate(tstats)
    tail = (1.0 - confidence) / 2.0
    q_low, q_high = np.quantile(t, [tail, 1.0 - tail])
    out = _change(mean, mean - float(q_high) * se, mean - float(q_low) * se, n, ratios.size, confidence, "mean",
                  "bootstrap_t")  # fmt: skip
    return replace(out, resamples=n_resamples, seed=seed)


def _ratio_se(
    sums: NDArray[np.float64], cells: NDArray[np.float64], counts: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Linearized standard error of sum(w s) / sum(w c) over clusters drawn w times (rows of counts)."""
    total_s, total_c = counts @ sums[0], counts @ cells[0]
    mean = total_s / total_c
    resid = sums[0][None, :] - mean[:, None] * cells[0][None, :]  # per cluster: s_j - mean c_j
    k = counts.sum(axis=1)
    var = k / (k - 1.0) * np.sum(counts * resid**2, axis=1) / total_c**2
    return np.asarray(np.sqrt(np.maximum(var, 0.0)), dtype=np.float64)
