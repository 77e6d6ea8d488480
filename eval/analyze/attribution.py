"""Attribution: one row per cause of a difference, each from the scenario that isolates it, from records only.

Rows (cause rows, then their sub-rows, scenario by scenario in the registry's order; the pairs each compares are
the scenario's PairDefs, eval/records/scenario_kinds/<name>.py; the rows of each scenario beyond cache come from
its module in eval/analyze/scenario_rows/, eval/analyze/attribution_rows.py holds what they share):
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
A scenario without a row module of its own gets its rows from its PairDefs alone (attribution_rows.generic_rows):
per input, each record of pass b against the first record of pass a (a == b: its later records against its
first), one sub-row per value of `by`.
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eval.analyze.agreement import PairStats
from eval.analyze.attribution_rows import (
    AttributionRow,
    Finals,
    RowContext,
    builder_of,
    built_names,
    make_row,
    outputs_of,
    unmeasured,
)
from eval.analyze.memo import ScoreMemo
from eval.analyze.scenario_rows.batch import batch_sizes
from eval.analyze.scenario_rows.replicas import run_replicas
from eval.records import scenarios as sc
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection
from eval.records.manifest_parts import RunSettings
from eval.records.scenario_kinds.parts import import_scenario_modules
from eval.records.vocabulary import CACHE_SCENARIO, GENERATION_PASSES

__all__ = [
    "CONFOUNDER",
    "POINT_BATCH",
    "POINT_CAUSE",
    "POINT_HITLEN",
    "POINT_NOISE",
    "POINT_NONE",
    "POINT_PARTIAL",
    "POINT_REPLICA",
    "POINT_SEVERAL",
    "POINT_TRAFFIC",
    "POINT_WARM",
    "ROW_MODULES",
    "Attribution",
    "AttributionRow",
    "Confounding",
    "Pointer",
    "attribution",
    "differs",
    "pointed_cause",
]

# the row module of every registered scenario that has one (eval/analyze/scenario_rows/<name>.py)
ROW_MODULES = import_scenario_modules("eval.analyze.scenario_rows")

CONFOUNDER = "batch composition"


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


def _cache_rows(
    keys: Sequence[Key],
    f: Finals,
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
            make_row(
                pair_key, f"{label}, {where}", measured=measured and stats is not None, pairs=stats,
                outputs=outputs_of(samples) if stats is not None else None,
                confounded_with=confounded if stats is not None else None,
            )
        )  # fmt: skip
    return rows


def attribution(
    keys: Sequence[Key],
    sel: Selection,
    settings: RunSettings,
    agreement: Mapping[str, PairStats | None],
    memo: ScoreMemo | None = None,
) -> Attribution:
    """The attribution rows of one run (see the module docstring): the cache scenario's, then each registered
    scenario's in the registry's order. `agreement`: the run's cold_warm and warm_repeat PairStats
    (eval/analyze/score.py); `memo`: pair results kept between scorings."""
    scenarios = list(settings.scenarios) if settings.scenarios is not None else [CACHE_SCENARIO]
    concurrency = settings.concurrency
    chosen = [keys[i] for i in sc.scenario_inputs(keys, settings.scenario_inputs)]
    f = Finals(sel, memo)
    n_replicas = run_replicas(sel)
    rows = _cache_rows(keys, f, agreement, concurrency, CACHE_SCENARIO in scenarios)
    for spec in sc.SCENARIOS.values():
        if spec.name == CACHE_SCENARIO:
            continue
        if spec.name not in scenarios:
            rows += unmeasured(spec)
            continue
        context = RowContext(spec, chosen, f, settings, n_replicas)
        rows += builder_of(spec.name)(context)
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
POINT_CAUSE = "cause"  # the one differing cause row is a scenario's with generic rows (no pointer of its own)
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
    if len(differing) == 1 and differing[0].scenario not in (CACHE_SCENARIO, *built_names()):
        return Pointer(POINT_CAUSE, differing, clean, [])
    return Pointer(POINT_SEVERAL, differing, clean, [])
