"""The traffic scenario's rows: traffic_warm (after 3 unrelated requests) vs traffic_warm_idle (the traffic
alone), its sub-row vs traffic_cold (the traffic and the prefix cache together), and the noise requests that ended
on their stop string.
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


def _traffic_rows(keys: Sequence[Key], f: Finals) -> list[AttributionRow]:
    ps, vs_cold = PairSet(f.memo), PairSet(f.memo)
    stopped = total = 0
    for k in keys:
        ps.add(k, 0, f.one(k, "traffic_warm_idle"), f.one(k, "traffic_warm"))
        vs_cold.add(k, 0, f.one(k, "traffic_cold"), f.one(k, "traffic_warm"))
        noise = f.one(k, "traffic_noise", **{sc.NOISE: 2})
        total += 1
        limit = noise.settings.get("max_tokens") if noise is not None else None
        produced = noise.usage.completion_tokens if noise is not None else None
        if noise is not None and noise.status == "ok" and noise.finish_reason == "stop":
            stopped += isinstance(limit, int) and isinstance(produced, int) and produced < limit
    warm = {k: [*f.all(k, "traffic_warm_idle"), *f.all(k, "traffic_warm")] for k in keys}
    both = {k: [*f.all(k, "traffic_cold"), *f.all(k, "traffic_warm")] for k in keys}
    return [
        make_row(
            "traffic", "warm before vs after 3 unrelated requests", measured=True,
            pairs=ps.stats("traffic_warm_idle", "traffic_warm"), outputs=outputs_of(warm), stop_ended=(stopped, total),
        ),
        make_row(
            "traffic_vs_cold", "cold vs warm after the traffic (prefix cache included)", level=1, value="vs cold",
            measured=True, pairs=vs_cold.stats("traffic_cold", "traffic_warm"), outputs=outputs_of(both),
        ),
    ]  # fmt: skip


def _rows(c: RowContext) -> list[AttributionRow]:
    return _traffic_rows(c.keys, c.finals)


register_rows("traffic", _rows)
