"""Sequential decisions that may look after every input: an SPRT for a mismatch rate, the N/N rule, and
confidence sequences for a mean timing change.

Wald's SPRT (Wald 1945, "Sequential tests of statistical hypotheses", Ann. Math. Statist. 16). Observations
are Bernoulli mismatches (True = mismatch), H0: p <= p0 against H1: p >= p1 (p0 < p1). After n
observations with k mismatches the log-likelihood ratio of the boundary values is

    LLR_n = k log(p1 / p0) + (n - k) log((1 - p1) / (1 - p0)),

updated by one of the two terms per observation. Stop and accept H1 when LLR_n >= log((1 - beta) / alpha),
accept H0 when LLR_n <= log(beta / (1 - alpha)), otherwise continue. Wald's thresholds are approximations:
the achieved error rates satisfy alpha' <= alpha / (1 - beta), beta' <= beta / (1 - alpha) and
alpha' + beta' <= alpha + beta (the overshoot of the boundary makes them conservative in practice). Under
H0 or H1 the test stops with probability 1.

The N/N rule (`all_equal_rule`): for lbeval's "must be N/N equal" rules there are no statistics. One
reproducible mismatch (a mismatch the caller has confirmed by rerunning, so not a transient) settles FAIL
at once; PASS is settled only when all n_planned observations have been seen without one, since the next
observation could always be the mismatch.

Confidence sequences for a mean (the timing change in log-ratio units, one value per input). A
(1 - alpha) confidence sequence (CS) is a sequence of intervals C_t with P(exists t: mu not in C_t) <=
alpha: it stays valid under continuous monitoring and optional stopping, unlike a fixed-n interval
recomputed after every input.

`normal_mixture_cs` (nonasymptotic). Assumption: the centred observations X_i - mu are conditionally
sigma-sub-Gaussian given the past, E[exp(lambda (X_i - mu)) | past] <= exp(lambda^2 sigma^2 / 2) for all
real lambda (i.i.d. normal with standard deviation <= sigma qualifies; so does anything bounded in an
interval of width 2 sigma, Hoeffding). With S_t = sum_{i<=t} (X_i - mu) and V_t = t sigma^2,
exp(lambda S_t - lambda^2 V_t / 2) is a nonnegative supermartingale for each lambda; mixing lambda over
N(0, 1 / rho) gives the supermartingale sqrt(rho / (V_t + rho)) exp(S_t^2 / (2 (V_t + rho))) (Robbins
1970; Howard, Ramdas, McAuliffe, Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence
sequences", Ann. Statist. 49(2), the two-sided normal-mixture boundary). Ville's inequality bounds by alpha
the probability that it ever reaches 1 / alpha, which gives the CS mean_t +- r_t with

    r_t = sqrt( (2 (t sigma^2 + rho) / t^2) * log( sqrt((t sigma^2 + rho) / rho) / alpha ) ).

rho > 0 is a tuning parameter in variance units: the CS is tightest around t* when rho =
t* sigma^2 / (-2 log alpha + log(1 - 2 log alpha)) (`rho_for_horizon`). If sigma is smaller than the
data's true scale the guarantee is void.

`asymptotic_cs` (asymptotic; Waudby-Smith, Arbour, Sinha, Kennedy, Ramdas 2021, "Time-uniform central
limit theory and asymptotic confidence sequences", arXiv:2103.06476, the Gaussian-mixture asymptotic CS).
The same boundary with sigma replaced by the running sample standard deviation sd_t (ddof = 1) and the
tuning written as rho2 (rho in the form above = sd_t^2 / rho2):

    r_t = sd_t * sqrt( (2 (t rho2 + 1) / (t^2 rho2)) * log( sqrt(t rho2 + 1) / alpha ) ).

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
(exactly under the normal mixture's assumptions; approximately for `asymptotic_cs`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

SprtState = Literal["continue", "accept_h0", "accept_h1"]
RuleState = Literal["continue", "pass", "fail"]
CsState = Literal["continue", "within", "outside"]
CsMethod = Literal["normal_mixture", "asymptotic"]


@dataclass(frozen=True)
class SprtDesign:
    """H0: p <= p0 vs H1: p >= p1 for a mismatch rate, with the target error rates alpha and beta."""

    p0: float
    p1: float
    alpha: float
    beta: float

    def __post_init__(self) -> None:
        if not 0.0 < self.p0 < self.p1 < 1.0:
            raise ValueError(f"need 0 < p0 < p1 < 1, got p0={self.p0}, p1={self.p1}")
        if not (0.0 < self.alpha < 1.0 and 0.0 < self.beta < 1.0 and self.alpha + self.beta < 1.0):
            raise ValueError(
                f"need alpha, beta in (0, 1) with alpha + beta < 1, got {self.alpha}, {self.beta}"
            )


@dataclass(frozen=True)
class SprtThresholds:
    lower: float  # log(beta / (1 - alpha)): at or below, accept H0
    upper: float  # log((1 - beta) / alpha): at or above, accept H1


@dataclass(frozen=True)
class SprtResult:
    """State of the test after n observations (k of them mismatches) and the LLR there."""

    state: SprtState
    llr: float
    n: int
    mismatches: int


@dataclass(frozen=True)
class RuleResult:
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
    tuning: float  # rho (normal_mixture) or rho2 (asymptotic), see the module docstring
    sigma: float | None  # the sub-Gaussian scale (normal_mixture); None for asymptotic


@dataclass(frozen=True)
class CsDecision:
    """Gate verdict at step n for a band of +- threshold_pct %, with the interval there in percent."""

    state: CsState
    n: int
    low_pct: float
    high_pct: float
    threshold_pct: float


def sprt_thresholds(design: SprtDesign) -> SprtThresholds:
    return SprtThresholds(
        lower=math.log(design.beta / (1.0 - design.alpha)),
        upper=math.log((1.0 - design.beta) / design.alpha),
    )


def sprt_step(previous: SprtResult, mismatch: bool, design: SprtDesign) -> SprtResult:
    """One observation; a decided test is returned unchanged (the test has stopped)."""
    if previous.state != "continue":
        return previous
    if mismatch:
        llr = previous.llr + math.log(design.p1 / design.p0)
    else:
        llr = previous.llr + math.log((1.0 - design.p1) / (1.0 - design.p0))
    bounds = sprt_thresholds(design)
    state: SprtState = "continue"
    if llr >= bounds.upper:
        state = "accept_h1"
    elif llr <= bounds.lower:
        state = "accept_h0"
    return SprtResult(state, llr, previous.n + 1, previous.mismatches + int(mismatch))


def sprt(observations: Iterable[bool], design: SprtDesign) -> SprtResult:
    """Run the SPRT over observations (True = mismatch), stopping at the first crossing."""
    result = SprtResult("continue", 0.0, 0, 0)
    for mismatch in observations:
        result = sprt_step(result, mismatch, design)
        if result.state != "continue":
            break
    return result


def all_equal_rule(mismatches: Iterable[bool], *, n_planned: int) -> RuleResult:
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
            return RuleResult("fail", n, n_planned, n - 1)
    return RuleResult("pass" if n == n_planned else "continue", n, n_planned, None)


def _alpha_and_tuning(alpha: float, tuning: float, name: str) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    if not (tuning > 0.0 and math.isfinite(tuning)):
        raise ValueError(f"{name} must be finite and > 0")


def normal_mixture_radius(t: ArrayLike, *, sigma: float, rho: float, alpha: float) -> NDArray[np.float64]:
    """sqrt((2 (t sigma^2 + rho) / t^2) log(sqrt((t sigma^2 + rho) / rho) / alpha)) for each t >= 1."""
    _alpha_and_tuning(alpha, rho, "rho")
    if not (sigma > 0.0 and math.isfinite(sigma)):
        raise ValueError("sigma must be finite and > 0")
    steps = np.asarray(t, dtype=np.float64)
    if np.any(steps < 1.0):
        raise ValueError("t must be >= 1")
    v = steps * sigma**2 + rho
    return np.asarray(np.sqrt(2.0 * v / steps**2 * np.log(np.sqrt(v / rho) / alpha)), dtype=np.float64)


def rho_for_horizon(t_star: float, *, sigma: float, alpha: float) -> float:
    """The normal-mixture rho that makes the CS (approximately) tightest at t = t_star."""
    if t_star < 1.0 or sigma <= 0.0 or not 0.0 < alpha < 1.0:
        raise ValueError("need t_star >= 1, sigma > 0, alpha in (0, 1)")
    c = -2.0 * math.log(alpha)
    return t_star * sigma**2 / (c + math.log(1.0 + c))


def _values(values: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"values must be a non-empty finite 1-D array, got shape {arr.shape}")
    return arr


def _running_means(arr: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    t = np.arange(1, arr.size + 1, dtype=np.float64)
    return t, np.cumsum(arr) / t


def normal_mixture_cs(
    values: ArrayLike, *, sigma: float, rho: float, alpha: float = 0.05
) -> ConfidenceSequence:
    """The nonasymptotic normal-mixture CS for sigma-sub-Gaussian values, after each step."""
    arr = _values(values)
    t, means = _running_means(arr)
    radius = normal_mixture_radius(t, sigma=sigma, rho=rho, alpha=alpha)
    return ConfidenceSequence(
        means=tuple(means.tolist()),
        lows=tuple((means - radius).tolist()),
        highs=tuple((means + radius).tolist()),
        method="normal_mixture",
        alpha=alpha,
        tuning=rho,
        sigma=sigma,
    )


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
        sigma=None,
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
