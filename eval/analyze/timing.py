"""Timing of one run: per input, warm and cold prefill (server) and TTFT (client) over the timing repetitions."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, ok_record, slot
from eval.records.manifest_parts import RunSettings
from eval.records.server_figures import own_prefill_s
from eval.records.types import RequestRecord

# two-sided 95% Student t quantiles by degrees of freedom (per-input CIs over a few repetitions); above 12
# degrees of freedom the Cornish-Fisher expansion is within 0.0015 of the published table values
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
_T975.update({10: 2.228, 11: 2.201, 12: 2.179})
_Z975 = 1.959964


def t975(df: int) -> float:
    if df in _T975:
        return _T975[df]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Spread:
    """Mean over repetitions, with sample SD, range and a 95% Student-t interval of the mean."""

    n: int
    mean: float
    sd: float | None
    min: float
    max: float
    ci_low: float | None
    ci_high: float | None


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Spread(1, mean, None, values[0], values[0], None, None)
    sd = statistics.stdev(values)
    half = t975(len(values) - 1) * sd / math.sqrt(len(values))
    return Spread(len(values), mean, sd, min(values), max(values), mean - half, mean + half)


TIMING_MEASURES = {  # measure name -> the pass it is read from (see measure_ms)
    "warm_prefill_ms": "timing_warm",
    "cold_prefill_ms": "timing_cold",
    "warm_ttft_ms": "timing_warm",
    "cold_ttft_ms": "timing_cold",
}


def server_figure(measure: str) -> bool:
    """The measure is read from the server's /metrics deltas (not from the client's clock)."""
    return measure.endswith("prefill_ms")


def measure_ms(rec: RequestRecord, measure: str) -> float | None:
    """The measure of one record in ms; None when missing, or when it is a server figure that is not the
    request's own (`server_foreign`, eval/records/server_figures.py): no timing statistic reads those."""
    if server_figure(measure):
        value = own_prefill_s(rec)
    else:
        value = rec.timings.first_token_s if rec.timings is not None else None
    return None if value is None or not math.isfinite(value) else 1000.0 * value


def timing_values(sel: Selection, key: Key, measure: str, reps: int) -> list[float]:
    """One value per ok repetition of the measure's pass (None-valued samples are left out)."""
    out = []
    for rep in range(reps):
        rec = ok_record(sel, key, TIMING_MEASURES[measure], rep)
        value = measure_ms(rec, measure) if rec is not None else None
        if value is not None:
            out.append(value)
    return out


@dataclass(frozen=True)
class InputTiming:
    dataset: str
    example_id: str
    measures: dict[str, Spread | None]


@dataclass(frozen=True)
class Timing:
    reps: int
    concurrency: int | None
    per_input: list[InputTiming]
    means: dict[str, float | None]  # mean over inputs of the per-input means
    n_inputs: dict[str, int]  # inputs with at least one value, per measure
    valid: bool
    flags: list[str]
    foreign: int = 0  # ok timing records whose server figures are not their own (left out of every statistic)
    with_figures: int = 0  # ok timing records with server figures, foreign or not (the denominator)

    @property
    def foreign_fraction(self) -> float | None:
        return self.foreign / self.with_figures if self.with_figures else None


@dataclass(frozen=True)
class ForeignCount:
    foreign: int
    of: int  # ok timing records with server figures


def foreign_figures(keys: Sequence[Key], sel: Selection, reps: int) -> ForeignCount:
    """Of the ok timing records with server figures, how many carry figures that are not their own."""
    recs = [
        rec
        for k in keys
        for p in ("timing_cold", "timing_warm")
        for r in range(reps)
        if (rec := ok_record(sel, k, p, r)) is not None and rec.server_metrics
    ]
    return ForeignCount(sum(rec.server_foreign is not None for rec in recs), len(recs))


def timing(keys: Sequence[Key], sel: Selection, settings: RunSettings) -> Timing:
    reps = settings.timing_reps
    concurrency = settings.concurrency
    per_input = [
        InputTiming(k[0], k[1], {m: spread(timing_values(sel, k, m, reps)) for m in TIMING_MEASURES})
        for k in keys
    ]
    means: dict[str, float | None] = {}
    n_inputs: dict[str, int] = {}
    for m in TIMING_MEASURES:
        vals = [s.mean for t in per_input if (s := t.measures[m]) is not None]
        means[m] = statistics.fmean(vals) if vals else None
        n_inputs[m] = len(vals)
    flags = timing_flags(keys, sel, reps, concurrency, n_inputs)
    foreign = foreign_figures(keys, sel, reps)
    if foreign.foreign:
        flags.append(
            f"foreign: {foreign.foreign} of {foreign.of} server figures were not their request's own (another "
            "request counted in the window), left out"
        )
    valid = reps > 0 and concurrency == 1 and not any(f.startswith("invalid:") for f in flags)
    return Timing(reps, concurrency, per_input, means, n_inputs, valid, flags, foreign.foreign, foreign.of)


def timing_flags(
    keys: Sequence[Key], sel: Selection, reps: int, concurrency: Any, n_inputs: Mapping[str, int]
) -> list[str]:
    flags = []
    if reps == 0:
        flags.append("invalid: no timing passes in this run")
    if concurrency != 1:
        flags.append(f"invalid: timing needs concurrency 1, the run used {concurrency}")
    bad = Counter(
        rec.status
        for k in keys
        for p in ("timing_cold", "timing_warm")
        for r in range(reps)
        if (rec := sel.final.get(slot(k, p, r))) is not None and rec.status != "ok"
    )
    if bad.get("invalid"):
        flags.append(f"{bad['invalid']} timing sample(s) invalid (cache state not as required), left out")
    if bad.get("error"):
        flags.append(f"{bad['error']} timing sample(s) errored, left out")
    if reps and not n_inputs["warm_prefill_ms"]:
        flags.append("server prefill time unavailable (no /metrics histogram deltas)")
    return flags
