"""Attribution: one row per cause of a difference, each from the scenario that isolates it, from records only.

Rows (cause rows, then their sub-rows; the pairs each compares are the scenario's PairDefs in
eval/records/scenarios.py):
    cache_cold_warm      prefix cache: cold vs warm of the cache scenario (its concurrency said in the row)
    cache_warm_repeat    prefix cache, warm twice: warm vs repeat
    batch / batch_b<B>   batch composition: batch_member in a batch of B vs batch_alone
    batch_warm / _b<B>   warm path in a batch: batch_warm_member vs batch_warm_alone
    hitlen / hitlen_<i>  prefix-hit length: hitlen_full after a prime of L tokens vs hitlen_cold, one sub-row per
                         class of L ("2B+1", "n-1"...), with the hits honoured (cached == floor(min(L, n-1)/B)*B)
    repeats / _alone / _batched   repeat r vs repeat 0 alone; repeat r in a batch vs alone repeat 0; the
                         distinct outputs per input and where they first split
    traffic / _vs_cold   traffic_warm (after 3 unrelated requests) vs traffic_warm_idle (warm before them): the
                         traffic alone; its sub-row vs traffic_cold: the traffic and the prefix cache together
    replica / replica_r<r>  the same request on replica r vs on replica 0 (replicas_cold vs replicas_cold,
                         replicas_warm vs replicas_warm), one sub-row per replica r >= 1; a run on one replica
                         gives the row with `measured` False
A scenario without a row builder of its own (ROW_BUILDERS) gets its rows from its PairDefs alone
(`generic_rows`): per input, each record of pass b against the first record of pass a (a == b: its later records
against its first), one sub-row per value of `by`.
Each row holds PairStats (k/N text and token equality, first divergences with their near-tie margins, max top-k
delta, min overlap; N counts every planned pair, errored, invalid and missing ones included), the distinct
outputs over the row's samples per input, and for hitlen the hits honoured. A scenario the run did not ask for
gives its cause row with `measured` False.

One replica per pair: every pair but the replica row's compares two records of one replica (on a run with
replicas each input's units are assigned to one); a pair whose records name different replicas is counted
invalid, never compared, and so is a replicas record sent to one replica and answered by another.

Confounding is stated, never hidden: cache pairs measured at concurrency C > 1 had other units in flight, so the
cache rows carry confounded_with = "batch composition", and `Attribution.confounding` holds the batch scenario's
row at batch size C (or None when it was not measured there).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from eval.analyze.agreement import Pair, PairStats, pair_kind, pair_stats
from eval.analyze.memo import ScoreMemo, pair_result
from eval.records import scenarios as sc
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection
from eval.records.scenarios import ScenarioSpec
from eval.records.server_figures import checked_cached
from eval.records.types import RequestRecord
from eval.records.vocabulary import CACHE_SCENARIO, GENERATION_PASSES
from scorers import determinism

CONFOUNDER = "batch composition"


@dataclass(frozen=True)
class Outputs:
    """Distinct outputs (text) over each input's ok samples in a row."""

    n_inputs: int  # inputs with at least two ok samples
    n_multiple: int  # of those, inputs with more than one distinct output
    max_distinct: int
    min_top_share: float | None  # the smallest share of an input's most common output
    split_positions: list[
        int
    ]  # per diverging sample: first token where it leaves its input's most common output


@dataclass(frozen=True)
class HitMiss:
    dataset: str
    example_id: str
    hit_len: int
    expected: int
    cached: int | None


@dataclass(frozen=True)
class Hits:
    """Primed requests (hitlen_full) whose cached tokens equal what their hit length promises."""

    honoured: int
    total: int  # planned primed requests (errored, invalid and missing ones are not honoured)
    misses: list[HitMiss]


@dataclass(frozen=True)
class AttributionRow:
    key: str
    cause: str
    condition: str  # what was compared, e.g. "cold vs warm, idle server, concurrency 1", "batch of 4"
    scenario: str
    held_fixed: str
    varied: str
    measured: bool
    level: int  # 0 a cause, 1 one value of what it varied
    value: Any  # the sub-row's value (batch size, hit-length class), None for a cause row
    pairs: PairStats | None = None
    outputs: Outputs | None = None
    hits: Hits | None = None
    confounded_with: str | None = None
    hit_lens: list[int] | None = None  # hitlen sub-rows: the L values of the row's inputs
    # hitlen sub-rows: True when every hit of the row stops short of its prompt's full blocks (a partial prefix
    # resumed), False when every one covers them, None mixed or unknown
    partial: bool | None = None
    stop_ended: tuple[int, int] | None = (
        None  # traffic: noise requests that ended on their stop string (k, N)
    )


@dataclass(frozen=True)
class Confounding:
    """Cache pairs measured at concurrency > 1, and what the batch scenario says at that batch size."""

    concurrency: int
    batch_row: AttributionRow | None  # the batch scenario's sub-row at batch size == concurrency, if measured
    measured_sizes: list[int]  # the batch sizes the batch scenario measured (empty: not run)


@dataclass(frozen=True)
class Attribution:
    scenarios: list[str]
    concurrency: int
    n_inputs: int
    scenario_inputs: int  # inputs the scenarios other than cache ran on
    rows: list[AttributionRow]
    confounding: Confounding | None
    replicas: int = 1  # the replicas the run's records name (1: one server)

    def row(self, key: str) -> AttributionRow | None:
        return next((r for r in self.rows if r.key == key), None)


# ---------------------------------------------------------------- records by input


class _Finals:
    """The final records of a selection by (input, pass)."""

    def __init__(self, sel: Selection, memo: ScoreMemo | None = None) -> None:
        self.memo = memo  # the pair results kept between scorings (eval/analyze/memo.py)
        self.by: dict[tuple[Key, str], list[RequestRecord]] = {}
        for slot, rec in sel.final.items():
            self.by.setdefault(((slot.dataset, slot.example_id), slot.pass_name), []).append(rec)
        for recs in self.by.values():
            recs.sort(key=lambda r: r.repetition)

    def all(self, key: Key, pass_name: str) -> list[RequestRecord]:
        return self.by.get((key, pass_name), [])

    def one(self, key: Key, pass_name: str, **vary: Any) -> RequestRecord | None:
        for rec in self.all(key, pass_name):
            if all(rec.variation.get(k) == v for k, v in vary.items()):
                return rec
        return None


class _PairSet:
    def __init__(self, memo: ScoreMemo | None) -> None:
        self.memo = memo
        self.pairs: list[Pair] = []
        self.counts: Counter[str] = Counter()

    def add(
        self, key: Key, rep: int, a: RequestRecord | None, b: RequestRecord | None, across: bool = False
    ) -> None:
        kind = pair_kind(a, b, same_replica=not across)  # the replica row compares across replicas
        self.counts[kind] += 1
        if kind == "ok" and a is not None and b is not None:
            result = pair_result(self.memo, a, b)
            self.pairs.append(Pair(key, rep, a, b, result))

    def missing(self, n: int = 1) -> None:
        self.counts["missing"] += n

    def extend(self, other: _PairSet) -> None:
        self.pairs += other.pairs
        self.counts.update(other.counts)

    def stats(self, a: str, b: str) -> PairStats:
        return pair_stats(a, b, self.pairs, self.counts)


def outputs_of(samples: Mapping[Key, Sequence[RequestRecord]]) -> Outputs:
    """Distinct outputs per input over its ok samples, and where each diverging sample leaves the most common."""
    n_inputs = n_multiple = max_distinct = 0
    min_share: float | None = None
    splits: list[int] = []
    for recs in samples.values():
        ok = [r for r in recs if r.status == "ok"]
        if len(ok) < 2:
            continue
        texts = [r.output_text or "" for r in ok]
        distinct, share = determinism.unique_outputs(texts)
        n_inputs += 1
        n_multiple += distinct > 1
        max_distinct = max(max_distinct, distinct)
        min_share = share if min_share is None else min(min_share, share)
        common_text = Counter(texts).most_common(1)[0][0]
        common = next(r for r in ok if (r.output_text or "") == common_text)
        for r in ok:
            if (r.output_text or "") != common_text or r.output_token_ids != common.output_token_ids:
                position = determinism.first_divergence(
                    common.output_token_ids or [], r.output_token_ids or []
                )
                if position is not None:
                    splits.append(position)
    return Outputs(n_inputs, n_multiple, max_distinct, min_share, sorted(splits))


# ---------------------------------------------------------------- the rows


def _row(
    pair_key: str,
    condition: str,
    *,
    key: str | None = None,
    level: int = 0,
    value: Any = None,
    cause: str | None = None,
    **kw: Any,
) -> AttributionRow:
    spec = next(p for s in sc.SCENARIOS.values() for p in s.pairs if p.key == pair_key)
    scenario = next(s.name for s in sc.SCENARIOS.values() if spec in s.pairs)
    return AttributionRow(
        key=key or pair_key, cause=cause or spec.cause, condition=condition, scenario=scenario,
        held_fixed=spec.held_fixed, varied=spec.varied, level=level, value=value, **kw,
    )  # fmt: skip


def _cache_rows(
    keys: Sequence[Key],
    f: _Finals,
    agreement: Mapping[str, PairStats | None],
    concurrency: int,
    measured: bool,
) -> list[AttributionRow]:
    where = (
        "idle server, concurrency 1"
        if concurrency == 1
        else f"concurrency {concurrency}: units in flight together"
    )
    confounded = CONFOUNDER if concurrency > 1 else None
    samples = {k: [r for p in GENERATION_PASSES for r in f.all(k, p)] for k in keys}
    rows = []
    for pair_key, name, label in (
        ("cache_cold_warm", "cold_warm", "cold vs warm"),
        ("cache_warm_repeat", "warm_repeat", "warm vs repeat"),
    ):
        stats = agreement.get(name)
        rows.append(
            _row(
                pair_key, f"{label}, {where}", measured=measured and stats is not None, pairs=stats,
                outputs=outputs_of(samples) if stats is not None else None,
                confounded_with=confounded if stats is not None else None,
            )
        )  # fmt: skip
    return rows


def _batch_rows(keys: Sequence[Key], f: _Finals, sizes: Sequence[int]) -> list[AttributionRow]:
    rows: list[AttributionRow] = []
    for pair_key, alone, member in (
        ("batch", "batch_alone", "batch_member"),
        ("batch_warm", "batch_warm_alone", "batch_warm_member"),
    ):
        total, subs = _PairSet(f.memo), []
        samples: dict[Key, list[RequestRecord]] = {k: list(f.all(k, alone)) for k in keys}
        for size in (b for b in sizes if b > 1):
            ps = _PairSet(f.memo)
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
                _row(
                    pair_key, f"alone vs batch of {size}", key=f"{pair_key}_b{size}", level=1, value=size,
                    measured=True, pairs=ps.stats(alone, member), outputs=outputs_of(per),
                )
            )  # fmt: skip
        listed = ", ".join(str(s) for s in sizes if s > 1) or "none above 1"
        rows.append(
            _row(
                pair_key, f"alone vs batch of {listed}", measured=True, pairs=total.stats(alone, member),
                outputs=outputs_of(samples),
            )
        )  # fmt: skip
        rows += subs
    return rows


def _hit_class_order(f: _Finals, keys: Sequence[Key]) -> list[str]:
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


def _partial(f: _Finals, keys: Sequence[Key], name: str) -> bool | None:
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


def _hitlen_rows(keys: Sequence[Key], f: _Finals) -> list[AttributionRow]:
    order = _hit_class_order(f, keys)
    total, all_hits, subs = _PairSet(f.memo), [], []
    samples: dict[Key, list[RequestRecord]] = {k: list(f.all(k, "hitlen_cold")) for k in keys}
    for name in order:
        ps, hits, lens = _PairSet(f.memo), [], []
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
            _row(
                "hitlen", f"{name}: L = {_span(lens)}", key=f"hitlen_{_safe(name)}", level=1, value=name, measured=True,
                pairs=ps.stats("hitlen_cold", "hitlen_full"), outputs=outputs_of(per), hits=_hits(hits),
                hit_lens=sorted(lens), partial=_partial(f, keys, name),
            )
        )  # fmt: skip
    no_cold = sum(f.one(k, "hitlen_cold") is None for k in keys)
    total.missing(no_cold)  # an input without its reference: its planned lengths are unknown, counted once
    condition = f"L in {', '.join(order)}" if order else "no hit lengths"
    head = _row(
        "hitlen", condition, measured=True, pairs=total.stats("hitlen_cold", "hitlen_full"),
        outputs=outputs_of(samples), hits=_hits(all_hits), hit_lens=sorted(length for *_, length in all_hits),
    )  # fmt: skip
    return [head, *subs]


def _safe(name: str) -> str:
    """A row key part: letters, digits, + and - kept, the rest made _ ("last block" -> "last_block")."""
    return re.sub(r"[^A-Za-z0-9+-]", "_", name)


def _span(values: Sequence[int]) -> str:
    if not values:
        return "n/a"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _repeats_rows(keys: Sequence[Key], f: _Finals, n: int) -> list[AttributionRow]:
    alone, batched, both = _PairSet(f.memo), _PairSet(f.memo), _PairSet(f.memo)
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
        _row("repeats_alone", f"N = {n} alone / in batches of up to {largest}", key="repeats", cause="repeats",
             measured=True,
             pairs=both.stats("repeats_alone", "repeats_alone+batched"), outputs=outputs_of(combined)),
        _row("repeats_alone", f"N = {n} alone, repeat r vs repeat 0", level=1, value="alone", measured=True,
             pairs=alone.stats("repeats_alone", "repeats_alone"), outputs=outputs_of(s_alone)),
        _row("repeats_batched", f"N = {n} in batches of up to {largest}, vs alone repeat 0", level=1,
             value="batched", measured=True, pairs=batched.stats("repeats_alone", "repeats_batched"),
             outputs=outputs_of(s_batched)),
    ]  # fmt: skip


def _traffic_rows(keys: Sequence[Key], f: _Finals) -> list[AttributionRow]:
    ps, vs_cold = _PairSet(f.memo), _PairSet(f.memo)
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
        _row(
            "traffic", "warm before vs after 3 unrelated requests", measured=True,
            pairs=ps.stats("traffic_warm_idle", "traffic_warm"), outputs=outputs_of(warm), stop_ended=(stopped, total),
        ),
        _row(
            "traffic_vs_cold", "cold vs warm after the traffic (prefix cache included)", level=1, value="vs cold",
            measured=True, pairs=vs_cold.stats("traffic_cold", "traffic_warm"), outputs=outputs_of(both),
        ),
    ]  # fmt: skip


def _on_replica(rec: RequestRecord | None, r: int) -> RequestRecord | None:
    """A replicas record as sent to replica r: one answered by another replica is marked invalid."""
    if rec is None or rec.replica == r or rec.status == "error":
        return rec
    return replace(rec, status="invalid", error=f"sent to replica {r}, answered by replica {rec.replica}")


def _replica_rows(keys: Sequence[Key], f: _Finals, n: int) -> list[AttributionRow]:
    """replica r vs replica 0, cold vs cold and warm vs warm, per input (n: the run's replicas)."""
    total, subs = _PairSet(f.memo), []
    passes = ("replicas_cold", "replicas_warm")
    for r in range(1, n):
        ps = _PairSet(f.memo)
        for k in keys:
            for p in passes:
                a = _on_replica(f.one(k, p, **{sc.REPLICA: 0}), 0)
                ps.add(k, r, a, _on_replica(f.one(k, p, **{sc.REPLICA: r}), r), across=True)
        total.extend(ps)
        per = {
            k: [x for p in passes for x in f.all(k, p) if x.variation.get(sc.REPLICA) in (0, r)] for k in keys
        }
        subs.append(
            _row(
                sc.REPLICA_ROW, f"replica 0 vs replica {r}, cold and warm", key=f"{sc.REPLICA_ROW}_r{r}",
                level=1, value=r, measured=True, pairs=ps.stats("replica 0", f"replica {r}"),
                outputs=outputs_of(per),
            )
        )  # fmt: skip
    samples = {k: [x for p in passes for x in f.all(k, p)] for k in keys}
    head = _row(
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


def _unmeasured(spec: ScenarioSpec) -> list[AttributionRow]:
    """The cause rows of a scenario the run did not ask for (`measured` False); sub-rows only when measured."""
    rows = []
    for p in spec.pairs:
        if p.sub_row:
            continue
        named = spec.head is not None and p is spec.pairs[0]
        key, cause = (spec.head, spec.head) if named else (p.key, None)
        rows.append(_row(p.key, "not run", key=key, cause=cause, measured=False))
    return rows


@dataclass(frozen=True)
class RowContext:
    """What a scenario's row builder reads: the inputs it ran on, the run's final records and settings."""

    spec: ScenarioSpec
    keys: Sequence[Key]  # the inputs the scenarios other than cache ran on
    finals: _Finals
    settings: Mapping[str, Any]
    replicas: int  # the replicas the run's records name (run_replicas)


RowBuilder = Callable[[RowContext], list[AttributionRow]]


def batch_sizes(settings: Mapping[str, Any]) -> list[int]:
    return [int(b) for b in settings.get("batch_sizes") or sc.DEFAULT_BATCH_SIZES]


def _replicas_of(c: RowContext) -> list[AttributionRow]:
    if c.replicas < 2:
        return [_row(sc.REPLICA_ROW, "one replica: not run", measured=False)]
    return _replica_rows(c.keys, c.finals, c.replicas)


def _generic_pairs(
    c: RowContext, p: sc.PairDef, value: Any = None
) -> tuple[_PairSet, dict[Key, list[RequestRecord]]]:
    """Per input, each record of pass b (of `by` == value when given) against pass a's first record."""
    ps, samples = _PairSet(c.finals.memo), {}
    for k in c.keys:
        ref = c.finals.one(k, p.a)
        measured = c.finals.all(k, p.b)[1:] if p.a == p.b else c.finals.all(k, p.b)
        if p.by is not None and value is not None:
            measured = [r for r in measured if r.variation.get(p.by) == value]
        if not measured:
            ps.add(k, 0, ref, None)  # a planned pair without its measured record: missing
        for r in measured:
            ps.add(k, r.repetition, ref, r)
        samples[k] = [*([ref] if ref is not None else []), *measured]
    return ps, samples


def generic_rows(c: RowContext) -> list[AttributionRow]:
    """The rows of a scenario from its PairDefs alone (module docstring): a row per pair (a sub-row when the
    pair is one), and one sub-row per value of its `by` variation key."""
    rows = []
    for p in c.spec.pairs:
        ps, samples = _generic_pairs(c, p)
        level = 1 if p.sub_row else 0
        rows.append(
            _row(
                p.key, f"{p.b} vs {p.a}", level=level, value=p.key if level else None, measured=True,
                pairs=ps.stats(p.a, p.b), outputs=outputs_of(samples),
            )
        )  # fmt: skip
        values = {r.variation.get(p.by) for k in c.keys for r in c.finals.all(k, p.b)} if p.by else set()
        for v in sorted(values, key=str):
            sub, per = _generic_pairs(c, p, v)
            rows.append(
                _row(
                    p.key, f"{p.by} = {v}", key=f"{p.key}_{_safe(str(v))}", level=1, value=v, measured=True,
                    pairs=sub.stats(p.a, p.b), outputs=outputs_of(per),
                )
            )  # fmt: skip
    return rows


# the scenarios whose rows need more than their PairDefs (the others: generic_rows)
ROW_BUILDERS: dict[str, RowBuilder] = {
    "batch": lambda c: _batch_rows(c.keys, c.finals, batch_sizes(c.settings)),
    "hitlen": lambda c: _hitlen_rows(c.keys, c.finals),
    "repeats": lambda c: _repeats_rows(
        c.keys, c.finals, int(c.settings.get("repeats") or sc.DEFAULT_REPEATS)
    ),
    "traffic": lambda c: _traffic_rows(c.keys, c.finals),
    "replicas": _replicas_of,
}


def attribution(
    keys: Sequence[Key],
    sel: Selection,
    settings: Mapping[str, Any],
    agreement: Mapping[str, PairStats | None],
    memo: ScoreMemo | None = None,
) -> Attribution:
    """The attribution rows of one run (see the module docstring): the cache scenario's, then each registered
    scenario's in the registry's order. `agreement`: the run's cold_warm and warm_repeat PairStats
    (eval/analyze/score.py); `memo`: pair results kept between scorings."""
    raw = settings.get("scenarios")
    scenarios = [str(s) for s in raw] if isinstance(raw, list) else [CACHE_SCENARIO]
    concurrency = int(settings.get("concurrency") or 1)
    limit = settings.get("scenario_inputs")
    chosen = [keys[i] for i in sc.scenario_inputs(keys, limit if isinstance(limit, int) else None)]
    f = _Finals(sel, memo)
    n_replicas = run_replicas(sel)
    rows = _cache_rows(keys, f, agreement, concurrency, CACHE_SCENARIO in scenarios)
    for spec in sc.SCENARIOS.values():
        if spec.name == CACHE_SCENARIO:
            continue
        if spec.name not in scenarios:
            rows += _unmeasured(spec)
            continue
        context = RowContext(spec, chosen, f, settings, n_replicas)
        rows += ROW_BUILDERS.get(spec.name, generic_rows)(context)
    confounding = None
    if concurrency > 1 and agreement.get("cold_warm") is not None:
        measured = sorted(b for b in batch_sizes(settings) if b > 1) if "batch" in scenarios else []
        match = next((r for r in rows if r.key == f"batch_b{concurrency}"), None) if measured else None
        confounding = Confounding(concurrency, match, measured)
    return Attribution(scenarios, concurrency, len(keys), len(chosen), rows, confounding, n_replicas)


# ---------------------------------------------------------------- the cause the rows point at


POINT_NONE = "none"  # no measured row differs
POINT_NOISE = "noise"  # the very same request differs (repeats): other rows' differences may be that noise
POINT_PARTIAL = "partial prefix"  # hitlen differs only where a partial prefix was resumed
POINT_HITLEN = "hitlen"  # hitlen differs, the cache scenario's warm path does not
POINT_WARM = "warm path"  # a request that starts from a prefix hit differs from its cold twin
POINT_BATCH = "batch"  # cold requests differ in a batch
POINT_TRAFFIC = "traffic"  # warm differs after unrelated traffic, not before it
POINT_REPLICA = "replica"  # the same request differs between replicas, nothing else does
POINT_SEVERAL = "several"  # more than one of the above, no single cause


@dataclass(frozen=True)
class Pointer:
    """What the attribution rows point at: `kind` (POINT_*), the cause rows that differ (the evidence), the
    scenarios whose every measured cause row is bit-identical (clean), and the sub-rows that locate it (the
    hitlen sub-rows that differ for POINT_PARTIAL and POINT_HITLEN, repeats alone for POINT_NOISE)."""

    kind: str
    differing: list[AttributionRow]
    clean: list[str]
    sub_rows: list[AttributionRow]


def differs(r: AttributionRow) -> bool:
    """A measured row whose pairs are not all token-identical with max |delta| 0 (or that has no pair)."""
    s = r.pairs
    return (
        r.measured
        and s is not None
        and not (s.n_total > 0 and s.tokens_equal == s.n_total and not s.max_delta)
    )


def pointed_cause(a: Attribution) -> Pointer:
    """The cause the rows point at (see the POINT_* kinds), from the cause rows and the hitlen sub-rows."""
    causes = [r for r in a.rows if r.level == 0 and r.measured and r.pairs is not None]
    diff = {r.key for r in causes if differs(r)}
    scenarios = list(dict.fromkeys(r.scenario for r in causes))
    clean = [s for s in scenarios if not any(r.scenario == s and r.key in diff for r in causes)]
    differing = [r for r in causes if r.key in diff]
    subs = [
        r for r in a.rows if r.level == 1 and r.scenario == "hitlen" and r.measured and r.pairs is not None
    ]
    hit_diff = [r for r in subs if differs(r)]
    if not diff:
        return Pointer(POINT_NONE, [], clean, [])
    alone = a.row("repeats_alone")  # the same request alone: a difference there is noise
    if alone is not None and differs(alone):
        return Pointer(POINT_NOISE, differing, clean, [alone])
    if (
        diff == {"hitlen"}
        and hit_diff
        and all(r.partial for r in hit_diff)
        and any(r.partial is False for r in subs)
    ):
        return Pointer(POINT_PARTIAL, differing, clean, hit_diff)
    if diff == {"hitlen"}:
        return Pointer(POINT_HITLEN, differing, clean, hit_diff)
    if "cache_cold_warm" in diff and not diff & {"batch", "traffic"}:
        return Pointer(POINT_WARM, differing, clean, [])
    if "batch" in diff and not diff - {"batch", "batch_warm", "repeats"}:  # repeats: its batched copies
        return Pointer(POINT_BATCH, differing, clean, [])
    if diff == {"traffic"}:
        return Pointer(POINT_TRAFFIC, differing, clean, [])
    if diff == {sc.REPLICA_ROW}:
        replica_subs = [r for r in a.rows if r.level == 1 and r.scenario == "replicas" and differs(r)]
        return Pointer(POINT_REPLICA, differing, clean, replica_subs)
    return Pointer(POINT_SEVERAL, differing, clean, [])
