"""Per replica pair of an `lbeval ab` session on N replicas per side: side A's replica i against side B's
replica i (eval/run/ab.py runs each pair on one replica pair, adjacent in time).

A pair line of the session (eval/analyze/ab_timing.session_pairs: the last line per unit) that is adjacent (both
sides complete in it, one right after the other) and whose records all name replica i on both sides belongs
to replica pair i. Per replica pair:

- equality: the counted records of the generation passes (cold, warm, repeat) of its main units, A's against
  B's, token by token (eval/analyze/agreement.pair_stats: text and token IDs equal, max |top-k logprob delta|,
  first divergences and near ties); a slot whose counted record is not one of the pair line's is no pair
  (counted missing);
- timing: each timing measure's gated change over its adjacent timing pairs (the 20 % trimmed mean of the
  per-input mean log ratios with Yuen's 97.5 % interval, scorers.paired_timing.gated_timing_change:
  the interval the timing rules read) and its floor, the larger |end| in percent (None: fewer than two inputs).

An adjacent pair line whose records name two replica indexes is counted in `across` (a session never writes
one: a half-done pair resumed on another layout is a rerun, not adjacent). In an A/A session (`lbeval ab X X`,
the same servers as both sides) these figures are the layout's replica-pair floor: what each replica pair
shows when nothing changed, so a replica pair that differs (another device, driver or build) stands out as
that pair. With one replica per side there is nothing to split (`replica_pairs` returns None).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from eval.analyze.ab_timing import paired_values
from eval.analyze.agreement import Pair, PairStats, pair_kind, pair_stats
from eval.analyze.memo import pair_result
from eval.analyze.score import ScoredRun
from eval.analyze.timing import TIMING_MEASURES
from eval.records.ab_pairs import PairRecord
from eval.records.final import slot
from eval.records.types import RequestRecord
from eval.records.vocabulary import GENERATION_PASSES, UNIT_MAIN
from scorers.paired_timing import TimingChange, gated_timing_change


@dataclass(frozen=True)
class ReplicaPair:
    """Replica i of A against replica i of B: its adjacent pairs, their equality and each measure's change."""

    replica: int
    pairs: int  # adjacent pair lines on this replica pair (main and timing units)
    inputs: int  # the inputs they belong to
    agreement: PairStats  # A_i vs B_i, generation passes of the main units
    timing: dict[str, TimingChange | None] = field(default_factory=dict)  # measure -> gated change (%)

    def floor(self, measure: str) -> float | None:
        """max(|low|, |high|) of the measure's gated interval (%); None without one."""
        t = self.timing.get(measure)
        return None if t is None else max(abs(t.ci_low), abs(t.ci_high))


@dataclass(frozen=True)
class ReplicaPairs:
    pairs: list[ReplicaPair]
    across: int  # adjacent pair lines whose records name two replica indexes (never expected)


def _replicas_of(p: PairRecord, a: dict[int, RequestRecord], b: dict[int, RequestRecord]) -> set[int]:
    return {a[q].replica for q in p.a.seqs if q in a} | {b[q].replica for q in p.b.seqs if q in b}


def _agreement(base: ScoredRun, variant: ScoredRun, lines: list[PairRecord], replica: int) -> PairStats:
    pairs: list[Pair] = []
    counts: Counter[str] = Counter()
    for p in (x for x in lines if x.kind == UNIT_MAIN):
        key = (p.dataset, p.example_id)
        for pass_name in GENERATION_PASSES:
            ra = base.selection.final.get(slot(key, pass_name))
            rb = variant.selection.final.get(slot(key, pass_name))
            if ra is None and rb is None:
                continue  # a pass the session did not plan
            if ra is not None and ra.seq not in p.a.seqs:
                ra = None  # counted from another pair line: not this pair's
            if rb is not None and rb.seq not in p.b.seqs:
                rb = None
            kind = pair_kind(ra, rb)
            counts[kind] += 1
            if kind == "ok" and ra is not None and rb is not None:
                result = pair_result(None, ra, rb)
                pairs.append(Pair(key, 0, ra, rb, result))
    return pair_stats(f"A replica {replica}", f"B replica {replica}", pairs, counts)


def _timing(base: ScoredRun, variant: ScoredRun, lines: list[PairRecord]) -> dict[str, TimingChange | None]:
    out: dict[str, TimingChange | None] = {}
    for measure in TIMING_MEASURES:
        v = paired_values(base, variant, lines, measure)
        enough = len(v.a) >= 2 and len(set(v.input_ids)) >= 2
        out[measure] = gated_timing_change(v.input_ids, v.a, v.b) if enough else None
    return out


def replica_pairs(base: ScoredRun, variant: ScoredRun, pairs: list[PairRecord]) -> ReplicaPairs | None:
    """The session's figures per replica pair (`pairs`: session_pairs of base and variant, side a the base);
    None when every adjacent pair ran on replica 0 (one replica per side)."""
    a = {r.seq: r for r in base.loaded.records}
    b = {r.seq: r for r in variant.loaded.records}
    by_replica: dict[int, list[PairRecord]] = {}
    across = 0
    for p in (x for x in pairs if x.adjacent):
        replicas = _replicas_of(p, a, b)
        if len(replicas) > 1:
            across += 1
        elif replicas:
            by_replica.setdefault(next(iter(replicas)), []).append(p)
    if set(by_replica) <= {0}:
        return None
    out = [
        ReplicaPair(
            i,
            len(lines),
            len({(p.dataset, p.example_id) for p in lines}),
            _agreement(base, variant, lines, i),
            _timing(base, variant, lines),
        )  # fmt: skip
        for i, lines in sorted(by_replica.items())
    ]
    return ReplicaPairs(out, across)
