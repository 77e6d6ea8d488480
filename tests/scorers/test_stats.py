"""Paired bootstrap: hand-computed estimates and intervals, the documented draws, NaN cells, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scorers.stats import (
    BootstrapResult,
    paired_bootstrap_difference,
    paired_bootstrap_relative_change,
    signed_pct,
)


def test_relative_change_estimate_over_all_cells() -> None:
    # mean(a) = (1 + 1 + 2 + 2) / 4 = 1.5, mean(b) = 2: 2 / 1.5 - 1 = 1/3
    r = paired_bootstrap_relative_change([[1, 1], [2, 2]], [[2, 2], [2, 2]], seed=1, n_resamples=100)
    assert r.estimate == pytest.approx(1 / 3, abs=1e-15)
    assert (r.n_inputs, r.n_resamples, r.seed, r.confidence) == (2, 100, 1, 0.95)


def test_one_input_has_a_degenerate_interval() -> None:
    r = paired_bootstrap_relative_change([[2.0, 2.0, 2.0]], [[3.0, 3.0, 3.0]], seed=0)
    assert r == BootstrapResult(0.5, 0.5, 0.5, 1, 10000, 0, 0.95)


def test_two_inputs_interval_is_the_extremes() -> None:
    # inputs: A = 1, 1; B = 1, 3. Resamples pick {0,0} -> 0.0, {1,1} -> 2.0, one of each -> 1.0, each
    # extreme with probability 1/4 >> 2.5%, so the 95% percentile interval is [0, 2] around 1.
    r = paired_bootstrap_relative_change([[1.0], [1.0]], [[1.0], [3.0]], seed=7)
    assert (r.estimate, r.low, r.high) == (1.0, 0.0, 2.0)


def test_nan_cells_are_missing_repetitions() -> None:
    # a cells: 1, 3, 3 (mean 7/3); b cells: 2, 2, 4, 4 (mean 3): 3 / (7/3) - 1 = 2/7
    r = paired_bootstrap_relative_change([[1, math.nan], [3, 3]], [[2, 2], [4, 4]], seed=3, n_resamples=50)
    assert r.estimate == pytest.approx(2 / 7, abs=1e-15)
    assert r.low <= r.estimate <= r.high


def test_matches_the_documented_draws_computed_by_loops() -> None:
    rng = np.random.default_rng(11)
    a = rng.uniform(1.0, 2.0, size=(6, 3))
    b = rng.uniform(1.0, 2.5, size=(6, 4))
    a[2, 1] = math.nan
    result = paired_bootstrap_relative_change(a, b, seed=42, n_resamples=300, confidence=0.9)
    idx = np.random.default_rng(42).integers(0, 6, size=(300, 6))
    stats = []
    for row in idx:
        cells_a = [v for i in row for v in a[i] if not math.isnan(v)]
        cells_b = [v for i in row for v in b[i]]
        stats.append((sum(cells_b) / len(cells_b)) / (sum(cells_a) / len(cells_a)) - 1)
    low, high = np.quantile(stats, [0.05, 0.95])
    assert result.low == pytest.approx(low, rel=1e-12)
    assert result.high == pytest.approx(high, rel=1e-12)


def test_deterministic_per_seed() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(1, 2, (32, 5)), rng.uniform(1, 2, (32, 5))
    first = paired_bootstrap_relative_change(a, b, seed=5)
    assert first == paired_bootstrap_relative_change(a, b, seed=5)
    assert first != paired_bootstrap_relative_change(a, b, seed=6)
    assert first.low < first.estimate < first.high


def test_difference_hand_values() -> None:
    r = paired_bootstrap_difference([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], seed=0)
    assert (r.estimate, r.low, r.high, r.n_inputs) == (1.0, 1.0, 1.0, 3)
    # differences 0 and 1: resample means 0, 0.5, 1 with 0 and 1 at probability 1/4 each
    r = paired_bootstrap_difference([0.0, 0.0], [0.0, 1.0], seed=9)
    assert (r.estimate, r.low, r.high) == (0.5, 0.0, 1.0)
    r = paired_bootstrap_difference([0.5, 0.25], [0.25, 0.5], seed=1, n_resamples=10)
    assert r.estimate == 0.0


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([[1.0]], [[1.0], [2.0]], "same inputs"),
        ([1.0, 2.0], [1.0, 2.0], r"\[n_inputs, reps\]"),
        ([[math.nan, math.nan]], [[1.0, 1.0]], "no valid repetition"),
        ([[0.0]], [[1.0]], "undefined"),
        ([[math.inf]], [[1.0]], "infinite"),
    ],
)
def test_relative_change_errors(a: object, b: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_relative_change(a, b, seed=0, n_resamples=10)  # type: ignore[arg-type]


def test_argument_errors() -> None:
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap_difference([1.0], [1.0], seed=0, confidence=1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap_difference([1.0], [1.0], seed=0, n_resamples=0)
    with pytest.raises(ValueError, match="1-D"):
        paired_bootstrap_difference([1.0, 2.0], [1.0], seed=0)
    with pytest.raises(ValueError, match="NaN"):
        paired_bootstrap_difference([math.nan], [1.0], seed=0)
    with pytest.raises(ValueError, match="undefined"):  # a resample of only the zero input
        paired_bootstrap_relative_change([[0.0], [1.0]], [[1.0], [1.0]], seed=0, n_resamples=200)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (50.0, "+50.0%"),
        (-12.34, "-12.3%"),
        (0.0, "+0.0%"),
        (-0.0, "+0.0%"),
        (-1e-14, "+0.0%"),  # a ratio of 1 less a rounding error: no sign of a fall
        (-0.04, "+0.0%"),
        (-0.06, "-0.1%"),
        (0.06, "+0.1%"),
        (10.0, "+10.0%"),
    ],
)
def test_a_change_is_shown_with_its_sign_and_zero_is_never_negative(value: float, shown: str) -> None:
    assert signed_pct(value) == shown
