"""The hitlen scenario's rows: hitlen_full after a prime of L tokens vs hitlen_cold, one sub-row per class of
L, with the hits honoured (cached == floor(min(L, n-1)/B)*B) and whether the class's hits are partial.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.analyze.attribution_rows import (
    AttributionRow,
    Finals,
    HitMiss,
    Hits,
    PairSet,
    RowContext,
    make_row,
    outputs_of,
    register_rows,
    safe_key,
)
from eval.records import scenarios as sc
from eval.records.final import ExampleKey as Key
from eval.records.server_figures import checked_cached
from eval.records.types import RequestRecord


def _hit_class_order(f: Finals, keys: Sequence[Key]) -> list[str]:
    lens: dict[str, list[int]] = {}
    for k in keys:
        cold = f.one(k, "hitlen_cold")
        planned = cold.variation if cold is not None else {}
        for length, name in zip(
            planned.get("hit_lens") or [], planned.get("hit_classes") or [], strict=False
        ):
            lens.setdefault(str(name), []).append(int(length))
        for rec in f.all(k, "hitlen_full"):
            lens.setdefault(str(rec.variation.get(sc.HIT_CLASS)), []).append(
                int(rec.variation.get(sc.HIT_LEN, 0))
            )
    return sorted(lens, key=lambda name: (sorted(lens[name])[len(lens[name]) // 2], name))


def _hits(recs: Sequence[tuple[Key, RequestRecord | None, int]]) -> Hits:
    """(input, full record or None, L) per planned primed request."""
    honoured = 0
    misses: list[HitMiss] = []
    for key, rec, length in recs:
        expected = rec.expected_cached_tokens if rec is not None else None
        cached = checked_cached(rec) if rec is not None else None
        if rec is not None and rec.status == "ok" and expected is not None and cached == expected:
            honoured += 1
        else:
            misses.append(HitMiss(key[0], key[1], length, expected if expected is not None else -1, cached))
    return Hits(honoured, len(recs), misses)


def _partial(f: Finals, keys: Sequence[Key], name: str) -> bool | None:
    """Whether the hits of class `name` are partial: their promised cached tokens below the prompt's full blocks
    (`full_cached`; records from before it: below the input's largest promised hit)."""
    flags = set()
    for k in keys:
        rec = f.one(k, "hitlen_full", **{sc.HIT_CLASS: name})
        if rec is None:
            continue
        full = rec.variation.get(sc.FULL_CACHED)
        if not isinstance(full, int):
            full = max(int(r.variation.get(sc.EXPECTED_CACHED) or 0) for r in f.all(k, "hitlen_full"))
        flags.add(int(rec.variation.get(sc.EXPECTED_CACHED) or 0) < full)
    return flags.pop() if len(flags) == 1 else None


def _hitlen_rows(keys: Sequence[Key], f: Finals) -> list[AttributionRow]:
    order = _hit_class_order(f, keys)
    total, all_hits, subs = PairSet(f.memo), [], []
    samples: dict[Key, list[RequestRecord]] = {k: list(f.all(k, "hitlen_cold")) for k in keys}
    for name in order:
        ps, hits, lens = PairSet(f.memo), [], []
        per: dict[Key, list[RequestRecord]] = {}
        for k in keys:
            cold = f.one(k, "hitlen_cold")
            full = f.one(k, "hitlen_full", **{sc.HIT_CLASS: name})
            planned = (
                dict(
                    zip(
                        cold.variation.get("hit_classes") or [],
                        cold.variation.get("hit_lens") or [],
                        strict=False,
                    )
                )
                if cold
                else {}
            )
            if full is None and name not in planned:
                continue  # this class of hit length does not apply to this input (or its cold is missing)
            length = int(full.variation.get(sc.HIT_LEN, 0)) if full is not None else int(planned[name])
            lens.append(length)
            ps.add(k, length, cold, full)
            hits.append((k, full, length))
            if full is not None:
                samples[k].append(full)
                per[k] = [*f.all(k, "hitlen_cold"), full]
        total.extend(ps)
        all_hits += hits
        subs.append(
            make_row(
                "hitlen", f"{name}: L = {_span(lens)}", key=f"hitlen_{safe_key(name)}", level=1, value=name, measured=True,
                pairs=ps.stats("hitlen_cold", "hitlen_full"), outputs=outputs_of(per), hits=_hits(hits),
                hit_lens=sorted(lens), partial=_partial(f, keys, name),
            )
        )  # fmt: skip
    no_cold = sum(f.one(k, "hitlen_cold") is None for k in keys)
    total.missing(no_cold)  # an input without its reference: its planned lengths are unknown, counted once
    condition = f"L in {', '.join(order)}" if order else "no hit lengths"
    head = make_row(
        "hitlen", condition, measured=True, pairs=total.stats("hitlen_cold", "hitlen_full"),
        outputs=outputs_of(samples), hits=_hits(all_hits), hit_lens=sorted(length for *_, length in all_hits),
    )  # fmt: skip
    return [head, *subs]


def _span(values: Sequence[int]) -> str:
    if not values:
        return "n/a"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _rows(c: RowContext) -> list[AttributionRow]:
    return _hitlen_rows(c.keys, c.finals)


register_rows("hitlen", _rows)
