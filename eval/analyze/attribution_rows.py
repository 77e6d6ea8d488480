"""What every scenario's attribution rows are built from: the row types, the final records by (input, pass), a
set of pairs with their counts, the distinct outputs, and the registry of row builders by scenario name.

A scenario's rows come from the row builder its module in eval/analyze/scenario_rows/ registers under the
scenario's name (`register_rows`), or, for a scenario without one, from its PairDefs alone (`generic_rows`): per
input, each record of pass b against the first record of pass a (a == b: its later records against its first),
one sub-row per value of the pair's `by` variation key. A scenario the run did not ask for gives its cause rows
with `measured` False (`unmeasured`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval.analyze.agreement import Pair, PairStats, pair_kind, pair_stats
from eval.analyze.memo import ScoreMemo, pair_result
from eval.records import scenarios as sc
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection
from eval.records.manifest_parts import RunSettings
from eval.records.scenario_kinds.parts import ScenarioParts
from eval.records.scenarios import ScenarioSpec
from eval.records.types import RequestRecord
from scorers import determinism


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


# ---------------------------------------------------------------- records by input


class Finals:
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


class PairSet:
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

    def extend(self, other: PairSet) -> None:
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


def make_row(
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


def safe_key(name: str) -> str:
    """A row key part: letters, digits, + and - kept, the rest made _ ("last block" -> "last_block")."""
    return re.sub(r"[^A-Za-z0-9+-]", "_", name)


def unmeasured(spec: ScenarioSpec) -> list[AttributionRow]:
    """The cause rows of a scenario the run did not ask for (`measured` False); sub-rows only when measured."""
    rows = []
    for p in spec.pairs:
        if p.sub_row:
            continue
        named = spec.head is not None and p is spec.pairs[0]
        key, cause = (spec.head, spec.head) if named else (p.key, None)
        rows.append(make_row(p.key, "not run", key=key, cause=cause, measured=False))
    return rows


@dataclass(frozen=True)
class RowContext:
    """What a scenario's row builder reads: the inputs it ran on, the run's final records and settings."""

    spec: ScenarioSpec
    keys: Sequence[Key]  # the inputs the scenarios other than cache ran on
    finals: Finals
    # the run's settings: the plan's named ones as fields, a registered scenario's own in `scenario_settings`
    settings: RunSettings
    replicas: int  # the replicas the run's records name (run_replicas)


RowBuilder = Callable[[RowContext], list[AttributionRow]]
_BUILDERS: ScenarioParts[RowBuilder | None] = ScenarioParts("row builder", None)


def register_rows(name: str, builder: RowBuilder) -> RowBuilder:
    """A scenario's row builder, under the scenario's name; a second one, or one of no registered scenario, is
    refused."""
    _BUILDERS.register(name, builder)
    return builder


def unregister_rows(name: str) -> None:
    """Take a row builder away (a test's); KeyError when none has that name."""
    _BUILDERS.unregister(name)


def builder_of(name: str) -> RowBuilder:
    """The scenario's row builder, `generic_rows` when it registered none."""
    return _BUILDERS.of(name) or generic_rows


def built_names() -> tuple[str, ...]:
    """The scenarios with a row builder of their own."""
    return _BUILDERS.names()


def _generic_pairs(
    c: RowContext, p: sc.PairDef, value: Any = None
) -> tuple[PairSet, dict[Key, list[RequestRecord]]]:
    """Per input, each record of pass b (of `by` == value when given) against pass a's first record."""
    ps, samples = PairSet(c.finals.memo), {}
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
            make_row(
                p.key, f"{p.b} vs {p.a}", level=level, value=p.key if level else None, measured=True,
                pairs=ps.stats(p.a, p.b), outputs=outputs_of(samples),
            )
        )  # fmt: skip
        values = {r.variation.get(p.by) for k in c.keys for r in c.finals.all(k, p.b)} if p.by else set()
        for v in sorted(values, key=str):
            sub, per = _generic_pairs(c, p, v)
            rows.append(
                make_row(
                    p.key, f"{p.by} = {v}", key=f"{p.key}_{safe_key(str(v))}", level=1, value=v, measured=True,
                    pairs=sub.stats(p.a, p.b), outputs=outputs_of(per),
                )
            )  # fmt: skip
    return rows
