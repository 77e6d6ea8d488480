"""The replica-pair table (runs of one `lbeval ab` session on N >= 2 replicas per side): per replica pair i, A's
replica i against B's replica i, their outputs' equality and max delta and the warm prefill change with its
floor (eval/analyze/replica_pairs.py). In an A/A session (one variant on both sides) it is the layout's
replica-pair floor, and the reading names the replica pairs that are not clean."""

from __future__ import annotations

from eval.analyze.compare import Comparison
from eval.analyze.replica_pairs import ReplicaPair
from eval.report.cells import Cell, Frac, Interval, Num, Row, Sci, Table

MEASURE = "warm_prefill_ms"  # the measure shown (every measure's change is in the analysis)
MEASURE_LABEL = "warm prefill, server"


def _cells(rp: ReplicaPair) -> list[Cell]:
    s, t = rp.agreement, rp.timing.get(MEASURE)
    return [
        Num(rp.pairs, 0),
        Frac(s.tokens_equal, s.n_total),
        Frac(s.text_equal, s.n_total),
        Sci(s.max_delta),
        Interval(t.estimate, t.ci_low, t.ci_high, 1, "%") if t is not None else None,
        Num(rp.floor(MEASURE), 1, "%"),
    ]


def _differs(rp: ReplicaPair) -> bool:
    s = rp.agreement
    return s.tokens_equal < s.n_total or bool(s.max_delta)


def _reading(c: Comparison, pairs: list[ReplicaPair], across: int) -> str:
    aa = c.base.scores.run.variant == c.variant.scores.run.variant
    head = (
        f"A/A of the replica layout ({len(pairs)} replica pairs, the same variant on both sides): the "
        "replica-pair floor"
        if aa
        else f"Per replica pair ({len(pairs)} replica pairs: A's replica i against B's replica i)"
    )
    differing = [f"{rp.replica}" for rp in pairs if _differs(rp)]
    said = (
        f"replica pair(s) {', '.join(differing)} differ (outputs not equal or a logprob delta)"
        if differing
        else "every replica pair's outputs equal, max delta 0"
    )
    cross = f"; {across} adjacent pair(s) name two replicas" if across else ""
    return f"{head}: {said}{cross}."


def replica_pairs_table(c: Comparison) -> Table | None:
    rps = c.replica_pairs
    if rps is None:
        return None
    rows = [Row(f"replica_{rp.replica}", f"A{rp.replica} vs B{rp.replica}", _cells(rp)) for rp in rps.pairs]
    columns = ["replica pair", "adjacent pairs", "tokens equal", "text equal", "max |logprob delta|",
               f"{MEASURE_LABEL}: gated [97.5% CI]", f"{MEASURE_LABEL}: floor"]  # fmt: skip
    note = (
        "Each replica pair's adjacent pairs only (both sides complete in the pair, on replica i of A and replica i "
        "of B). Equality: the counted cold, warm and repeat outputs of its main units, A's against B's. Timing: "
        "the 20 % trimmed mean of the per-input mean log(b/a) with Yuen's 97.5 % interval over its inputs (the "
        "interval the timing rules read); floor: its larger |end|. In an A/A session these are what one replica "
        "pair shows when nothing changed: a replica pair that differs (device, driver, build) shows alone."
    )
    return Table(
        "replica_pairs", "Per replica pair (A's replica i vs B's replica i)", _reading(c, rps.pairs, rps.across),
        columns, rows, note,
    )  # fmt: skip
