"""The repeats scenario's rows: repeat r vs repeat 0 alone, repeat r in a batch vs alone repeat 0, under one
"repeats" cause row; the distinct outputs per input and where they first split.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from eval.records.types import RequestRecord


def _repeats_rows(keys: Sequence[Key], f: Finals, n: int) -> list[AttributionRow]:
    alone, batched, both = PairSet(f.memo), PairSet(f.memo), PairSet(f.memo)
    s_alone: dict[Key, list[RequestRecord]] = {}
    s_batched: dict[Key, list[RequestRecord]] = {}
    sizes: set[int] = set()
    for k in keys:
        ref = f.one(k, "repeats_alone", **{sc.REPEAT: 0})
        for r in range(1, n):
            alone.add(k, r, ref, f.one(k, "repeats_alone", **{sc.REPEAT: r}))
        for r in range(n):
            rec = f.one(k, "repeats_batched", **{sc.REPEAT: r})
            batched.add(k, r, ref, rec)
            if rec is not None:
                sizes.add(int(rec.variation.get(sc.BATCH_SIZE, 0)))
        s_alone[k] = f.all(k, "repeats_alone")
        s_batched[k] = f.all(k, "repeats_batched")
    both.extend(alone)
    both.extend(batched)
    largest = max(sizes) if sizes else min(n, sc.REPEAT_BATCH)
    combined = {k: [*s_alone[k], *s_batched[k]] for k in keys}
    return [
        make_row("repeats_alone", f"N = {n} alone / in batches of up to {largest}", key="repeats", cause="repeats",
             measured=True,
             pairs=both.stats("repeats_alone", "repeats_alone+batched"), outputs=outputs_of(combined)),
        make_row("repeats_alone", f"N = {n} alone, repeat r vs repeat 0", level=1, value="alone", measured=True,
             pairs=alone.stats("repeats_alone", "repeats_alone"), outputs=outputs_of(s_alone)),
        make_row("repeats_batched", f"N = {n} in batches of up to {largest}, vs alone repeat 0", level=1,
             value="batched", measured=True, pairs=batched.stats("repeats_alone", "repeats_batched"),
             outputs=outputs_of(s_batched)),
    ]  # fmt: skip


def _rows(c: RowContext) -> list[AttributionRow]:
    return _repeats_rows(c.keys, c.finals, c.settings.repeats or sc.DEFAULT_REPEATS)


register_rows("repeats", _rows)
