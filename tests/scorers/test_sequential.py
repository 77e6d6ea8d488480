"""Sequential decisions: SPRT by hand and by simulation, the N/N rule, confidence sequences' radius,
coverage under continuous monitoring, and the gate verdicts."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from scorers.sequential import (
    ConfidenceSequence,
    RuleResult,
    SprtDesign,
    SprtResult,
    all_equal_rule,
    asymptotic_cs,
    asymptotic_rho2,
    cs_decision,
    first_decision,
    normal_mixture_cs,
    normal_mixture_radius,
    rho_for_horizon,
    sprt,
    sprt_step,
    sprt_thresholds,
)

DESIGN = SprtDesign(p0=0.01, p1=0.05, alpha=0.05, beta=0.1)


@pytest.mark.parametrize(
    ("p0", "p1", "alpha", "beta"),
    [(0.05, 0.01, 0.05, 0.1), (0.0, 0.1, 0.05, 0.1), (0.01, 1.0, 0.05, 0.1), (0.01, 0.05, 0.0, 0.1),
     (0.01, 0.05, 0.6, 0.5)],
)  # fmt: skip
def test_design_rejects_bad_parameters(p0: float, p1: float, alpha: float, beta: float) -> None:
    with pytest.raises(ValueError):
        SprtDesign(p0, p1, alpha, beta)


def test_thresholds_by_hand() -> None:
    # upper log((1 - 0.1) / 0.05) = log 18 = 2.890372; lower log(0.1 / (1 - 0.05)) = log 0.105263 = -2.251292
    t = sprt_thresholds(DESIGN)
    assert t.upper == pytest.approx(2.890372, abs=1e-6)
    assert t.lower == pytest.approx(-2.251292, abs=1e-6)


def test_llr_by_hand_after_four_observations() -> None:
    # a mismatch adds log(0.05 / 0.01) = log 5 = 1.609438; a match log(0.95 / 0.99) = -0.041243.
    # match, match, mismatch, match: 3 * (-0.041243) + 1.609438 = 1.485709, between the thresholds.
    r = sprt([False, False, True, False], DESIGN)
    assert r == SprtResult("continue", pytest.approx(1.485709, abs=1e-6), 4, 1)


@pytest.mark.parametrize(
    ("mismatch", "state", "n"),
    [
        # 2 mismatches: 2 * 1.609438 = 3.218876 >= 2.890372 (one gives 1.609 < 2.890)
        (True, "accept_h1", 2),
        # matches: n * 0.041243 >= 2.251292 first at n = ceil(54.59) = 55
        (False, "accept_h0", 55),
    ],
)
def test_sprt_stops_at_the_first_crossing(mismatch: bool, state: str, n: int) -> None:
    r = sprt(iter([mismatch] * 1000), DESIGN)
    assert (r.state, r.n) == (state, n)


def test_a_decided_test_is_unchanged() -> None:
    decided = SprtResult("accept_h1", 3.2, 2, 2)
    assert sprt_step(decided, False, DESIGN) is decided


def _streams(p: float, n_streams: int, seed: int) -> list[SprtResult]:
    rng = np.random.default_rng(seed)
    # 3000 observations per stream: the expected sample size here is well under 200, so none runs out
    return [sprt((rng.random(3000) < p).tolist(), DESIGN) for _ in range(n_streams)]


def test_sprt_under_h1_stops_and_mostly_accepts_h1() -> None:
    results = _streams(DESIGN.p1, 300, seed=1)
    assert all(r.state != "continue" for r in results)
    wrong = sum(r.state == "accept_h0" for r in results) / len(results)
    # Wald: beta' <= beta / (1 - alpha) = 0.105; binomial sd at 0.105 over 300 streams is 0.018: slack 3 sd
    assert wrong <= 0.105 + 0.054


def test_sprt_under_h0_rarely_accepts_h1() -> None:
    results = _streams(DESIGN.p0, 300, seed=2)
    assert all(r.state != "continue" for r in results)
    wrong = sum(r.state == "accept_h1" for r in results) / len(results)
    # Wald: alpha' <= alpha / (1 - beta) = 0.0556; binomial sd at 0.0556 over 300 streams is 0.013: 3 sd
    assert wrong <= 0.0556 + 0.04


class _Exhausted(AssertionError):
    pass


def _then_fail(prefix: list[bool]) -> Iterator[bool]:
    yield from prefix
    raise _Exhausted("the rule read past the mismatch")


@pytest.mark.parametrize(
    ("observations", "expected"),
    [
        ([], RuleResult("continue", 0, 3, None)),
        ([False, False], RuleResult("continue", 2, 3, None)),
        ([False, False, False], RuleResult("pass", 3, 3, None)),
        ([False, True], RuleResult("fail", 2, 3, 1)),
        ([True], RuleResult("fail", 1, 3, 0)),
    ],
)
def test_all_equal_rule(observations: list[bool], expected: RuleResult) -> None:
    assert all_equal_rule(observations, n_planned=3) == expected


def test_all_equal_rule_fails_at_once_without_reading_further() -> None:
    assert all_equal_rule(_then_fail([False, True]), n_planned=10).state == "fail"


def test_all_equal_rule_rejects_extra_observations_and_bad_plans() -> None:
    with pytest.raises(ValueError, match="more than n_planned"):
        all_equal_rule([False] * 4, n_planned=3)
    with pytest.raises(ValueError, match="n_planned"):
        all_equal_rule([], n_planned=0)


def test_normal_mixture_radius_by_hand() -> None:
    # t = 4, sigma = 1, rho = 1, alpha = 0.05: t sigma^2 + rho = 5; 2 * 5 / 4^2 = 0.625;
    # sqrt(5 / 1) / 0.05 = 2.236068 / 0.05 = 44.72136; log = 3.800451; 0.625 * 3.800451 = 2.375282;
    # sqrt(2.375282) = 1.541195
    assert normal_mixture_radius(4, sigma=1.0, rho=1.0, alpha=0.05) == pytest.approx(1.541195, abs=1e-6)
    cs = normal_mixture_cs([1.0, 2.0, 3.0, 6.0], sigma=1.0, rho=1.0)
    assert (cs.means[3], cs.lows[3], cs.highs[3]) == pytest.approx(
        (3.0, 3 - 1.541195, 3 + 1.541195), abs=1e-6
    )
    assert (cs.method, cs.alpha, cs.tuning, cs.sigma) == ("normal_mixture", 0.05, 1.0, 1.0)


def test_asymptotic_radius_by_hand() -> None:
    # values 1, 2, 3, 6 at t = 4: mean 3, deviations -2, -1, 0, 3, sd = sqrt(14 / 3) = 2.160247. With
    # rho2 = 1 the unit radius is the one above (t rho2 + 1 = 5): 1.541195; 2.160247 * 1.541195 = 3.329362.
    cs = asymptotic_cs([1.0, 2.0, 3.0, 6.0], rho2=1.0, min_n=2)
    assert cs.highs[3] - cs.means[3] == pytest.approx(3.329362, abs=1e-6)
    assert (cs.lows[0], cs.highs[0]) == (-math.inf, math.inf)
    default = asymptotic_cs([1.0, 2.0, 3.0, 6.0], rho2=1.0)  # min_n = 10: no interval yet
    assert set(default.highs) == {math.inf}


@pytest.mark.parametrize(
    "sigma_rho", [(1.0, 1.0), (0.05, 0.1), (2.0, rho_for_horizon(50, sigma=2.0, alpha=0.05))]
)
def test_width_shrinks_with_n(sigma_rho: tuple[float, float]) -> None:
    sigma, rho = sigma_rho
    radius = normal_mixture_radius(np.arange(1, 5001), sigma=sigma, rho=rho, alpha=0.05)
    assert np.all(np.diff(radius) < 0.0)
    assert radius[-1] < radius[0] / 20


def test_rho_for_horizon_is_near_the_narrowest_at_t_star() -> None:
    rho = rho_for_horizon(100, sigma=2.0, alpha=0.05)
    at = normal_mixture_radius(100, sigma=2.0, rho=rho, alpha=0.05)
    for factor in (0.5, 0.8, 1.25, 2.0):
        assert at < normal_mixture_radius(100, sigma=2.0, rho=rho * factor, alpha=0.05)
    # the two parametrisations agree: rho = sigma^2 / rho2
    assert rho == pytest.approx(4.0 / asymptotic_rho2(100, alpha=0.05), rel=1e-12)


def _ever_miss(lows: tuple[float, ...], highs: tuple[float, ...], mean: float) -> bool:
    return any(low > mean or high < mean for low, high in zip(lows, highs, strict=True))


# 400 streams: the miss rate's binomial sd at alpha = 0.05 is sqrt(0.05 * 0.95 / 400) = 0.011; slack 3 sd
_STREAMS, _STEPS, _MEAN, _SIGMA, _SLACK = 400, 200, 0.3, 2.0, 0.033


def test_normal_mixture_cs_covers_under_continuous_monitoring() -> None:
    data = np.random.default_rng(7).normal(_MEAN, _SIGMA, size=(_STREAMS, _STEPS))
    rho = rho_for_horizon(100, sigma=_SIGMA, alpha=0.05)
    misses = sum(_ever_miss(*_bounds(normal_mixture_cs(s, sigma=_SIGMA, rho=rho)), _MEAN) for s in data)
    assert misses / _STREAMS <= 0.05 + _SLACK
    # Contrast: a fixed-n 95 % interval recomputed after every input misses in far more streams.
    t = np.arange(1, _STEPS + 1)
    naive = np.abs(np.cumsum(data, axis=1) / t - _MEAN) > 1.96 * _SIGMA / np.sqrt(t)
    assert np.mean(np.any(naive, axis=1)) > 0.25


def test_asymptotic_cs_covers_from_min_n() -> None:
    data = np.random.default_rng(8).normal(_MEAN, _SIGMA, size=(_STREAMS, _STEPS))
    rho2 = asymptotic_rho2(100, alpha=0.05)
    misses = sum(_ever_miss(*_bounds(asymptotic_cs(s, rho2=rho2)), _MEAN) for s in data)
    assert misses / _STREAMS <= 0.05 + _SLACK


def _bounds(cs: ConfidenceSequence) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return cs.lows, cs.highs


@pytest.mark.parametrize(
    ("low_pct", "high_pct", "state"),
    [
        (-2.0, 3.0, "within"),
        (-5.0, 5.0, "within"),  # the band's own edges count as inside
        (-6.0, 3.0, "continue"),
        (-1.0, 8.0, "continue"),
        (5.5, 9.0, "outside"),
        (-20.0, -5.5, "outside"),
        (-20.0, 20.0, "continue"),
    ],
)
def test_cs_decision(low_pct: float, high_pct: float, state: str) -> None:
    d = cs_decision(math.log1p(low_pct / 100), math.log1p(high_pct / 100), n=12, threshold_pct=5.0)
    assert (d.state, d.n, d.threshold_pct) == (state, 12, 5.0)
    assert (d.low_pct, d.high_pct) == (pytest.approx(low_pct), pytest.approx(high_pct))


@pytest.mark.parametrize(("low", "high", "threshold"), [(0.1, 0.0, 5.0), (0.0, 0.1, 0.0), (0.0, 0.1, 100.0)])
def test_cs_decision_rejects_bad_arguments(low: float, high: float, threshold: float) -> None:
    with pytest.raises(ValueError):
        cs_decision(low, high, n=1, threshold_pct=threshold)


@pytest.mark.parametrize(("true_change_pct", "state"), [(0.0, "within"), (20.0, "outside")])
def test_first_decision_stops_early(true_change_pct: float, state: str) -> None:
    values = np.random.default_rng(5).normal(math.log1p(true_change_pct / 100), 0.05, 400)
    cs = asymptotic_cs(values, rho2=asymptotic_rho2(50, alpha=0.05))
    d = first_decision(cs, threshold_pct=5.0)
    assert d.state == state
    assert 10 <= d.n < 400
    before = first_decision(
        asymptotic_cs(values[: d.n - 1], rho2=asymptotic_rho2(50, alpha=0.05)), threshold_pct=5.0
    )
    assert before.state == "continue"  # d.n is the first settled step


def test_first_decision_without_a_verdict_is_continue_at_the_last_step() -> None:
    cs = normal_mixture_cs([0.0, 0.0, 0.0], sigma=1.0, rho=1.0)
    assert first_decision(cs, threshold_pct=5.0).state == "continue"
    assert first_decision(cs, threshold_pct=5.0).n == 3
