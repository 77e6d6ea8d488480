"""Paired-in-time timing of two runs written by one `lbeval ab` session (the pairing: eval/records/ab_pairs.py).

For each timing measure (eval/analyze/timing.TIMING_MEASURES) and each timing pair that was adjacent in time
(both sides complete in the same pair, not a resume's re-run of one side), the counted record of each side
(`ok_record`) must be one of that pair's records; its value enters one pair (a, b). From these pairs:

- paired: scorers.paired_timing.paired_timing_change (per-pair log ratios, cluster bootstrap over inputs)
- paired median: the same with statistic="median" (the typical pair's change, robust to a few burst-hit pairs)
- gated: scorers.paired_timing.gated_timing_change, the 20 % trimmed mean of the per-input mean log ratios with
  Yuen's t interval at 97.5 %: the figure compare's timing_changes hold for an interleaved session and the gate reads,
  chosen by the coverage experiment of bench/bench_coverage.py (docs/timing.md)
- sequential-style: scorers.paired_timing.unpaired_timing_change (median(b)/median(a) - 1, same inputs)
- drift: scorers.paired_timing.drift_check over the pair's start time in the session (seconds since the first
  pair), with a plain-words reading.

Pairs left out (incomplete, re-run, a side's value missing) are counted, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eval.analyze.score import ScoredRun
from eval.analyze.timing import TIMING_MEASURES, measure_ms
from eval.records.ab_pairs import PairRecord, last_pairs, read_pairs
from eval.records.final import ok_record
from eval.records.vocabulary import UNIT_TIMING
from eval.run.adaptive import AdaptiveRecord, read_adaptive
from scorers.paired_timing import (
    DriftCheck,
    TimingChange,
    Trend,
    UnpairedTimingChange,
    drift_check,
    gated_timing_change,
    paired_timing_change,
    unpaired_timing_change,
)

MIN_DRIFT_PAIRS = 4  # fewer pairs: no drift check


@dataclass(frozen=True)
class PairedValues:
    input_ids: list[str]
    a: list[float]
    b: list[float]
    times_s: list[float]
    left_out: int  # timing pairs of the session not counted for this measure
    blocks: list[str] = field(default_factory=list)  # each pair's AB/BA block (randomization_blocks)


@dataclass(frozen=True)
class PairedMeasure:
    measure: str
    n_pairs: int
    left_out: int
    paired: TimingChange | None
    sequential_style: UnpairedTimingChange | None
    drift: DriftCheck | None
    reading: str  # the drift check in plain words ("" without one)
    paired_median: TimingChange | None = None  # exp(median log(b/a)) - 1: the typical pair, robust to bursts
    gated: TimingChange | None = None  # trimmed mean of the per-input means, Yuen's t: what the gate reads

    @property
    def drifting(self) -> bool:
        d = self.drift
        return d is not None and "drift" in (d.paired.verdict, d.a.verdict, d.b.verdict)


@dataclass(frozen=True)
class PairedTiming:
    ab_id: str
    pairs: int  # pairs in the session (the last line per unit)
    adjacent: int
    incomplete: int
    rerun: int
    measures: dict[str, PairedMeasure] = field(default_factory=dict)
    adaptive: AdaptiveRecord | None = None  # --timing-until: how many repetitions and why they stopped

    @property
    def drifting(self) -> list[str]:
        return [m for m, pm in self.measures.items() if pm.drifting]


def session_pairs(base: ScoredRun, variant: ScoredRun) -> list[PairRecord] | None:
    """The session's pairs when both runs carry the same pairing (same lines, one more in one file after a kill
    between the two appends), else None; side a
    is the base run (the pairs are turned round when the session's side a is the variant)."""
    pa, pb = read_pairs(base.loaded.run_dir), read_pairs(variant.loaded.run_dir)
    longer, shorter = (pa, pb) if len(pa) >= len(pb) else (pb, pa)
    # a line is appended to side a's file, then to side b's: a kill in between leaves one line more in one file
    if not shorter or longer[: len(shorter)] != shorter or len(longer) - len(shorter) > 1:
        return None
    pairs = list(last_pairs(longer).values())
    names = tuple(f"{r.loaded.manifest.variant}/{r.loaded.manifest.run_id}" for r in (base, variant))
    if pairs[0].runs == (names[1], names[0]):  # compared the other way round: the variant was side a
        pairs = [p.swapped() for p in pairs]
    return pairs


def randomization_blocks(pairs: list[PairRecord]) -> dict[tuple[str, str, str, int], str]:
    """Each pair's AB/BA randomization block, "<dataset>/<example_id>#k": eval/run/ab.pair_orders draws an
    input's pairs 2k and 2k + 1 as one block (AB/BA at random, then the opposite), counting the input's units in
    plan order, which is their first appearance in the pairing file (an input's units are sent in plan order;
    a re-run keeps its unit's place). Randomization inference flips whole blocks."""
    seen: dict[str, int] = {}
    out: dict[tuple[str, str, str, int], str] = {}
    for p in pairs:
        if p.unit in out:
            continue
        key = f"{p.dataset}/{p.example_id}"
        j = seen.get(key, 0)
        seen[key] = j + 1
        out[p.unit] = f"{key}#{j // 2}"
    return out


def paired_values(base: ScoredRun, variant: ScoredRun, pairs: list[PairRecord], measure: str) -> PairedValues:
    pass_name = TIMING_MEASURES[measure]
    timing = [p for p in pairs if p.kind == UNIT_TIMING]
    block_of = randomization_blocks(pairs)
    blocks: list[str] = []
    t0 = min((s for p in timing for s in (p.a.start, p.b.start) if s is not None), default=0.0)
    ids: list[str] = []
    a: list[float] = []
    b: list[float] = []
    times: list[float] = []
    for p in timing:
        key = (p.dataset, p.example_id)
        ra = ok_record(base.selection, key, pass_name, p.repetition)
        rb = ok_record(variant.selection, key, pass_name, p.repetition)
        if not p.adjacent or ra is None or rb is None or ra.seq not in p.a.seqs or rb.seq not in p.b.seqs:
            continue
        va, vb = measure_ms(ra, measure), measure_ms(rb, measure)
        if va is None or vb is None or va <= 0 or vb <= 0:
            continue
        starts = [s for s in (p.a.start, p.b.start) if s is not None]
        ids.append(f"{p.dataset}/{p.example_id}")
        a.append(va)
        b.append(vb)
        times.append(min(starts) - t0 if starts else 0.0)
        blocks.append(block_of[p.unit])
    return PairedValues(ids, a, b, times, len(timing) - len(ids), blocks)


def _trend_words(who: str, t: Trend) -> str:
    word = "drifts" if t.verdict == "drift" else "no drift"
    return f"{who} {word} ({t.pct_over_span:+.1f} % over {t.span_s / 60:.1f} min, p={t.test.p_value:.3g}, n={t.n})"


def drift_reading(d: DriftCheck) -> str:
    parts = [_trend_words("paired ratio", d.paired), _trend_words("base", d.a), _trend_words("variant", d.b)]
    if d.paired.verdict == "drift":
        verdict = "the change itself moved during the session: the figure depends on when it was measured"
    elif "drift" in (d.a.verdict, d.b.verdict):
        verdict = "the machine's speed drifted during the session; the pairing cancels it up to the pairing"
    else:
        verdict = "no drift seen"
    return f"{'; '.join(parts)}: {verdict}"


def paired_measure(values: PairedValues, measure: str, seed: int, resamples: int) -> PairedMeasure:
    n = len(values.a)
    if n < 2 or len(set(values.input_ids)) < 2:
        return PairedMeasure(measure, n, values.left_out, None, None, None, "")
    paired = paired_timing_change(values.input_ids, values.a, values.b, seed=seed, n_resamples=resamples)
    median = paired_timing_change(
        values.input_ids, values.a, values.b, seed=seed, statistic="median", n_resamples=resamples
    )
    seq = unpaired_timing_change(
        values.input_ids, values.a, values.input_ids, values.b, seed=seed, n_resamples=resamples
    )
    gated = gated_timing_change(values.input_ids, values.a, values.b)
    drift = drift_check(values.times_s, values.a, values.b) if n >= MIN_DRIFT_PAIRS else None
    reading = drift_reading(drift) if drift is not None else ""
    return PairedMeasure(measure, n, values.left_out, paired, seq, drift, reading, median, gated)


def interleaved_timing(
    base: ScoredRun, variant: ScoredRun, seed: int, resamples: int = 10_000
) -> PairedTiming | None:
    """None unless both runs come from one `lbeval ab` session (the same pairing in both run folders)."""
    pairs = session_pairs(base, variant)
    if pairs is None:
        return None
    measures = {
        m: paired_measure(paired_values(base, variant, pairs, m), m, seed, resamples) for m in TIMING_MEASURES
    }
    return PairedTiming(
        ab_id=pairs[0].ab_id,
        pairs=len(pairs),
        adjacent=sum(p.adjacent for p in pairs),
        incomplete=sum(not p.complete for p in pairs),
        rerun=sum(p.rerun is not None for p in pairs),
        measures=measures,
        adaptive=read_adaptive(base.loaded.run_dir),
    )
