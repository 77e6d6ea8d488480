"""The timing interval candidates (scorers/paired_timing.py) against independent computations: published
t quantiles, closed-form t distributions, brute-force enumeration of the signed-rank and randomization
distributions, and Yuen's interval worked by hand."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest

from scorers.paired_timing import (
    hodges_lehmann_change,
    paired_timing_change,
    per_input_means,
    randomization_change,
    signed_rank_cdf,
    student_t_cdf,
    student_t_quantile,
    studentized_bootstrap_change,
    t_interval_change,
    trimmed_t_change,
)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [  # two-sided 95 % and 90 % critical values of standard t tables (e.g. NIST/SEMATECH handbook 1.3.6.7.2)
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 3, 3.182),
        (0.975, 5, 2.571),
        (0.975, 10, 2.228),
        (0.975, 30, 2.042),
        (0.95, 4, 2.132),
        (0.995, 20, 2.845),
        (0.025, 7, -2.365),
    ],
)
def test_student_t_quantile_matches_tables(p: float, df: int, expected: float) -> None:
    assert student_t_quantile(p, df) == pytest.approx(expected, abs=6e-4)


@pytest.mark.parametrize("t", [-7.5, -1.0, -0.2, 0.0, 0.3, 1.7, 40.0])
def test_student_t_cdf_closed_forms(t: float) -> None:
    assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)  # Cauchy
    assert student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)


def _brute_signed_rank_cdf(n: int) -> list[float]:
    sums = [
        sum(r for r, s in zip(range(1, n + 1), signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=n)
    ]
    return [sum(x <= k for x in sums) / 2**n for k in range(n * (n + 1) // 2 + 1)]


@pytest.mark.parametrize("n", [1, 2, 3, 6, 9])
def test_signed_rank_cdf_by_enumeration(n: int) -> None:
    assert signed_rank_cdf(n).tolist() == pytest.approx(_brute_signed_rank_cdf(n))


# per-input means are the values below when each input has one pair with a = 1
MEANS_8 = [0.12, -0.05, 0.31, 0.02, -0.2, 0.07, 0.15, -0.01]


def _one_pair_each(values: list[float]) -> tuple[list[int], list[float], list[float]]:
    return list(range(len(values))), [1.0] * len(values), [math.exp(v) for v in values]


@pytest.mark.parametrize(
    ("values", "confidence"), [(MEANS_8, 0.95), (MEANS_8[:6], 0.95), (MEANS_8[:7], 0.9), (MEANS_8, 0.8)]
)
def test_hodges_lehmann_by_enumeration(values: list[float], confidence: float) -> None:
    ids, a, b = _one_pair_each(values)
    n = len(values)
    walsh = sorted((values[i] + values[j]) / 2 for i in range(n) for j in range(i, n))
    cdf = _brute_signed_rank_cdf(n)
    k = sum(c <= (1 - confidence) / 2 for c in cdf)
    ch = hodges_lehmann_change(ids, a, b, confidence=confidence)
    assert ch.estimate == pytest.approx(100 * math.expm1(statistics.median(walsh)))
    assert ch.ci_low == pytest.approx(100 * math.expm1(walsh[k - 1]))
    assert ch.ci_high == pytest.approx(100 * math.expm1(walsh[len(walsh) - k]))
    assert (ch.statistic, ch.method) == ("hodges_lehmann", "signed_rank")


def test_hodges_lehmann_six_inputs_is_the_range_and_five_has_no_95_interval() -> None:
    ids, a, b = _one_pair_each(MEANS_8[:6])
    ch = hodges_lehmann_change(ids, a, b)  # P(T+ = 0) = 1/64 <= 0.025 < P(T+ <= 1) = 2/64: k = 1
    assert (ch.ci_low, ch.ci_high) == pytest.approx((100 * math.expm1(-0.2), 100 * math.expm1(0.31)))
    ids, a, b = _one_pair_each(MEANS_8[:5])
    five = hodges_lehmann_change(ids, a, b)  # P(T+ = 0) = 1/32 > 0.025
    assert five.ci_low == -100.0 and five.ci_high == math.inf


def test_t_interval_by_hand() -> None:
    # two pairs per input: the per-input means are the means of the two log-ratios
    ids = ["x", "x", "y", "y", "z", "z", "w", "w"]
    logs = [0.1, 0.3, -0.2, 0.0, 0.05, 0.15, 0.4, 0.2]
    a = [2.0] * 8
    b = [2.0 * math.exp(v) for v in logs]
    means = [0.2, -0.1, 0.1, 0.3]
    half = 3.182446 * statistics.stdev(means) / 2.0  # t_{0.975, 3}
    m = statistics.fmean(means)
    ch = t_interval_change(ids, a, b)
    assert per_input_means(ids, logs).tolist() == pytest.approx(means)
    assert ch.estimate == pytest.approx(100 * math.expm1(m))
    assert ch.ci_low == pytest.approx(100 * math.expm1(m - half), abs=1e-5)
    assert ch.ci_high == pytest.approx(100 * math.expm1(m + half), abs=1e-5)
    assert (ch.n_inputs, ch.n_pairs, ch.method) == (4, 8, "t")


def test_yuen_trimmed_interval_by_hand() -> None:
    values = [0.9, -0.3, 0.1, 0.0, 0.2, 0.05, -0.1, 0.15, 0.12, -0.05]  # n = 10, trim 0.2: g = 2, h = 6
    ids, a, b = _one_pair_each(values)
    s = sorted(values)  # -0.3 -0.1 -0.05 0 0.05 0.1 0.12 0.15 0.2 0.9
    trimmed = statistics.fmean(s[2:8])
    winsorized = [s[2]] * 2 + s[2:8] + [s[7]] * 2
    se = statistics.stdev(winsorized) / (0.6 * math.sqrt(10))
    half = 2.570582 * se  # t_{0.975, h - 1 = 5}
    ch = trimmed_t_change(ids, a, b)
    assert ch.estimate == pytest.approx(100 * math.expm1(trimmed))
    assert ch.ci_low == pytest.approx(100 * math.expm1(trimmed - half), abs=1e-5)
    assert ch.ci_high == pytest.approx(100 * math.expm1(trimmed + half), abs=1e-5)
    assert ch.statistic == "trimmed_mean"
    assert trimmed_t_change(ids, a, b, trim=0.0).ci_low == pytest.approx(t_interval_change(ids, a, b).ci_low)


def _brute_p_upper(d: list[float], blocks: list[int], delta: float) -> float:
    """P(flipped mean of d - delta <= observed), over all 2^B assignments of the blocks (identity included)."""
    x = [v - delta for v in d]
    observed = statistics.fmean(x)
    names = sorted(set(blocks))
    count = 0
    for signs in itertools.product((1, -1), repeat=len(names)):
        sign = dict(zip(names, signs, strict=True))
        count += statistics.fmean(sign[bk] * v for bk, v in zip(blocks, x, strict=True)) <= observed + 1e-12
    return count / 2 ** len(names)


def _brute_p_lower(d: list[float], blocks: list[int], delta: float) -> float:
    return _brute_p_upper([-v for v in d], blocks, -delta)


@pytest.mark.parametrize(
    ("d", "blocks", "confidence"),
    [
        ([0.1, -0.3, 0.25, 0.05, 0.4, -0.1], [0, 1, 2, 3, 4, 5], 0.75),  # 64 assignments: c = 3
        ([0.1, -0.3, 0.25, 0.05, 0.4, -0.1, 0.2, 0.0], [0, 0, 1, 2, 2, 3, 4, 4], 0.6),  # blocks of 1 and 2
    ],
)
def test_randomization_interval_inverts_the_brute_force_test(
    d: list[float], blocks: list[int], confidence: float
) -> None:
    ids = list(range(len(d)))
    ch = randomization_change(
        ids, [1.0] * len(d), [math.exp(v) for v in d], blocks=blocks, confidence=confidence
    )
    low, high = math.log1p(ch.ci_low / 100), math.log1p(ch.ci_high / 100)
    tail, eps = (1 - confidence) / 2, 1e-7
    assert _brute_p_upper(d, blocks, high - eps) > tail >= _brute_p_upper(d, blocks, high + eps)
    assert _brute_p_lower(d, blocks, low + eps) > tail >= _brute_p_lower(d, blocks, low - eps)
    assert ch.estimate == pytest.approx(100 * math.expm1(statistics.fmean(d)))
    assert ch.resamples == 2 ** len(set(blocks)) - 1


def test_randomization_random_flips_when_too_many_blocks() -> None:
    rng = np.random.default_rng(3)
    d = rng.normal(0.05, 0.1, 40)
    ids = [k // 2 for k in range(40)]
    ch = randomization_change(ids, np.ones(40), np.exp(d), blocks=list(range(40)), max_flips=999, seed=5)
    assert ch.resamples == 999
    assert ch.ci_low < ch.estimate < ch.ci_high
    # the sign-flip interval of iid values is close to the t interval of the same values (one pair per block)
    t = t_interval_change(list(range(40)), np.ones(40), np.exp(d))
    assert ch.ci_low == pytest.approx(t.ci_low, abs=1.0) and ch.ci_high == pytest.approx(t.ci_high, abs=1.0)


def test_studentized_bootstrap_is_shift_equivariant_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(11)
    ids = [k // 3 for k in range(24)]
    a = np.exp(rng.normal(3.0, 0.2, 24))
    b = a * np.exp(rng.normal(0.0, 0.1, 24))
    ch = studentized_bootstrap_change(ids, a, b, seed=2, n_resamples=2000)
    shifted = studentized_bootstrap_change(ids, a, b * math.exp(0.3), seed=2, n_resamples=2000)
    lo, hi = math.log1p(ch.ci_low / 100), math.log1p(ch.ci_high / 100)
    assert math.log1p(shifted.ci_low / 100) == pytest.approx(lo + 0.3)
    assert math.log1p(shifted.ci_high / 100) == pytest.approx(hi + 0.3)
    assert ch.ci_low < ch.estimate < ch.ci_high
    assert ch.estimate == pytest.approx(paired_timing_change(ids, a, b, seed=2).estimate)
    assert ch.method == "bootstrap_t"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: t_interval_change([0, 0], [1.0, 1.0], [1.0, 2.0]), "at least 2"),
        (lambda: trimmed_t_change([0, 1, 2], [1.0] * 3, [1.0, 2.0, 3.0], trim=0.5), "trim"),
        (lambda: randomization_change([0, 1], [1.0, 1.0], [1.0, 2.0], blocks=[0]), "one per pair"),
        (lambda: hodges_lehmann_change([0, 1], [1.0], [1.0]), "one id per pair"),
    ],
)
def test_bad_arguments_are_named(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]
