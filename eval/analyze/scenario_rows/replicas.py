"""The replicas scenario's rows: the same request on replica r vs on replica 0 (cold vs cold, warm vs warm),
one sub-row per replica r >= 1; a record answered by another replica than it was sent to is invalid; a run on
one replica gives the row with `measured` False.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from eval.analyze.attribution_rows import (
    AttributionRow,
    Finals,
    PairSet,
    RowContext,
    make_row,
    outputs_of,
    register_rows,
)
from eval.records import scenarios as sc
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection
from eval.records.types import RequestRecord


def _on_replica(rec: RequestRecord | None, r: int) -> RequestRecord | None:
    """A replicas record as sent to replica r: one answered by another replica is marked invalid."""
    if rec is None or rec.replica == r or rec.status == "error":
        return rec
    return replace(rec, status="invalid", error=f"sent to replica {r}, answered by replica {rec.replica}")


def _replica_rows(keys: Sequence[Key], f: Finals, n: int) -> list[AttributionRow]:
    """replica r vs replica 0, cold vs cold and warm vs warm, per input (n: the run's replicas)."""
    total, subs = PairSet(f.memo), []
    passes = ("replicas_cold", "replicas_warm")
    for r in range(1, n):
        ps = PairSet(f.memo)
        for k in keys:
            for p in passes:
                a = _on_replica(f.one(k, p, **{sc.REPLICA: 0}), 0)
                ps.add(k, r, a, _on_replica(f.one(k, p, **{sc.REPLICA: r}), r), across=True)
        total.extend(ps)
        per = {
            k: [x for p in passes for x in f.all(k, p) if x.variation.get(sc.REPLICA) in (0, r)] for k in keys
        }
        subs.append(
            make_row(
                sc.REPLICA_ROW, f"replica 0 vs replica {r}, cold and warm", key=f"{sc.REPLICA_ROW}_r{r}",
                level=1, value=r, measured=True, pairs=ps.stats("replica 0", f"replica {r}"),
                outputs=outputs_of(per),
            )
        )  # fmt: skip
    samples = {k: [x for p in passes for x in f.all(k, p)] for k in keys}
    head = make_row(
        sc.REPLICA_ROW, f"replica 0 vs replicas 1..{n - 1}, cold and warm, alone", measured=True,
        pairs=total.stats("replica 0", "replica r"), outputs=outputs_of(samples),
    )  # fmt: skip
    return [head, *subs]


def run_replicas(sel: Selection) -> int:
    """The replicas the run's replicas scenario was planned for (its records' `replicas`: after a resume with
    another count, the latest plan's); without such records, the highest replica a record names + 1."""
    recs = list(sel.final.values())
    planned = [int(r.variation.get(sc.REPLICAS) or 0) for r in recs if r.scenario == "replicas"]
    if planned:
        return max(1, *planned)
    return 1 + max((r.replica for r in recs), default=0)


def _rows(c: RowContext) -> list[AttributionRow]:
    if c.replicas < 2:
        return [make_row(sc.REPLICA_ROW, "one replica: not run", measured=False)]
    return _replica_rows(c.keys, c.finals, c.replicas)


register_rows("replicas", _rows)
