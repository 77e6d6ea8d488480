"""Sequential decisions: the N/N rule, the asymptotic confidence sequence's radius by hand and its coverage
under continuous monitoring, and the gate verdicts."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from scorers.sequential import (
    AllEqualResult,
    ConfidenceSequence,
    all_equal_rule,
    asymptotic_cs,
    asymptotic_rho2,
    cs_decision,
    first_decision,
)


class _Exhausted(AssertionError):
    pass


def _then_fail(prefix: list[bool]) -> Iterator[bool]:
    yield from prefix
    raise _Exhausted("the rule read past the mismatch")


@pytest.mark.parametrize(
    ("observations", "expected"),
    [
        ([], AllEqualResult("continue", 0, 3, None)),
        ([False, False], AllEqualResult("continue", 2, 3, None)),
        ([False, False, False], AllEqualResult("pass", 3, 3, None)),
        ([False, True], AllEqualResult("fail", 2, 3, 1)),
        ([True], AllEqualResult("fail", 1, 3, 0)),
    ],
)
def test_all_equal_rule(observations: list[bool], expected: AllEqualResult) -> None:
    assert all_equal_rule(observations, n_planned=3) == expected


def test_all_equal_rule_fails_at_once_without_reading_further() -> None:
    assert all_equal_rule(_then_fail([False, True]), n_planned=10).state == "fail"


def test_all_equal_rule_rejects_extra_observations_and_bad_plans() -> None:
    with pytest.raises(ValueError, match="more than n_planned"):
        all_equal_rule([False] * 4, n_planned=3)
    with pytest.raises(ValueError, match="n_planned"):
        all_equal_rule([], n_planned=0)


def test_asymptotic_radius_by_hand() -> None:
    # values 1, 2, 3, 6 at t = 4: mean 3, deviations -2, -1, 0, 3, sd = sqrt(14 / 3) = 2.160247. With
    # rho2 = 1, t rho2 + 1 = 5: 2 * 5 / 4^2 = 0.625; sqrt(5) / 0.05 = 44.72136; log = 3.800451;
    # 0.625 * 3.800451 = 2.375282; sqrt = 1.541195 (the unit radius); 2.160247 * 1.541195 = 3.329362.
    cs = asymptotic_cs([1.0, 2.0, 3.0, 6.0], rho2=1.0, min_n=2)
    assert cs.highs[3] - cs.means[3] == pytest.approx(3.329362, abs=1e-6)
    assert (cs.lows[0], cs.highs[0]) == (-math.inf, math.inf)
    default = asymptotic_cs([1.0, 2.0, 3.0, 6.0], rho2=1.0)  # min_n = 10: no interval yet
    assert set(default.highs) == {math.inf}


def _ever_miss(lows: tuple[float, ...], highs: tuple[float, ...], mean: float) -> bool:
    return any(low > mean or high < mean for low, high in zip(lows, highs, strict=True))


# 400 streams: the miss rate's binomial sd at alpha = 0.05 is sqrt(0.05 * 0.95 / 400) = 0.011; slack 3 sd
_STREAMS, _STEPS, _MEAN, _SIGMA, _SLACK = 400, 200, 0.3, 2.0, 0.033


def test_asymptotic_cs_covers_from_min_n() -> None:
    data = np.random.default_rng(8).normal(_MEAN, _SIGMA, size=(_STREAMS, _STEPS))
    rho2 = asymptotic_rho2(100, alpha=0.05)
    misses = sum(_ever_miss(*_bounds(asymptotic_cs(s, rho2=rho2)), _MEAN) for s in data)
    assert misses / _STREAMS <= 0.05 + _SLACK
    # Contrast: a fixed-n 95 % interval recomputed after every input misses in far more streams.
    t = np.arange(1, _STEPS + 1)
    naive = np.abs(np.cumsum(data, axis=1) / t - _MEAN) > 1.96 * _SIGMA / np.sqrt(t)
    assert np.mean(np.any(naive, axis=1)) > 0.25


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
    cs = asymptotic_cs([0.0, 0.0, 0.0], rho2=1.0)  # before min_n: no bounds
    assert first_decision(cs, threshold_pct=5.0).state == "continue"
    assert first_decision(cs, threshold_pct=5.0).n == 3
