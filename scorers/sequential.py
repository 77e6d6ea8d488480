"""Sequential decisions that may look after every input: the N/N rule, and a confidence sequence for a
mean timing change.

The N/N rule (`all_equal_rule`): for lbeval's "must be N/N equal" rules there are no statistics. One
reproducible mismatch (a mismatch the caller has confirmed by rerunning, so not a transient) settles FAIL
at once; PASS is settled only when all n_planned observations have been seen without one, since the next
observation could always be the mismatch.

Confidence sequences for a mean (the timing change in log-ratio units, one value per input). A
(1 - alpha) confidence sequence (CS) is a sequence of intervals C_t with P(exists t: mu not in C_t) <=
alpha: it stays valid under continuous monitoring and optional stopping, unlike a fixed-n interval
recomputed after every input.

`asymptotic_cs` (Waudby-Smith, Arbour, Sinha, Kennedy, Ramdas 2021, "Time-uniform central limit theory and
asymptotic confidence sequences", arXiv:2103.06476, the Gaussian-mixture asymptotic CS). Robbins' normal
mixture boundary (Howard, Ramdas, McAuliffe, Sekhon 2021, Ann. Statist. 49(2)) with the scale replaced by
the running sample standard deviation sd_t (ddof = 1) and the tuning written as rho2:

    r_t = sd_t * sqrt( (2 (t rho2 + 1) / (t^2 rho2)) * log( sqrt(t rho2 + 1) / alpha ) ),

tightest around t* when rho2 = (-2 log alpha + log(1 - 2 log alpha)) / t* (`asymptotic_rho2`).

Assumptions: i.i.d. observations with a finite moment of order 2 + delta (the paper also covers
time-varying conditional means). The coverage is asymptotic: it approaches 1 - alpha as the first time
looked at grows, and intervals from a handful of inputs under-cover badly (in a normal simulation,
looking from t = 2 on, 16 % of streams ever miss the mean at alpha = 5 %; from t = 10 on, about 4 %).
So the bounds are infinite (no decision) before t = min_n (default 10). It needs no sigma, which is why
it fits timing log-ratios, whose scale is not known in advance. The CS covers the mean of the
distribution the inputs are drawn from (inputs as a sample from a population of inputs of the same kind,
as in scorers.stats).

`cs_decision` turns an interval on the log-ratio scale into a gate verdict for a band of +- threshold %:
"within" when the whole interval lies inside [log(1 - thr), log(1 + thr)], "outside" when it lies
entirely above log(1 + thr) or entirely below log(1 - thr), "continue" otherwise. Because the CS is
time-uniform, stopping at the first settled step (`first_decision`) keeps the error rate <= alpha
(approximately, `asymptotic_cs` being asymptotic).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

RuleState = Literal["continue", "pass", "fail"]
CsState = Literal["continue", "within", "outside"]
CsMethod = Literal["asymptotic"]


@dataclass(frozen=True)
class AllEqualResult:
    """N/N rule after n of n_planned observations; first_mismatch is its 0-based position, if any."""

    state: RuleState
    n: int
    n_planned: int
    first_mismatch: int | None


@dataclass(frozen=True)
class ConfidenceSequence:
    """Running means and CS bounds after each step t = 1..n (index t - 1), on the scale of the values."""

    means: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    method: CsMethod
    alpha: float
    tuning: float  # rho2, see the module docstring


@dataclass(frozen=True)
class CsDecision:
    """Gate verdict at step n for a band of +- threshold_pct %, with the interval there in percent."""

    state: CsState
    n: int
    low_pct: float
    high_pct: float
    threshold_pct: float


def all_equal_rule(mismatches: Iterable[bool], *, n_planned: int) -> AllEqualResult:
    """The N/N rule: FAIL at the first reproducible mismatch, PASS only after all n_planned without one.

    Deterministic, no statistics: a mismatch the caller has confirmed reproducible settles FAIL at once
    (later observations are not read); PASS is never settled early, because the next observation could
    be the mismatch. More observations than n_planned is a ValueError.
    """
    if n_planned < 1:
        raise ValueError("n_planned must be >= 1")
    n = 0
    for mismatch in mismatches:
        if n == n_planned:
            raise ValueError(f"more than n_planned={n_planned} observations")
        n += 1
        if mismatch:
            return AllEqualResult("fail", n, n_planned, n - 1)
    return AllEqualResult("pass" if n == n_planned else "continue", n, n_planned, None)


def _alpha_and_tuning(alpha: float, tuning: float, name: str) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    if not (tuning > 0.0 and math.isfinite(tuning)):
        raise ValueError(f"{name} must be finite and > 0")


def _values(values: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"values must be a non-empty finite 1-D array, got shape {arr.shape}")
    return arr


def _running_means(arr: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    t = np.arange(1, arr.size + 1, dtype=np.float64)
    return t, np.cumsum(arr) / t


def asymptotic_rho2(t_star: float, *, alpha: float) -> float:
    """Waudby-Smith et al.'s rho2 making the asymptotic CS (approximately) tightest at t = t_star."""
    if t_star < 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError("need t_star >= 1 and alpha in (0, 1)")
    c = -2.0 * math.log(alpha)
    return (c + math.log(1.0 + c)) / t_star


def asymptotic_cs(
    values: ArrayLike, *, rho2: float, alpha: float = 0.05, min_n: int = 10
) -> ConfidenceSequence:
    """The Gaussian-mixture asymptotic CS with the running sample sd; infinite bounds before min_n."""
    _alpha_and_tuning(alpha, rho2, "rho2")
    if min_n < 2:
        raise ValueError("min_n must be >= 2 (a sample sd needs two values)")
    arr = _values(values)
    t, means = _running_means(arr)
    # running sd (ddof = 1); shifting by the first value avoids the cancellation of sum x^2 - t mean^2
    shifted = arr - arr[0]
    squares = np.cumsum(shifted**2) - t * (means - arr[0]) ** 2
    sd = np.sqrt(np.maximum(squares, 0.0) / np.maximum(t - 1.0, 1.0))
    unit = np.sqrt(2.0 * (t * rho2 + 1.0) / (t**2 * rho2) * np.log(np.sqrt(t * rho2 + 1.0) / alpha))
    radius = np.where(t >= min_n, sd * unit, np.inf)
    return ConfidenceSequence(
        means=tuple(means.tolist()),
        lows=tuple((means - radius).tolist()),
        highs=tuple((means + radius).tolist()),
        method="asymptotic",
        alpha=alpha,
        tuning=rho2,
    )


def cs_decision(low: float, high: float, *, n: int, threshold_pct: float) -> CsDecision:
    """Verdict for a log-ratio interval [low, high] and a band of +- threshold_pct % (module docstring)."""
    if not 0.0 < threshold_pct < 100.0:
        raise ValueError("threshold_pct must be in (0, 100)")
    if not low <= high:
        raise ValueError(f"need low <= high, got {low}, {high}")
    band_low, band_high = math.log1p(-threshold_pct / 100.0), math.log1p(threshold_pct / 100.0)
    state: CsState = "continue"
    if band_low <= low and high <= band_high:
        state = "within"
    elif low > band_high or high < band_low:
        state = "outside"
    return CsDecision(state, n, 100.0 * math.expm1(low), 100.0 * math.expm1(high), threshold_pct)


def first_decision(cs: ConfidenceSequence, *, threshold_pct: float) -> CsDecision:
    """The verdict at the first step where it is settled, else "continue" at the last step."""
    decision = cs_decision(cs.lows[0], cs.highs[0], n=1, threshold_pct=threshold_pct)
    for k in range(1, len(cs.lows)):
        if decision.state != "continue":
            break
        decision = cs_decision(cs.lows[k], cs.highs[k], n=k + 1, threshold_pct=threshold_pct)
    return decision
