"""Paired timing: log-ratios, the cluster bootstrap over inputs, the unpaired figure, the drift check."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scorers.paired_timing import (
    Statistic,
    TimingChange,
    drift_check,
    log_ratios,
    log_trend,
    mann_kendall,
    paired_timing_change,
    percent_change,
    theil_sen_slope,
    unpaired_timing_change,
)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        ([1.0, 0.0], [1.0, 1.0], r"a\[1\] = 0.0"),
        ([1.0, 1.0], [1.0, -2.0], r"b\[1\] = -2.0"),
        ([math.nan], [1.0], r"a\[0\] = nan"),
        ([1.0], [math.inf], r"b\[0\] = inf"),
        ([1.0, 2.0], [1.0], "one of each per pair"),
        ([], [], "non-empty"),
    ],
)
def test_log_ratios_reject_bad_timings(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        log_ratios(a, b)


def test_log_ratios_and_percent_change() -> None:
    assert log_ratios([1.0, 2.0], [2.0, 1.0]) == pytest.approx([math.log(2), -math.log(2)], abs=1e-15)
    assert percent_change(math.log(1.25)) == pytest.approx(25.0, abs=1e-12)


def test_paired_estimate_is_the_geometric_mean_ratio() -> None:
    # log-ratios log 2, log 2, 0: mean (2/3) log 2, exp = 2^(2/3) = 1.587401..., so +58.7401 %
    r = paired_timing_change(["x", "y", "z"], [1.0, 1.0, 2.0], [2.0, 2.0, 2.0], seed=1, n_resamples=200)
    assert r.estimate == pytest.approx(100 * (2 ** (2 / 3) - 1), abs=1e-12)
    assert (r.n_inputs, r.n_pairs, r.resamples, r.seed, r.confidence) == (3, 3, 200, 1, 0.95)


def test_one_input_has_a_degenerate_interval() -> None:
    r = paired_timing_change(["q", "q"], [1.0, 2.0], [1.5, 3.0], seed=0, n_resamples=100)
    assert r == TimingChange(
        pytest.approx(50.0), pytest.approx(50.0), pytest.approx(50.0), 1, 2, 100, 0, 0.95
    )


def test_cluster_bootstrap_keeps_an_inputs_pairs_together() -> None:
    # input "x": one pair, log-ratio 0; input "y": three pairs, log-ratio log 2 each. Resamples {x, x} -> 0,
    # {y, y} -> log 2 (+100 %), one of each -> 3 log 2 / 4 (the estimate, 2^0.75 - 1 = +68.18 %); each
    # extreme has probability 1/4 >> 2.5 %, so the 95 % interval is [0 %, +100 %].
    ids = ["y", "x", "y", "y"]
    r = paired_timing_change(ids, [1.0, 3.0, 2.0, 4.0], [2.0, 3.0, 4.0, 8.0], seed=7, n_resamples=2000)
    assert r.estimate == pytest.approx(100 * (2**0.75 - 1), abs=1e-12)
    assert (r.ci_low, r.ci_high) == (pytest.approx(0.0, abs=1e-12), pytest.approx(100.0, abs=1e-12))
    assert (r.n_inputs, r.n_pairs) == (2, 4)


def test_paired_matches_the_documented_draws_computed_by_loops() -> None:
    rng = np.random.default_rng(3)
    ids = [int(i) for i in rng.integers(0, 7, size=30)]  # inputs numbered by first appearance
    a, b = rng.uniform(1, 2, 30), rng.uniform(1, 2.5, 30)
    result = paired_timing_change(ids, a, b, seed=42, n_resamples=300, confidence=0.9)
    order = list(dict.fromkeys(ids))
    draws = np.random.default_rng(42).integers(0, len(order), size=(300, len(order)))
    ratios = np.log(b / a)
    stats = [np.mean([ratios[k] for c in row for k in range(30) if ids[k] == order[c]]) for row in draws]
    low, high = np.quantile(stats, [0.05, 0.95])
    assert result.ci_low == pytest.approx(100 * math.expm1(low), rel=1e-12)
    assert result.ci_high == pytest.approx(100 * math.expm1(high), rel=1e-12)


def test_deterministic_per_seed() -> None:
    rng = np.random.default_rng(0)
    ids, a, b = list(range(20)) * 2, rng.uniform(1, 2, 40), rng.uniform(1, 2, 40)
    first = paired_timing_change(ids, a, b, seed=5, n_resamples=500)
    assert first == paired_timing_change(ids, a, b, seed=5, n_resamples=500)
    assert first != paired_timing_change(ids, a, b, seed=6, n_resamples=500)


def test_unpaired_median_estimate_and_extremes() -> None:
    # A: x -> 1, 1; y -> 3. B: x -> 2; y -> 6, 6. median(A) = 1, median(B) = 6: +500 %. Resample {x, x}:
    # median B / median A = 2 / 1 (+100 %); {y, y}: 6 / 3 (+100 %); one of each: 6 / 1 (+500 %).
    r = unpaired_timing_change(
        ["x", "x", "y"], [1, 1, 3], ["x", "y", "y"], [2, 6, 6], seed=2, n_resamples=2000
    )
    assert r.estimate == pytest.approx(500.0)
    assert (r.ci_low, r.ci_high) == (pytest.approx(100.0), pytest.approx(500.0))
    assert (r.n_inputs, r.n_a, r.n_b, r.statistic) == (2, 3, 3, "median")


@pytest.mark.parametrize("statistic", ["median", "mean"])
def test_unpaired_matches_the_documented_draws_computed_by_loops(statistic: Statistic) -> None:
    rng = np.random.default_rng(9)
    ids_a, ids_b = [0, 1, 2, 0, 1, 2, 3], [3, 2, 1, 0, 0]
    a, b = rng.uniform(1, 2, 7), rng.uniform(1, 3, 5)
    result = unpaired_timing_change(ids_a, a, ids_b, b, seed=4, statistic=statistic, n_resamples=400)
    point = np.median if statistic == "median" else np.mean
    order = list(dict.fromkeys(ids_a + ids_b))
    stats = []
    for row in np.random.default_rng(4).integers(0, 4, size=(400, 4)):
        cells_a = [a[k] for c in row for k in range(7) if ids_a[k] == order[c]]
        cells_b = [b[k] for c in row for k in range(5) if ids_b[k] == order[c]]
        stats.append(point(cells_b) / point(cells_a) - 1)
    low, high = np.quantile(stats, [0.025, 0.975])
    assert (result.ci_low, result.ci_high) == (pytest.approx(100 * low), pytest.approx(100 * high))
    assert result.estimate == pytest.approx(100 * (point(b) / point(a) - 1))


@pytest.mark.parametrize("statistic", ["median", "mean"])
def test_unpaired_input_on_one_side_only_can_empty_a_side(statistic: Statistic) -> None:
    with pytest.raises(ValueError, match="no timing of one side"):
        unpaired_timing_change(["x"], [1.0], ["y"], [2.0], seed=0, statistic=statistic, n_resamples=50)


def test_pairing_cancels_machine_drift_that_a_sequential_split_reports() -> None:
    # A/A: both servers run the same thing. 40 inputs x 4 passes = 160 adjacent pairs; halfway through the
    # session the machine slows down by +60 % for both servers alike; 3 % lognormal noise per request.
    rng = np.random.default_rng(2024)
    base = rng.uniform(0.5, 3.0, 40)
    ids = [i for _ in range(4) for i in range(40)]
    drift = np.where(np.arange(160) >= 80, 1.6, 1.0)
    a = base[ids] * drift * np.exp(rng.normal(0.0, 0.03, 160))
    b = base[ids] * drift * np.exp(rng.normal(0.0, 0.03, 160))
    paired = paired_timing_change(ids, a, b, seed=1, n_resamples=2000)
    assert paired.ci_low < 0.0 < paired.ci_high
    assert paired.ci_low > -10.0 and paired.ci_high < 10.0
    # The same data as a sequential run would have it: A measured in the first half, B in the second.
    statistics: tuple[Statistic, ...] = ("median", "mean")
    for statistic in statistics:
        split = unpaired_timing_change(
            ids[:80], a[:80], ids[80:], b[80:], seed=1, statistic=statistic, n_resamples=2000
        )
        assert split.ci_low > 30.0, statistic  # a "+50-60 %" change that is pure drift
        assert split.estimate > 40.0, statistic


@pytest.mark.parametrize(
    ("x", "y", "slope"),
    [
        # pairs 01, 02, 12: (1-0)/1 = 1, (4-0)/2 = 2, (4-1)/1 = 3 -> median 2
        ([0, 1, 2], [0, 1, 4], 2.0),
        # y = x except an outlier 100 at x = 4: slopes 1 (x6), 25, 33, 49, 97 -> median (1 + 1) / 2 = 1
        ([0, 1, 2, 3, 4], [0, 1, 2, 3, 100], 1.0),
        # tied x = 0, 0 skipped: (1-0)/1 = 1, (1-5)/1 = -4 -> median -1.5
        ([0, 0, 1], [0, 5, 1], -1.5),
    ],
)
def test_theil_sen_by_hand(x: list[float], y: list[float], slope: float) -> None:
    assert theil_sen_slope(x, y) == pytest.approx(slope, abs=1e-15)


def test_theil_sen_needs_two_distinct_times() -> None:
    with pytest.raises(ValueError, match="all x are equal"):
        theil_sen_slope([3, 3, 3], [1, 2, 3])


@pytest.mark.parametrize(
    ("x", "y", "s", "var_s", "tau_b"),
    [
        # y = 1, 3, 2, 2, 5 at x = 0..4. sign(y_j - y_i) over i < j: from 1: +4; from 3: -1 -1 +1 = -1;
        # from the first 2: 0 +1 = +1; from the second 2: +1. S = 4 - 1 + 1 + 1 = 5.
        # var = [5*4*15 - 2*1*9 (the tied pair of 2s)] / 18 = (300 - 18) / 18 = 282/18 = 15.667.
        # tau_b = 5 / sqrt(10 * (10 - 1)) = 0.52705.
        ([0, 1, 2, 3, 4], [1, 3, 2, 2, 5], 5, 282 / 18, 5 / math.sqrt(90)),
        # x = 0, 0, 1, 2; y = 1, 2, 2, 3 (a tie in each). Pairs: 01 x-tie 0; 02 +1; 03 +1; 12 y-tie 0;
        # 13 +1; 23 +1: S = 4. var = (4*3*13 - 2*1*9 - 2*1*9) / 18 + (2 * 2) / (2*4*3) + 0 * 0 / (9*4*3*2)
        # = 120/18 + 4/24 = 6.6667 + 0.1667 = 41/6. tau_b = 4 / sqrt((6 - 1) (6 - 1)) = 0.8.
        ([0, 0, 1, 2], [1, 2, 2, 3], 4, 41 / 6, 0.8),
        # strictly decreasing, n = 4: S = -6, var = 4*3*13/18 = 156/18, tau_b = -1
        ([0, 1, 2, 3], [4, 3, 2, 1], -6, 156 / 18, -1.0),
    ],
)
def test_mann_kendall_by_hand(x: list[float], y: list[float], s: int, var_s: float, tau_b: float) -> None:
    r = mann_kendall(x, y)
    assert (r.n, r.s) == (len(x), s)
    assert r.var_s == pytest.approx(var_s, abs=1e-12)
    assert r.tau_b == pytest.approx(tau_b, abs=1e-12)
    # continuity-corrected z = (S - sign S) / sqrt(var); p = erfc(|z| / sqrt 2)
    z = (s - math.copysign(1, s)) / math.sqrt(var_s)
    assert r.z == pytest.approx(z, abs=1e-12)
    assert r.p_value == pytest.approx(math.erfc(abs(z) / math.sqrt(2)), abs=1e-12)


def test_mann_kendall_variance_is_the_exact_permutation_variance_with_ties() -> None:
    # Under H0 every ordering of y against x is equally likely; Kendall's tie-corrected formula is the exact
    # variance of S over the 720 permutations of 6 values (ties of sizes 2 and 3 in x, 2 and 2 in y).
    x, y = [0, 0, 1, 2, 2, 2], [5, 1, 1, 3, 3, 4]
    s_values = [mann_kendall(x, list(p)).s for p in itertools.permutations(y)]
    assert mann_kendall(x, y).var_s == pytest.approx(float(np.var(s_values)), rel=1e-12)


def test_mann_kendall_all_tied_is_no_evidence() -> None:
    r = mann_kendall([0, 1, 2], [7, 7, 7])
    assert (r.s, r.z, r.p_value, r.tau_b) == (0, 0.0, 1.0, 0.0)


def _session(rng: np.random.Generator, growth_per_minute: float) -> tuple[np.ndarray, np.ndarray]:
    minutes = np.arange(120) * 0.25  # a pair every 15 s for 30 min
    times = 1.0 * (1.0 + growth_per_minute * minutes) * np.exp(rng.normal(0.0, 0.05, 120))
    return 60.0 * minutes, times


def test_drift_is_flagged_and_a_flat_series_is_not() -> None:
    rng = np.random.default_rng(11)
    seconds, growing = _session(rng, 0.02)  # +2 %/min linear growth, 5 % noise
    trend = log_trend(seconds, np.log(growing))
    assert trend.verdict == "drift"
    assert trend.test.p_value < 1e-10
    assert 1.0 < trend.pct_per_minute < 2.5  # the log of a linear +2 %/min growth slopes 2 %/min -> 1.6 %/min
    _, flat = _session(rng, 0.0)
    assert log_trend(seconds, np.log(flat)).verdict == "no_drift"


def test_drift_check_shared_drift_cancels_in_the_ratio() -> None:
    rng = np.random.default_rng(12)
    seconds, a = _session(rng, 0.02)
    b = a * np.exp(rng.normal(0.0, 0.03, a.size))  # B tracks A's machine drift
    check = drift_check(seconds, a, b)
    assert (check.a.verdict, check.b.verdict, check.paired.verdict) == ("drift", "drift", "no_drift")
    assert (check.alpha, check.min_pct_per_hour) == (0.01, 5.0)


def test_a_significant_but_small_slope_is_not_drift() -> None:
    seconds = np.arange(200) * 10.0
    values = np.log(1.01) / 3600.0 * seconds  # exactly +1 %/hour, no noise: p tiny, slope below 5 %/h
    trend = log_trend(seconds, values, min_pct_per_hour=5.0)
    assert trend.test.p_value < 1e-10
    assert trend.pct_per_hour == pytest.approx(1.0, abs=1e-9)
    assert trend.pct_per_minute == pytest.approx(100 * (1.01 ** (1 / 60) - 1), abs=1e-9)
    assert trend.verdict == "no_drift"
    assert log_trend(seconds, values, min_pct_per_hour=0.5).verdict == "drift"
    # what the session saw: 1990 s of +1 %/hour, not an hour's extrapolation
    assert trend.span_s == 1990.0
    assert trend.pct_over_span == pytest.approx(100 * (1.01 ** (1990 / 3600) - 1), abs=1e-9)


def test_a_short_steep_session_reads_as_its_own_change_not_an_extrapolated_hour() -> None:
    seconds = np.array([0.0, 60.0, 120.0, 300.0, 600.0])  # the times of a 10-minute session, out of step
    values = np.log(1.0 + seconds / 600.0 * 0.3)  # 1.0 -> 1.3 over the session, monotone
    trend = log_trend(seconds, values)
    assert trend.span_s == 600.0
    assert math.isfinite(trend.pct_over_span) and 20.0 < trend.pct_over_span < 45.0
    assert trend.pct_per_hour > 400.0  # 13 times the change the session saw: why the hourly figure misleads


@pytest.mark.parametrize(("alpha", "minimum"), [(0.0, 5.0), (1.0, 5.0), (0.01, -1.0)])
def test_log_trend_rejects_bad_parameters(alpha: float, minimum: float) -> None:
    with pytest.raises(ValueError):
        log_trend([0, 1, 2], [0, 1, 2], alpha=alpha, min_pct_per_hour=minimum)


def test_drift_check_rejects_bad_timings() -> None:
    with pytest.raises(ValueError, match=r"b\[1\]"):
        drift_check([0, 1], [1.0, 1.0], [1.0, math.nan])


def test_log_trend_steep_slope_over_short_session_is_inf_not_overflow() -> None:
    # a slowdown of x1.25 every 0.1 s: the hourly change exp(slope * 3600) - 1 overflows a float
    times = [0.1 * k for k in range(12)]
    trend = log_trend(times, [k * math.log(1.25) for k in range(12)])
    assert trend.pct_per_hour == math.inf and trend.verdict == "drift"
    assert math.isclose(trend.pct_per_minute, 100 * math.expm1(math.log(1.25) * 600), rel_tol=1e-9)


def _naive_median_interval(
    ids: list[int], ratios: np.ndarray, seed: int, n_resamples: int
) -> tuple[float, float]:
    """The module docstring's draws, one resample at a time: inputs drawn with replacement, all pairs of each."""
    rng = np.random.default_rng(seed)
    inputs = sorted(set(ids), key=ids.index)
    by_input = {i: ratios[[k for k, j in enumerate(ids) if j == i]] for i in inputs}
    drawn = rng.integers(0, len(inputs), size=(n_resamples, len(inputs)))
    medians = [float(np.median(np.concatenate([by_input[inputs[d]] for d in row]))) for row in drawn]
    low, high = np.quantile(medians, [0.025, 0.975])
    return 100 * math.expm1(low), 100 * math.expm1(high)


def test_the_paired_median_is_the_typical_pair_and_its_interval_follows_the_documented_draws() -> None:
    ids = [k // 3 for k in range(36)]  # 12 inputs x 3 repetitions
    rng = np.random.default_rng(5)
    a = rng.uniform(50.0, 900.0, size=36)
    noise = rng.normal(0.0, 0.03, size=36)
    burst = np.zeros(36)
    burst[[9, 11, 12, 18, 20]] = np.log(3.0)  # five pairs whose side b was hit by other work: 3x slower
    b = a * np.exp(noise + burst)
    mean = paired_timing_change(ids, a, b, seed=3, n_resamples=2000)
    median = paired_timing_change(ids, a, b, seed=3, n_resamples=2000, statistic="median")
    ratios = np.log(b / a)
    assert median.statistic == "median" and mean.statistic == "mean"
    assert median.estimate == pytest.approx(100 * math.expm1(float(np.median(ratios))), abs=1e-9)
    low, high = _naive_median_interval(ids, ratios, seed=3, n_resamples=2000)
    assert (median.ci_low, median.ci_high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    # the bursts move the mean of the log-ratios by ~15 %, not the median
    assert mean.estimate > 10.0 and abs(median.estimate) < 3.0 and median.ci_low < 0.0 < median.ci_high
