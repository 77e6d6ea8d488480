"""The batch scenario's rows: alone vs in a batch of B, cold and warm, one sub-row per batch size B > 1."""

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
from eval.records.manifest_parts import RunSettings
from eval.records.types import RequestRecord


def batch_sizes(settings: RunSettings) -> list[int]:
    return list(settings.batch_sizes or sc.DEFAULT_BATCH_SIZES)


def _batch_rows(keys: Sequence[Key], f: Finals, sizes: Sequence[int]) -> list[AttributionRow]:
    rows: list[AttributionRow] = []
    for pair_key, alone, member in (
        ("batch", "batch_alone", "batch_member"),
        ("batch_warm", "batch_warm_alone", "batch_warm_member"),
    ):
        total, subs = PairSet(f.memo), []
        samples: dict[Key, list[RequestRecord]] = {k: list(f.all(k, alone)) for k in keys}
        for size in (b for b in sizes if b > 1):
            ps = PairSet(f.memo)
            for k in keys:
                b = f.one(k, member, **{sc.BATCH_SIZE: size})
                ps.add(k, size, f.one(k, alone), b)
                if b is not None:
                    samples[k].append(b)
            total.extend(ps)
            per = {
                k: [
                    *f.all(k, alone),
                    *(r for r in f.all(k, member) if r.variation.get(sc.BATCH_SIZE) == size),
                ]
                for k in keys
            }
            subs.append(
                make_row(
                    pair_key, f"alone vs batch of {size}", key=f"{pair_key}_b{size}", level=1, value=size,
                    measured=True, pairs=ps.stats(alone, member), outputs=outputs_of(per),
                )
            )  # fmt: skip
        listed = ", ".join(str(s) for s in sizes if s > 1) or "none above 1"
        rows.append(
            make_row(
                pair_key, f"alone vs batch of {listed}", measured=True, pairs=total.stats(alone, member),
                outputs=outputs_of(samples),
            )
        )  # fmt: skip
        rows += subs
    return rows


def _rows(c: RowContext) -> list[AttributionRow]:
    return _batch_rows(c.keys, c.finals, batch_sizes(c.settings))


register_rows("batch", _rows)
