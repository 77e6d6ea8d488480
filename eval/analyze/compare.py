"""Two scored runs -> their comparison, as numbers (eval/report turns it into tables).

The comparison refuses runs that asked different things (inputs manifest hash, model, sampling
settings), naming each difference, unless `allow_mismatch` (then the report carries a warning).

What it holds: per-dataset cold outputs identical across the two variants (k/N), the paired bootstrap CI of
the warm-score change per dataset, base vs variant agreement (cold/cold, warm/warm, timing first tokens), the
relative change of each timing measure with a paired bootstrap 95% CI over inputs, whether the runs were
sequential or overlapping, and the diverging pairs for the drill-down.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from eval.analyze.aa_floor import AaFloor
from eval.analyze.ab_timing import PairedTiming, interleaved_timing, session_pairs
from eval.analyze.agreement import Divergence, Pair, PairStats, collect_pairs, pair_stats
from eval.analyze.memo import ScoreMemo, pair_result
from eval.analyze.replica_pairs import ReplicaPairs, replica_pairs
from eval.analyze.score import ScoredRun
from eval.analyze.timing import TIMING_MEASURES, timing_values
from eval.errors import LbevalError
from eval.records.final import ExampleKey as Key
from eval.records.final import ok_record
from eval.records.run_folder import RunManifest
from eval.records.types import RequestRecord
from scorers import stats

BOOTSTRAP_SEED = 20260909
BOOTSTRAP_RESAMPLES = 10_000
# the manifest's settings (RunSettings fields) that change what the model is asked or how it samples
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "seed",
    "top_logprobs",
    "max_tokens_override",
    "chat_template_kwargs",
)


class MismatchError(LbevalError):
    """The two runs did not ask the same thing; comparing them would mislead."""

    exit_code = 2

    def __init__(self, mismatches: Sequence[Mismatch]) -> None:
        listed = "; ".join(m.describe() for m in mismatches)
        super().__init__(
            f"the runs differ in {listed}; refusing to compare (pass --allow-mismatch to compare anyway)"
        )
        self.mismatches = list(mismatches)


@dataclass(frozen=True)
class Mismatch:
    field: str
    base: str
    variant: str

    def describe(self) -> str:
        return f"{self.field} (base {self.base}, variant {self.variant})"


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] + "…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


def find_mismatches(base: RunManifest, variant: RunManifest) -> list[Mismatch]:
    found = []
    if base.inputs_sha256 != variant.inputs_sha256:
        found.append(Mismatch("inputs_sha256", _short(base.inputs_sha256), _short(variant.inputs_sha256)))
    if base.model != variant.model:
        found.append(Mismatch("model", base.model, variant.model))
    for key in SAMPLING_KEYS:
        a, b = getattr(base.settings, key), getattr(variant.settings, key)
        if a != b:
            found.append(Mismatch(f"settings.{key}", repr(a), repr(b)))
    return found


# ---------------------------------------------------------------- cross-variant data


@dataclass(frozen=True)
class CrossCold:
    """Base cold vs variant cold outputs of the same input, per dataset."""

    dataset: str
    n_total: int
    n_pairs: int
    text_equal: int
    pairs: list[Pair]


def cross_cold(base: ScoredRun, variant: ScoredRun, memo: ScoreMemo | None = None) -> list[CrossCold]:
    by_ds: dict[str, list[Key]] = {}
    for key in base.keys:
        by_ds.setdefault(key[0], []).append(key)
    out = []
    for ds, keys in by_ds.items():
        pairs = []
        for key in keys:
            a, b = ok_record(base.selection, key, "cold"), ok_record(variant.selection, key, "cold")
            if a is not None and b is not None:
                pairs.append(Pair(key, 0, a, b, pair_result(memo, a, b)))
        out.append(CrossCold(ds, len(keys), len(pairs), sum(p.result.text_equal for p in pairs), pairs))
    return out


# cross-variant agreement: name -> (passes paired base vs variant, repetitions are the timing reps)
CROSS_KINDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "cold": (("cold",), False),
    "warm": (("warm",), False),
    "timing_first_token": (("timing_cold", "timing_warm"), True),
}


def cross_agreement(
    base: ScoredRun, variant: ScoredRun, memo: ScoreMemo | None = None
) -> dict[str, PairStats | None]:
    """Base pass p rep r vs variant pass p rep r, per input of the base, with `pair_stats` counting.

    N counts every expected pair (inputs x repetitions x passes; the repetitions are the larger of the two
    runs' timing reps): errored, invalid and missing samples of either run are in N, never dropped.
    None when a pass is absent from either run.
    """
    out: dict[str, PairStats | None] = {}
    for name, (passes, timed) in CROSS_KINDS.items():
        if any(p not in run.scores.run.passes for p in passes for run in (base, variant)):
            out[name] = None
            continue
        reps = max(base.scores.timing.reps, variant.scores.timing.reps) if timed else 1
        pairs: list[Pair] = []
        counts: Counter[str] = Counter()
        for p in passes:
            found, found_counts = collect_pairs(
                base.keys, base.selection, p, p, reps, variant.selection, memo
            )
            pairs += found
            counts.update(found_counts)
        label = "+".join(passes)
        out[name] = pair_stats(f"base {label}", f"variant {label}", pairs, counts)
    return out


# a paired bootstrap result in display units (percent for relative changes, points for scores)
Change = stats.BootstrapResult


def _change(result: stats.BootstrapResult, scale: float) -> Change:
    return replace(result, estimate=result.estimate * scale, low=result.low * scale, high=result.high * scale)


def warm_score_change(
    base: ScoredRun, variant: ScoredRun, dataset: str, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> Change | None:
    """Variant minus base warm score, in points, paired by example (examples scored in both)."""
    a_scores, b_scores = base.example_scores.get("warm", {}), variant.example_scores.get("warm", {})
    keys = [k for k in base.keys if k[0] == dataset and k in a_scores and k in b_scores]
    if not keys:
        return None
    a = np.array([100.0 * a_scores[k].official for k in keys])
    b = np.array([100.0 * b_scores[k].official for k in keys])
    result = stats.paired_bootstrap_difference(a, b, seed=seed, n_resamples=resamples)
    return _change(result, 1.0)


def paired_timing(base: ScoredRun, variant: ScoredRun, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-input repetitions [n_inputs, reps] of both runs (NaN for a missing repetition).

    Only inputs with at least one value in both runs are kept: row i of each array is the same input.
    """
    rb, rv = base.scores.timing.reps, variant.scores.timing.reps
    rows_a: list[list[float]] = []
    rows_b: list[list[float]] = []
    for key in base.keys:
        a = timing_values(base.selection, key, measure, rb)
        b = timing_values(variant.selection, key, measure, rv)
        if a and b:
            rows_a.append(a + [math.nan] * (rb - len(a)))
            rows_b.append(b + [math.nan] * (rv - len(b)))
    return np.array(rows_a, dtype=float).reshape(len(rows_a), rb), np.array(rows_b, dtype=float).reshape(
        len(rows_b), rv
    )


def timing_change(
    base: ScoredRun, variant: ScoredRun, measure: str, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> Change | None:
    a, b = paired_timing(base, variant, measure)
    if a.shape[0] < 2 or float(np.nanmean(a)) <= 0.0:
        return None
    result = stats.paired_bootstrap_relative_change(a, b, seed=seed, n_resamples=resamples)
    return _change(result, 100.0)


# ---------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Comparison:
    base: ScoredRun
    variant: ScoredRun
    mismatches: list[Mismatch]
    allow_mismatch: bool
    seed: int
    cross: list[CrossCold]
    warm_changes: dict[str, Change | None]  # dataset -> warm score change (points)
    timing_changes: dict[str, Change | None]  # measure -> relative change (%)
    execution: str  # "sequential" | "overlapping" | "unknown" | "interleaved" (lbeval ab)
    warnings: list[str] = field(default_factory=list)
    cross_agreement: dict[str, PairStats | None] = field(default_factory=dict)  # see CROSS_KINDS
    start_gap_s: float | None = None  # seconds between the two runs' starts (None: a start time unknown)
    # both runs from one `lbeval ab` session (execution "interleaved"): timing_changes are then the paired-in-time
    # figures (eval/analyze/ab_timing.py) and this holds them with the sequential-style figure and the drift check
    paired: PairedTiming | None = None
    # `--aa-floor RUN_A RUN_B`: the A/A floor of an `lbeval ab X X` session (eval/analyze/aa_floor.py), set by
    # the command layer; the report shows it beside each timing change and the timing rule may use it
    aa_floor: AaFloor | None = None
    # one lbeval ab session on N >= 2 replicas per side: A's replica i against B's replica i, per replica pair
    # (eval/analyze/replica_pairs.py; in an A/A session the layout's replica-pair floor)
    replica_pairs: ReplicaPairs | None = None

    @property
    def name(self) -> str:
        return f"{self.base.scores.run.variant}__{self.variant.scores.run.variant}"


def execution_order(base: ScoredRun, variant: ScoredRun) -> str:
    a, b = base.scores.run, variant.scores.run
    if not (a.started_at and a.ended_at and b.started_at and b.ended_at):
        return "unknown"
    overlap = a.started_at < b.ended_at and b.started_at < a.ended_at
    return "overlapping" if overlap else "sequential"


def start_gap_seconds(base: ScoredRun, variant: ScoredRun) -> float | None:
    """Seconds between the starts of the two runs (the time between an input's base and variant timings)."""
    try:
        a, b = (datetime.fromisoformat(str(r.scores.run.started_at)) for r in (base, variant))
        return abs((b - a).total_seconds())
    except (TypeError, ValueError):  # a start time missing, unparsable, or one naive and one aware
        return None


def comparison_warnings(
    base: ScoredRun, variant: ScoredRun, mismatches: Sequence[Mismatch], execution: str
) -> list[str]:
    warnings = [f"compared despite a mismatch in {m.describe()} (--allow-mismatch)" for m in mismatches]
    for side, run in (("base", base), ("variant", variant)):
        warnings += [f"{side} run {run.scores.run.run_id}: {w}" for w in run.scores.run.warnings]
        warnings += [f"{side} timing: {f}" for f in run.scores.timing.flags]
    if execution == "overlapping":
        warnings.append("the two runs overlapped in time: their timings disturbed each other")
    return warnings


def paired_warnings(paired: PairedTiming) -> list[str]:
    """The interleaved session's left-out pairs and drift, in words."""
    out = []
    if paired.incomplete:
        out.append(
            f"interleaved A/B: {paired.incomplete} of {paired.pairs} pairs incomplete (left out of the paired timing)"
        )
    if paired.rerun:
        out.append(
            f"interleaved A/B: {paired.rerun} pair(s) re-run on one side only after a resume (not adjacent, left out)"
        )
    for m in paired.drifting:
        out.append(f"interleaved A/B: timing drift in {m}: {paired.measures[m].reading}")
    return out


def _paired_change(paired: PairedTiming, measure: str) -> Change | None:
    ch = paired.measures[measure].gated  # the figure the coverage experiment supports (docs/timing.md)
    if ch is None:
        return None
    return Change(ch.estimate, ch.ci_low, ch.ci_high, ch.n_inputs, ch.resamples, ch.seed, ch.confidence)


def compare(
    base: ScoredRun,
    variant: ScoredRun,
    *,
    allow_mismatch: bool = False,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
    memo: ScoreMemo | None = None,
) -> Comparison:
    """Build the comparison; raises MismatchError when the runs asked different things. `resamples`: of every
    bootstrap interval (the stop check, which reads none of them, asks for 1: eval/gate/settle.py); `memo`:
    the cross-run pair results kept between looks (eval/analyze/memo.py)."""
    mismatches = find_mismatches(base.loaded.manifest, variant.loaded.manifest)
    if mismatches and not allow_mismatch:
        raise MismatchError(mismatches)
    execution = execution_order(base, variant)
    paired = interleaved_timing(base, variant, seed, resamples)
    timing_changes = {m: timing_change(base, variant, m, seed, resamples) for m in TIMING_MEASURES}
    warnings = comparison_warnings(base, variant, mismatches, "interleaved" if paired else execution)
    if paired is not None:  # one lbeval ab session: the per-pair figures of adjacent requests
        execution = "interleaved"
        timing_changes = {m: _paired_change(paired, m) for m in TIMING_MEASURES}
        warnings += paired_warnings(paired)
    return Comparison(
        base=base,
        variant=variant,
        mismatches=mismatches,
        allow_mismatch=allow_mismatch,
        seed=seed,
        cross=cross_cold(base, variant, memo),
        warm_changes={
            ds: warm_score_change(base, variant, ds, seed, resamples) for ds in base.scores.datasets
        },
        timing_changes=timing_changes,
        execution=execution,
        warnings=warnings,
        cross_agreement=cross_agreement(base, variant, memo),
        start_gap_s=start_gap_seconds(base, variant),
        paired=paired,
        replica_pairs=_replica_pairs(base, variant) if paired is not None else None,
    )


def _replica_pairs(base: ScoredRun, variant: ScoredRun) -> ReplicaPairs | None:
    pairs = session_pairs(base, variant)
    return replica_pairs(base, variant, pairs) if pairs is not None else None


@dataclass(frozen=True)
class DivergentPair:
    """One diverging pair for the drill-down: which outputs, where they part, and the two records."""

    kind: str  # "base cold/warm", "variant warm/repeat", "cold base/variant", ...
    dataset: str
    example_id: str
    repetition: int
    divergence: Divergence
    a_label: str
    b_label: str
    a: RequestRecord
    b: RequestRecord

    def as_json(self) -> dict[str, Any]:
        d = self.divergence
        return {
            "kind": self.kind,
            "dataset": self.dataset,
            "example_id": self.example_id,
            "repetition": self.repetition,
            "position": d.position,
            "margin_a": d.margin_a,
            "margin_b": d.margin_b,
            "near_tie": d.near_tie,
            "text_equal": d.text_equal,
        }


def _diverging(kind: str, labels: tuple[str, str], p: Pair) -> DivergentPair | None:
    r = p.result
    if r.first_divergence is None:
        return None
    d = Divergence(p.key[0], p.key[1], p.repetition, r.first_divergence, r.margin_a, r.margin_b, r.text_equal)
    return DivergentPair(kind, p.key[0], p.key[1], p.repetition, d, labels[0], labels[1], p.a, p.b)


def divergence_list(c: Comparison) -> list[DivergentPair]:
    """Every diverging pair: within each variant (cold/warm, warm/repeat), then base cold vs variant cold."""
    found: list[DivergentPair | None] = []
    for side, run in (("base", c.base), ("variant", c.variant)):
        for name in ("cold_warm", "warm_repeat"):
            pa, pb = name.split("_")
            labels = (f"{side} {pa}", f"{side} {pb}")
            found += [_diverging(f"{side} {pa}/{pb}", labels, p) for p in run.pairs.get(name, [])]
    for cross in c.cross:
        found += [_diverging("cold base/variant", ("base cold", "variant cold"), p) for p in cross.pairs]
    return [dp for dp in found if dp is not None]
